// The skip list and the known-failures list of the conformance suite.
//
// One entry per line: a test name, optionally prefixed by its folder
// ("node/test_abs") and optionally ending in '*' (a prefix match), then the
// reason. '#' starts a comment; blank lines are ignored.
#ifndef KILN_TESTS_CONFORMANCE_CASE_LIST_H_
#define KILN_TESTS_CONFORMANCE_CASE_LIST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

class CaseList {
 public:
  static absl::StatusOr<CaseList> Load(const std::string& path);
  static CaseList Parse(const std::string& text);

  // The reason of the first entry matching folder/name, or null.
  const std::string* Find(const std::string& folder, const std::string& name) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string folder;  // empty: any folder
    std::string name;
    bool prefix = false;
    std::string reason;
  };
  std::vector<Entry> entries_;
};

}  // namespace kiln

#endif  // KILN_TESTS_CONFORMANCE_CASE_LIST_H_

#include "tests/conformance/case_list.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "engine/base/status.h"
#include "engine/onnx/tensor_proto.h"

namespace kiln {

absl::StatusOr<CaseList> CaseList::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return Parse(text);
}

CaseList CaseList::Parse(const std::string& text) {
  CaseList list;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    size_t space = line.find_first_of(" \t");
    Entry e;
    std::string name(line.substr(0, space));
    if (space != absl::string_view::npos)
      e.reason = std::string(absl::StripAsciiWhitespace(line.substr(space)));
    size_t slash = name.find('/');
    if (slash != std::string::npos) {
      e.folder = name.substr(0, slash);
      name = name.substr(slash + 1);
    }
    if (!name.empty() && name.back() == '*') {
      e.prefix = true;
      name.pop_back();
    }
    e.name = name;
    list.entries_.push_back(std::move(e));
  }
  return list;
}

const std::string* CaseList::Find(const std::string& folder, const std::string& name) const {
  for (const Entry& e : entries_) {
    if (!e.folder.empty() && e.folder != folder) continue;
    if (e.prefix ? absl::StartsWith(name, e.name) : name == e.name) return &e.reason;
  }
  return nullptr;
}

}  // namespace kiln

// FlagParser: a small command-line flag parser for kilnd and the kiln CLI.
// Flags are `--name=value` or `--name value`; booleans also `--name` /
// `--noname`; list flags may repeat. Unknown flags and bad values are
// errors (never a crash). Arguments that are not flags are collected as
// positionals; `--` ends flag parsing.
//
// Thread safety: thread-compatible (use from one thread).
#ifndef KILN_SERVER_FLAGS_H_
#define KILN_SERVER_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kiln {

class FlagParser {
 public:
  void AddString(const std::string& name, std::string* value, const std::string& help);
  void AddInt(const std::string& name, int64_t* value, const std::string& help);
  void AddDouble(const std::string& name, double* value, const std::string& help);
  void AddBool(const std::string& name, bool* value, const std::string& help);
  void AddList(const std::string& name, std::vector<std::string>* value, const std::string& help);

  // Parses argv[first..argc).
  absl::Status Parse(int argc, char** argv, int first = 1);
  const std::vector<std::string>& positional() const { return positional_; }
  // Whether the command line gave flag `name` (even with its default value).
  bool IsSet(const std::string& name) const;
  // One line per flag: name, default, help.
  std::string Usage() const;

 private:
  enum class Kind { kString, kInt, kDouble, kBool, kList };
  struct Flag {
    std::string name;
    Kind kind;
    void* value;
    std::string help;
    std::string default_text;
    bool set = false;
  };
  absl::Status Set(Flag& f, const std::string& text);
  Flag* Find(const std::string& name);

  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
};

}  // namespace kiln

#endif  // KILN_SERVER_FLAGS_H_

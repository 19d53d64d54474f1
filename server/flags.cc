#include "server/flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {

void FlagParser::AddString(const std::string& name, std::string* value, const std::string& help) {
  flags_.push_back({name, Kind::kString, value, help, *value});
}
void FlagParser::AddInt(const std::string& name, int64_t* value, const std::string& help) {
  flags_.push_back({name, Kind::kInt, value, help, absl::StrCat(*value)});
}
void FlagParser::AddDouble(const std::string& name, double* value, const std::string& help) {
  flags_.push_back({name, Kind::kDouble, value, help, absl::StrCat(*value)});
}
void FlagParser::AddBool(const std::string& name, bool* value, const std::string& help) {
  flags_.push_back({name, Kind::kBool, value, help, *value ? "true" : "false"});
}
void FlagParser::AddList(const std::string& name, std::vector<std::string>* value,
                         const std::string& help) {
  flags_.push_back({name, Kind::kList, value, help, absl::StrJoin(*value, ",")});
}

FlagParser::Flag* FlagParser::Find(const std::string& name) {
  for (Flag& f : flags_)
    if (f.name == name) return &f;
  return nullptr;
}

bool FlagParser::IsSet(const std::string& name) const {
  for (const Flag& f : flags_)
    if (f.name == name) return f.set;
  return false;
}

absl::Status FlagParser::Set(Flag& f, const std::string& text) {
  f.set = true;
  switch (f.kind) {
    case Kind::kString:
      *static_cast<std::string*>(f.value) = text;
      return absl::OkStatus();
    case Kind::kList:
      static_cast<std::vector<std::string>*>(f.value)->push_back(text);
      return absl::OkStatus();
    case Kind::kInt:
      if (!absl::SimpleAtoi(text, static_cast<int64_t*>(f.value)))
        return absl::InvalidArgumentError(absl::StrCat("--", f.name, ": '", text,
                                                       "' is not an integer"));
      return absl::OkStatus();
    case Kind::kDouble:
      if (!absl::SimpleAtod(text, static_cast<double*>(f.value)))
        return absl::InvalidArgumentError(absl::StrCat("--", f.name, ": '", text,
                                                       "' is not a number"));
      return absl::OkStatus();
    case Kind::kBool:
      if (text == "true" || text == "1" || text == "yes") {
        *static_cast<bool*>(f.value) = true;
      } else if (text == "false" || text == "0" || text == "no") {
        *static_cast<bool*>(f.value) = false;
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", f.name, ": '", text,
                                                       "' is not a boolean"));
      }
      return absl::OkStatus();
  }
  return absl::InternalError("bad flag kind");
}

absl::Status FlagParser::Parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional_.push_back(argv[i]);
      break;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      positional_.push_back(arg);
      continue;
    }
    std::string body = arg.substr(2);
    size_t eq = body.find('=');
    std::string name = eq == std::string::npos ? body : body.substr(0, eq);
    Flag* f = Find(name);
    if (f == nullptr && eq == std::string::npos && name.rfind("no", 0) == 0) {
      Flag* b = Find(name.substr(2));
      if (b && b->kind == Kind::kBool) {
        *static_cast<bool*>(b->value) = false;
        b->set = true;
        continue;
      }
    }
    if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    if (eq != std::string::npos) {
      absl::Status s = Set(*f, body.substr(eq + 1));
      if (!s.ok()) return s;
      continue;
    }
    if (f->kind == Kind::kBool) {
      *static_cast<bool*>(f->value) = true;
      f->set = true;
      continue;
    }
    if (i + 1 >= argc)
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
    absl::Status s = Set(*f, argv[++i]);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string FlagParser::Usage() const {
  std::string out;
  for (const Flag& f : flags_) {
    absl::StrAppend(&out, "  --", f.name);
    if (!f.default_text.empty()) absl::StrAppend(&out, " (default ", f.default_text, ")");
    absl::StrAppend(&out, "\n      ", f.help, "\n");
  }
  return out;
}

}  // namespace kiln

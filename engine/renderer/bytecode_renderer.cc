#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/renderer/renderer.h"

namespace kiln {

std::string FormatConst(const UOp& c) {
  ConstValue v = c.const_value();
  if (const auto* i = std::get_if<int64_t>(&v)) {
    if (c.dtype().scalar == ScalarType::kUInt64) return std::to_string(static_cast<uint64_t>(*i));
    return std::to_string(*i);
  }
  double d = std::get<double>(v);
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", d);
  return buf;
}

std::string RenderBytecode(const std::string& name, const UOpList& uops) {
  std::unordered_map<const UOp*, int> id;
  std::string out = absl::StrCat("kernel ", name, "\n");
  for (const UOpRef& u : uops) {
    int i = static_cast<int>(id.size());
    id[u.get()] = i;
    std::vector<std::string> srcs;
    for (const UOpRef& s : u->src()) {
      auto it = id.find(s.get());
      KILN_CHECK(it != id.end(), "bytecode: source used before definition: ", s->Describe());
      srcs.push_back(absl::StrCat("%", it->second));
    }
    std::string arg;
    switch (u->op()) {
      case Op::kConst: arg = FormatConst(*u); break;
      case Op::kRange: {
        const auto& a = u->arg().Ints();
        arg = absl::StrCat(a[0], a.size() > 1 && a[1] ? " parallel" : "");
        break;
      }
      case Op::kDefineGlobal: case Op::kGep: case Op::kDefineAcc: arg = u->arg().ToString(); break;
      case Op::kDefineVar: arg = u->arg().Str(); break;
      default: break;
    }
    absl::StrAppend(&out, "%", i, " = ", OpName(u->op()), " ", u->dtype().Name(), " (",
                    absl::StrJoin(srcs, ", "), ")", arg.empty() ? "" : " " + arg, "\n");
  }
  return out + "end\n";
}

}  // namespace kiln

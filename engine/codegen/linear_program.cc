#include "engine/codegen/linear_program.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/uop/symbolic.h"

namespace kiln {
namespace {

// Nodes that only compute addresses or gates (not counted as FLOPs).
std::unordered_set<const UOp*> AddressNodes(const UOpList& uops) {
  std::unordered_set<const UOp*> addr;
  std::vector<const UOp*> stack;
  for (const UOpRef& u : uops) {
    if (u->op() == Op::kLoad || u->op() == Op::kStore) {
      for (size_t i = 1; i < u->src().size(); ++i) {
        if (u->op() == Op::kStore && i == 2) continue;  // the stored value
        if (u->op() == Op::kLoad && i == 3) continue;   // the alternative value
        stack.push_back(u->src(i).get());
      }
    }
  }
  while (!stack.empty()) {
    const UOp* u = stack.back();
    stack.pop_back();
    if (!addr.insert(u).second) continue;
    for (const UOpRef& s : u->src()) stack.push_back(s.get());
  }
  return addr;
}

bool AddressesMemory(const UOp& u) {
  return u.op() == Op::kDefineGlobal || u.op() == Op::kDefineLocal;
}

}  // namespace

absl::Status CheckLinearProgram(const LinearProgram& p) {
  auto fail = [&](size_t i, const std::string& what) {
    return absl::InternalError(absl::StrCat("lowering ", p.name, ": ", what, " at %", i, " (",
                                            p.uops[i]->Describe(), ")"));
  };
  std::unordered_set<const UOp*> live;
  std::vector<std::vector<const UOp*>> scopes(1);  // values defined per open loop
  std::vector<const UOp*> loops;
  for (size_t i = 0; i < p.uops.size(); ++i) {
    const UOp& u = *p.uops[i];
    const bool is_buffer = u.op() == Op::kDefineGlobal;
    if (is_buffer != (static_cast<int>(i) < p.num_bufs))
      return fail(i, "buffers must come first, and only there");
    if (is_buffer && u.arg().Int() != static_cast<int64_t>(i))
      return fail(i, "buffer out of parameter order");
    for (const UOpRef& s : u.src())
      if (!live.count(s.get())) return fail(i, "a source is not defined here: " + s->Describe());
    if ((u.op() == Op::kLoad || u.op() == Op::kStore) && !AddressesMemory(*u.src(0)))
      return fail(i, "LOAD / STORE of something other than a buffer");
    if (u.op() == Op::kEndRange) {
      if (loops.empty() || u.src(0).get() != loops.back())
        return fail(i, "ENDRANGE of a loop that is not the innermost open one");
      for (const UOp* v : scopes.back()) live.erase(v);
      scopes.pop_back();
      loops.pop_back();
      continue;
    }
    live.insert(&u);
    // An ASSIGN names its accumulator, which outlives the loop.
    if (u.op() != Op::kAssign) scopes.back().push_back(&u);
    if (u.op() == Op::kRange) {
      loops.push_back(&u);
      scopes.emplace_back();
    }
  }
  if (!loops.empty())
    return absl::InternalError(absl::StrCat("lowering ", p.name, ": ", loops.size(),
                                            " loop(s) never closed"));
  return absl::OkStatus();
}

void EstimateCosts(LinearProgram* p, const std::vector<int64_t>& buffer_bytes) {
  std::unordered_set<const UOp*> addr = AddressNodes(p->uops);
  // GPU kernels run once per thread: the product of the grid / block sizes.
  double threads = 1;
  for (const UOpRef& u : p->uops)
    if (u->op() == Op::kSpecial) threads *= static_cast<double>(u->src(0)->vmax());
  std::vector<double> trips = {threads};
  std::vector<double> touched(buffer_bytes.size(), 0);
  double flops = 0;
  for (const UOpRef& u : p->uops) {
    double mult = trips.back();
    if (u->op() == Op::kRange) {
      double n = static_cast<double>(u->src(1)->vmax() - u->src(0)->vmin());
      trips.push_back(mult * std::max(n, 0.0));
      continue;
    }
    if (u->op() == Op::kEndRange) {
      trips.pop_back();
      continue;
    }
    int lanes = u->dtype().count;
    if (IsAlu(u->op()) && !addr.count(u.get()))
      flops += mult * lanes * (u->op() == Op::kMulAcc ? 2 : 1);
    if ((u->op() == Op::kLoad || u->op() == Op::kStore) &&
        u->src(0)->op() == Op::kDefineGlobal) {  // not local memory
      int b = static_cast<int>(u->src(0)->arg().Int());
      DType dt = u->op() == Op::kLoad ? u->dtype() : u->src(2)->dtype();
      if (b < static_cast<int>(touched.size())) touched[b] += mult * dt.ItemSize();
    }
  }
  double bytes = 0;
  for (size_t i = 0; i < touched.size(); ++i)
    bytes += std::min(touched[i], static_cast<double>(buffer_bytes[i]));
  p->flops = flops;
  p->bytes = bytes;
}

std::string ListProgram(const LinearProgram& p) {
  std::unordered_map<const UOp*, int> id;
  std::string out;
  for (const UOpRef& u : p.uops) {
    int i = static_cast<int>(id.size());
    id[u.get()] = i;
    std::vector<std::string> srcs;
    for (const UOpRef& s : u->src()) {
      auto it = id.find(s.get());
      srcs.push_back(it == id.end() ? RenderExpr(s) : absl::StrCat("%", it->second));
    }
    absl::StrAppend(&out, "%", i, " = ", OpName(u->op()), " ", u->dtype().Name(), " (",
                    absl::StrJoin(srcs, ", "), ")",
                    u->arg().IsNone() ? "" : " " + u->arg().ToString(), "\n");
  }
  return out;
}

}  // namespace kiln

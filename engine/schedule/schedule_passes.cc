#include "engine/schedule/schedule_passes.h"

#include <map>
#include <unordered_map>
#include <unordered_set>

#include "engine/base/status.h"
#include "engine/uop/buffer.h"

namespace kiln {

const Shape& ShapeInfer::Of(const UOpRef& root) {
  auto hit = memo_.find(root.get());
  if (hit != memo_.end()) return hit->second;
  // Post-order over the nodes not seen yet (the walk stops at memoized
  // ones, so asking for many nodes of a deep graph stays linear).
  std::vector<const UOp*> order;
  std::vector<std::pair<const UOp*, size_t>> stack = {{root.get(), 0}};
  std::unordered_set<const UOp*> seen = {root.get()};
  while (!stack.empty()) {
    auto& [x, i] = stack.back();
    if (i < x->src().size()) {
      const UOp* s = x->src()[i++].get();
      if (!memo_.count(s) && seen.insert(s).second) stack.push_back({s, 0});
    } else {
      order.push_back(x);
      stack.pop_back();
    }
  }
  for (const UOp* u : order) {
    Shape s;
    switch (u->op()) {
      case Op::kBuffer: s = {BufferOf(*u).size()}; break;
      case Op::kConst: s = {}; break;
      case Op::kView: s = StOf(*u)->shape(); break;
      case Op::kGather: s = memo_.at(u->src(1).get()); break;
      case Op::kReduceAxis:
        s = memo_.at(u->src(0).get());
        for (int64_t a : ReduceAxesOf(*u)) s[a] = 1;
        break;
      default:
        KILN_CHECK(!u->src().empty(), "shape of ", u->Describe());
        s = memo_.at(u->src(u->op() == Op::kWhere ? 1 : 0).get());
    }
    keep_.push_back(u->ref());
    memo_[u] = std::move(s);
  }
  return memo_.at(root.get());
}

void PlanMemory(Schedule* s, const std::unordered_set<const UOp*>& outputs,
                const std::string& device) {
  std::unordered_map<const UOp*, size_t> last_use, first_def;
  for (size_t i = 0; i < s->items.size(); ++i) {
    const ScheduleItem& it = s->items[i];
    first_def.emplace(it.bufs[0].get(), i);
    for (const UOpRef& b : it.bufs) last_use[b.get()] = i;
  }
  struct Slot {
    UOpRef buf;
    int64_t nbytes;
    size_t free_after;  // item index of the last reader
  };
  std::vector<Slot> slots;
  std::unordered_map<const UOp*, UOpRef> remap;
  for (size_t i = 0; i < s->items.size(); ++i) {
    const UOpRef& b = s->items[i].bufs[0];
    if (outputs.count(b.get()) || first_def.at(b.get()) != i) continue;
    int64_t nbytes = BufferOf(*b).size() * b->dtype().ItemSize();
    Slot* best = nullptr;
    for (Slot& sl : slots) {
      if (sl.free_after < i && sl.nbytes >= nbytes && (!best || sl.nbytes < best->nbytes))
        best = &sl;
    }
    if (!best) {
      // A slot holds raw bytes: a uint8 buffer of the byte size.
      slots.push_back({NewBuffer(dtypes::kUInt8, nbytes, device), nbytes, 0});
      best = &slots.back();
      s->intermediates.push_back(best->buf);
    }
    best->free_after = last_use.at(b.get());
    remap[b.get()] = best->buf;
  }
  for (ScheduleItem& it : s->items)
    for (UOpRef& b : it.bufs) {
      auto r = remap.find(b.get());
      if (r != remap.end()) b = r->second;
    }
}

absl::Status Unbind(ScheduleItem* item) {
  std::map<std::string, int64_t> vals;
  std::unordered_map<const UOp*, UOpRef> memo;
  bool any = false;
  for (const UOp* u : Toposort(item->ast)) {
    UOpList src;
    bool changed = false;
    for (const UOpRef& s : u->src()) {
      src.push_back(memo.at(s.get()));
      changed |= src.back() != s;
    }
    Arg arg = u->arg();
    const ShapeTracker* st = StOf(*u);
    if (st && st->HasBinds()) {
      ShapeTracker unbound = *st;
      if (!st->Unbind(&unbound, &vals))
        return absl::InvalidArgumentError("a kernel binds one variable to two values");
      arg = Arg(StArg(unbound));
      changed = any = true;
    }
    memo[u] = changed ? UOp::Make(u->op(), u->dtype(), std::move(src), std::move(arg)) : u->ref();
  }
  if (!any) return absl::OkStatus();
  item->ast = memo.at(item->ast.get());
  item->var_vals.assign(vals.begin(), vals.end());
  return absl::OkStatus();
}

}  // namespace kiln

#include "engine/codegen/emitter.h"

#include <algorithm>
#include <utility>

namespace kiln {

Emitter::Emitter() : root_(std::make_unique<Scope>()) { open_.push_back(root_.get()); }

void Emitter::Emit(const UOpRef& u, bool pin) {
  if (depth_.count(u.get())) return;
  int d = 0;
  bool pinned =
      pin || u->op() == Op::kDefineAcc || u->op() == Op::kAssign || u->op() == Op::kStore;
  for (const UOpRef& s : u->src()) {
    Emit(s);
    d = std::max(d, depth_.at(s.get()));
    if (acc_dep_.count(s.get())) pinned = true;
  }
  if (pinned) d = Depth();
  if (u->op() == Op::kDefineAcc || u->op() == Op::kAssign || pinned) acc_dep_.insert(u.get());
  if (u->op() == Op::kStore || u->op() == Op::kDefineAcc) acc_dep_.insert(u.get());
  Scope* s = open_[d];
  if (d == Depth()) {
    s->items.push_back({u, nullptr});
  } else {  // before the open child scope
    s->items.insert(s->items.end() - 1, Item{u, nullptr});
  }
  depth_[u.get()] = d;
  keep_.push_back(u);
}

void Emitter::OpenLoop(const UOpRef& range) {
  for (const UOpRef& s : range->src()) Emit(s);
  auto child = std::make_unique<Scope>();
  Scope* c = child.get();
  open_.back()->items.push_back({range, std::move(child)});
  open_.push_back(c);
  depth_[range.get()] = Depth();
  keep_.push_back(range);
}

UOpList Emitter::Flatten() const {
  UOpList out;
  FlattenInto(*root_, &out);
  return out;
}

void Emitter::FlattenInto(const Scope& s, UOpList* out) {
  for (const Item& it : s.items) {
    out->push_back(it.u);
    if (it.child) {
      FlattenInto(*it.child, out);
      out->push_back(UOp::Make(Op::kEndRange, dtypes::kVoid, {it.u}));
    }
  }
}

}  // namespace kiln

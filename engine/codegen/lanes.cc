#include "engine/codegen/lanes.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

#include "engine/uop/symbolic.h"

namespace kiln {

bool Contains(const UOpRef& expr, const UOp* v) {
  for (const UOp* u : Toposort(expr))
    if (u == v) return true;
  return false;
}

UOpRef Broadcast(const UOpRef& x, int64_t w) {
  if (w == 1) return x;
  return UOp::Make(Op::kVectorize, x->dtype().Vec(static_cast<int>(w)), UOpList(w, x));
}

UOpRef ConstOf(DType dt, double v) {
  if (dt.IsFloat()) return UOp::Const(dt.Scalar(), v);
  return UOp::Const(dt.Scalar(), static_cast<int64_t>(v));
}

UOpRef GatedLoad(const UOpRef& buf, DType dt, const UOpRef& idx, const UOpRef& valid) {
  if (valid->IsConstInt(0)) return ConstOf(dt, 0);
  if (valid->IsConstInt(1)) return UOp::Make(Op::kLoad, dt, {buf, idx});
  return UOp::Make(Op::kLoad, dt, {buf, idx, valid, ConstOf(dt, 0)});
}

UOpRef Lanes::At(const UOpRef& e, int64_t l) const {
  return Simplify(Substitute(e, {{lane_.get(), UOp::ConstInt(l)}}));
}

UOpRef Lanes::Vector(const UOpRef& e, int64_t w) const {
  if (!Contains(e, lane_.get())) return Broadcast(e, w);
  if (e == lane_) {
    UOpList lanes;
    for (int64_t l = 0; l < w; ++l) lanes.push_back(UOp::ConstInt(l, e->dtype()));
    return UOp::Make(Op::kVectorize, e->dtype().Vec(static_cast<int>(w)), lanes);
  }
  UOpList src;
  for (const UOpRef& s : e->src()) src.push_back(Vector(s, w));
  return UOp::Make(e->op(), e->dtype().Vec(static_cast<int>(w)), src, e->arg());
}

UOpRef Lanes::Load(const UOpRef& buf, DType dt, const UOpRef& idx, const UOpRef& valid,
                   int64_t w) const {
  if (w == 1 || (!Contains(idx, lane_.get()) && !Contains(valid, lane_.get())))
    return Broadcast(GatedLoad(buf, dt, idx, valid), w);
  UOpRef idx0 = At(idx, 0);
  if (Simplify(idx - idx0) == lane_) {  // consecutive lanes: one vector load
    DType vt = dt.Vec(static_cast<int>(w));
    if (!Contains(valid, lane_.get())) {
      if (valid->IsConstInt(0)) return Broadcast(ConstOf(dt, 0), w);
      if (valid->IsConstInt(1)) return UOp::Make(Op::kLoad, vt, {buf, idx0});
      return UOp::Make(Op::kLoad, vt, {buf, idx0, valid, Broadcast(ConstOf(dt, 0), w)});
    }
    // A gate per lane (a padded or masked tail): lanes whose gate is false
    // are not read (a masked vector load).
    return UOp::Make(Op::kLoad, vt, {buf, SafeIndex(valid, idx0), Vector(valid, w),
                                     Broadcast(ConstOf(dt, 0), w)});
  }
  if (UOpRef v = SpanLoad(buf, dt, idx, valid, idx0, w)) return v;
  UOpList lanes;
  for (int64_t l = 0; l < w; ++l)
    lanes.push_back(GatedLoad(buf, dt, At(idx, l), At(valid, l)));
  return UOp::Make(Op::kVectorize, dt.Vec(static_cast<int>(w)), lanes);
}

// The address of a masked vector load: where the lane-independent part of
// the gate is false (a concat input outside its channels) every lane is
// off and the address may be far outside the buffer; a masked load there
// still costs a fault-suppression assist on some CPUs (hundreds of cycles).
// Such loads use index 0 instead.
UOpRef Lanes::SafeIndex(const UOpRef& valid, const UOpRef& idx) const {
  UOpRef uniform;
  std::vector<UOpRef> stack = {valid};
  while (!stack.empty()) {
    UOpRef g = stack.back();
    stack.pop_back();
    if (g->op() == Op::kAnd) {
      stack.push_back(g->src(0));
      stack.push_back(g->src(1));
    } else if (!Contains(g, lane_.get())) {
      uniform = uniform ? LogicalAnd(uniform, g) : g;
    }
  }
  if (!uniform || uniform->IsConstInt(1)) return idx;
  return UOp::Make(Op::kWhere, idx->dtype(), {Simplify(uniform), idx, UOp::ConstInt(0, idx->dtype())});
}

// The gate of each element some lane reads: the distinct gates of the lanes
// reading it, or-ed in lane order.
std::map<int64_t, UOpRef> Lanes::UsedGates(const UOpRef& valid,
                                           const std::vector<int64_t>& off) const {
  std::map<int64_t, UOpList> seen;
  for (size_t l = 0; l < off.size(); ++l) {
    UOpList& gates = seen[off[l]];
    UOpRef v = At(valid, static_cast<int64_t>(l));
    if (std::find(gates.begin(), gates.end(), v) == gates.end()) gates.push_back(v);
  }
  std::map<int64_t, UOpRef> out;
  for (const auto& [e, gates] : seen) {
    UOpRef g = gates[0];
    for (size_t i = 1; i < gates.size(); ++i) g = LogicalOr(g, gates[i]);
    out[e] = Simplify(g);
  }
  return out;
}

// Whether element `e` of a span is read: some lane that uses it is valid.
// An element no lane uses (a stride-2 window's odd elements) is read when
// the used elements on either side of it are: it is in bounds then, and the
// vector's gates come out all set wherever the lanes' are (a masked load
// checks for that and loads plainly; with those elements off it never could).
static UOpRef ElementGate(const std::map<int64_t, UOpRef>& used, int64_t e) {
  auto above = used.lower_bound(e);
  if (above != used.end() && above->first == e) return above->second;
  if (above == used.end() || above == used.begin()) return UOp::Const(dtypes::kBool, int64_t{0});
  return Simplify(LogicalAnd(std::prev(above)->second, above->second));
}

// Lanes at constant offsets from lane 0 that fall into at most two
// windows of w elements (a nearest upsample repeats elements, a stride-2
// window skips every other one, an interleave of two planes alternates
// between them): one vector load per window, each element read only if a
// lane that uses it is valid, then a shuffle. nullptr if not that shape.
UOpRef Lanes::SpanLoad(const UOpRef& buf, DType dt, const UOpRef& idx, const UOpRef& valid,
                     const UOpRef& idx0, int64_t w) const {
  std::vector<int64_t> off(w);
  for (int64_t l = 0; l < w; ++l) {
    UOpRef d = Simplify(At(idx, l) - idx0);
    if (!d->IsConst()) return nullptr;
    off[l] = std::get<int64_t>(d->const_value());
  }
  const int64_t lo = *std::min_element(off.begin(), off.end());
  for (int64_t& o : off) o -= lo;  // offsets from the lowest element
  const UOpRef base = Simplify(idx0 + lo);
  const int64_t span = *std::max_element(off.begin(), off.end()) + 1;
  const DType vt = dt.Vec(static_cast<int>(w));
  const UOpRef zero = Broadcast(ConstOf(dt, 0), w);
  const bool uniform = !Contains(valid, lane_.get());
  auto lane_gated = [&](UOpRef r) {
    // A lane whose own gate is false reads 0 even where its element was
    // loaded for another lane.
    return uniform ? r : UOp::Make(Op::kWhere, vt, {Vector(valid, w), r, zero});
  };
  if (span == 1) {  // one element for every lane: a scalar load
    return lane_gated(Broadcast(GatedLoad(buf, dt, base, UsedGates(valid, off).at(0)), w));
  }
  // Windows: [start, start + w) with `last` the highest element used in it.
  std::vector<int64_t> sorted = off;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::pair<int64_t, int64_t>> win;  // (start, last)
  for (int64_t o : sorted) {
    if (win.empty() || o - win.back().first >= w) win.push_back({o, o});
    else win.back().second = o;
  }
  if (win.size() > 2) return nullptr;
  // Every element between the lowest and the highest is in bounds when
  // the gates on either side are set (ElementGate): a span of w..2w is
  // covered by two loads, the second moved back to end at the span's end, so
  // no element past the highest is gated off.
  if (win.size() == 2 && span <= 2 * w) win = {{0, w - 1}, {span - w, span - 1}};
  const std::map<int64_t, UOpRef> used =
      uniform ? std::map<int64_t, UOpRef>{} : UsedGates(valid, off);
  UOpList parts;
  for (const auto& [start, last] : win) {
    UOpList gates;
    bool all = true, same = true;
    for (int64_t e = start; e < start + w; ++e)
      gates.push_back(uniform ? (e <= last ? valid : UOp::Const(dtypes::kBool, int64_t{0}))
                              : ElementGate(used, e));
    for (const UOpRef& g : gates) all &= g->IsConstInt(1), same &= g == gates[0];
    UOpRef at = Simplify(base + start);
    if (all) {
      parts.push_back(UOp::Make(Op::kLoad, vt, {buf, at}));
    } else if (same) {  // one gate for the whole vector
      parts.push_back(UOp::Make(Op::kLoad, vt, {buf, at, gates[0], zero}));
    } else {
      UOpRef gv = UOp::Make(Op::kVectorize, dtypes::kBool.Vec(static_cast<int>(w)), gates);
      parts.push_back(UOp::Make(Op::kLoad, vt, {buf, SafeIndex(valid, at), gv, zero}));
    }
  }
  UOpList lanes;
  for (int64_t l = 0; l < w; ++l) {
    size_t j = win.size() - 1;
    while (off[l] < win[j].first) --j;
    lanes.push_back(UOp::Make(Op::kGep, dt, {parts[j]}, Arg(off[l] - win[j].first)));
  }
  return lane_gated(UOp::Make(Op::kVectorize, vt, lanes));
}

}  // namespace kiln

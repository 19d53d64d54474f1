#include "engine/codegen/lowerer_local.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/uop/pattern.h"
#include "engine/uop/symbolic.h"

namespace kiln {
namespace {

bool Uses(const UOpRef& expr, const UOpRef& v) {
  for (const UOp* u : Toposort(expr))
    if (u == v.get()) return true;
  return false;
}

// The terms of a conjunction.
void Conjuncts(const UOpRef& g, UOpList* out) {
  if (g->op() == Op::kAnd) {
    Conjuncts(g->src(0), out);
    Conjuncts(g->src(1), out);
  } else if (!g->IsConstInt(1)) {
    out->push_back(g);
  }
}

}  // namespace

std::vector<StagedOperand> StagedOperands(const Kernel& k, int axis) {
  std::vector<StagedOperand> out;
  const UOp* red = k.reduce();
  if (!red || axis < k.first_reduce() + k.group_dims() || axis >= k.first_upcast()) return out;
  const Shape& shape = k.full_shape();
  const int n = k.ndim();
  UOpList vars, out_vars;
  const UOp* store = k.ast()->src(0).get();
  for (int a = 0; a < n; ++a) {
    vars.push_back(UOp::Variable(absl::StrCat("s", a), 0, std::max<int64_t>(shape[a] - 1, 0)));
    out_vars.push_back(k.StOf(store).shape()[a] == 1 ? UOp::ConstInt(0) : vars[a]);
  }
  UOpList store_terms;
  Conjuncts(k.StOf(store).ToIndex(out_vars).second, &store_terms);
  for (const UOp* u : Toposort(red->src(0))) {
    // (A LOAD inside the reduce has the full shape: it is never also read
    // after the reduce, where local memory holds only the last slice.)
    // (A gather's load moves by data: not staged.)
    if (u->op() != Op::kLoad || !u->dtype().IsFloat() || u->src().size() > 1) continue;
    // Which axes the index or the mask moves along (symbolically).
    auto [idx, full_valid] = k.StOf(u).ToIndex(vars);
    UOpRef valid = UOp::Const(dtypes::kBool, int64_t{1});
    UOpList terms;
    Conjuncts(full_valid, &terms);
    for (const UOpRef& t : terms) {
      bool moves = false;  // the term involves an axis the address moves along
      for (const UOpRef& v : vars) moves |= Uses(t, v) && Uses(idx, v);
      bool guard = std::find(store_terms.begin(), store_terms.end(), t) != store_terms.end();
      if (moves || !guard) valid = valid->IsConstInt(1) ? t : LogicalAnd(valid, t);
    }
    StagedOperand o;
    o.load = u;
    o.vars = vars;
    o.index = idx;
    o.valid = valid;
    o.element_bytes = std::max(4, u->dtype().ScalarSize());
    bool in_slice = false;  // moves along a reduce axis inside the slice
    std::vector<std::pair<int64_t, int>> by_stride;
    for (int a = k.first_local(); a < n; ++a) {
      // Grid axes and the reduce loops up to `axis` are fixed during a slice.
      if (shape[a] == 1 || (a >= k.first_reduce() && a <= axis)) continue;
      if (!Uses(idx, vars[a]) && !Uses(valid, vars[a])) {
        if (a < k.first_reduce()) o.broadcast.push_back(a);
        continue;
      }
      in_slice |= k.IsReduceAxis(a);
      UOpRef d = Simplify(Substitute(idx, {{vars[a].get(), vars[a] + 1}}) - idx);
      int64_t stride = d->IsConst() ? std::abs(std::get<int64_t>(d->const_value()))
                                    : std::numeric_limits<int64_t>::max();  // not affine: outermost
      by_stride.push_back({stride, a});
    }
    if (o.broadcast.empty() || !in_slice) continue;
    std::stable_sort(by_stride.begin(), by_stride.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    for (const auto& [stride, a] : by_stride) o.axes.push_back(a);
    o.strides.assign(o.axes.size(), 1);
    for (int j = static_cast<int>(o.axes.size()) - 1; j >= 0; --j) {
      o.strides[j] = o.size;
      o.size *= shape[o.axes[j]];
    }
    out.push_back(std::move(o));
  }
  return out;
}

std::unique_ptr<LocalStager> LocalStager::Create(const Kernel& k) {
  if (k.stage_axis() < 0) return nullptr;
  std::unique_ptr<LocalStager> s(new LocalStager(k));
  s->axis_ = k.stage_axis();
  // The stage axis is a loop (the heuristics keep at least two slices), so
  // the copy and the closing barrier have a loop body to go into.
  KILN_CHECK(k.full_shape()[s->axis_] > 1, "staging on a unit axis");
  s->ops_ = StagedOperands(k, s->axis_);
  for (size_t i = 0; i < s->ops_.size(); ++i) {
    const StagedOperand& o = s->ops_[i];
    Arg arg(std::vector<int64_t>{static_cast<int64_t>(i), o.size});  // temp<i>[size]
    s->temps_.push_back(UOp::Make(Op::kDefineLocal, o.load->dtype().Ptr(), {}, arg));
  }
  return s;
}

UOpList LocalStager::Copy(const UOpList& idx) const {
  const Shape& shape = k_.full_shape();
  // This thread's number in the block, lidx0 (the innermost block axis)
  // fastest: consecutive threads copy consecutive elements.
  UOpRef tid = UOp::ConstInt(0);
  int64_t threads = 1;
  for (int a = k_.first_reduce() - 1; a >= k_.first_local(); --a) {
    tid = tid + idx[a] * threads;
    threads *= shape[a];
  }
  UOpList stores;
  for (size_t i = 0; i < ops_.size(); ++i) {
    const StagedOperand& o = ops_[i];
    const DType dt = o.load->dtype();
    const UOpRef zero = UOp::Const(dt.Scalar(), 0.0);
    for (int64_t first = 0; first < o.size; first += threads) {
      const UOpRef e = Simplify(tid + first);  // the tile element this thread copies
      // Axes outside the tile: the grid and enclosing loop indices; the
      // operand does not move along the others, so 0 reads the same.
      UOpList at(shape.size());
      for (int a = 0; a < k_.ndim(); ++a) {
        bool fixed = a < k_.first_local() || (a >= k_.first_reduce() && a <= axis_);
        at[a] = fixed ? idx[a] : UOp::ConstInt(0);
      }
      for (size_t j = 0; j < o.axes.size(); ++j)
        at[o.axes[j]] = Simplify(e / o.strides[j] % shape[o.axes[j]]);
      std::unordered_map<const UOp*, UOpRef> sub;
      for (int a = 0; a < k_.ndim(); ++a) sub[o.vars[a].get()] = at[a];
      const UOpRef gidx = Simplify(Substitute(o.index, sub));
      const UOpRef valid = Simplify(Substitute(o.valid, sub));
      // The last round of copies may run past the tile.
      UOpRef in_tile = first + threads > o.size ? Simplify(e < o.size) : nullptr;
      UOpRef gate = in_tile ? Simplify(LogicalAnd(valid, in_tile)) : valid;
      UOpRef v;
      if (gate->IsConstInt(0)) {
        v = zero;
      } else if (gate->IsConstInt(1)) {
        v = UOp::Make(Op::kLoad, dt, {o.load->src(0), gidx});
      } else {
        v = UOp::Make(Op::kLoad, dt, {o.load->src(0), gidx, gate, zero});
      }
      UOpList src = {temps_[i], e, v};
      if (in_tile) src.push_back(in_tile);
      stores.push_back(UOp::Make(Op::kStore, dtypes::kVoid, src));
    }
  }
  UOpRef barrier = UOp::Make(Op::kBarrier, dtypes::kVoid, stores);
  stores.push_back(barrier);
  return stores;
}

UOpRef LocalStager::Load(const UOp* load, const UOpList& idxs) const {
  for (size_t i = 0; i < ops_.size(); ++i) {
    const StagedOperand& o = ops_[i];
    if (o.load != load) continue;
    UOpRef at = UOp::ConstInt(0);
    for (size_t j = 0; j < o.axes.size(); ++j) at = at + idxs[o.axes[j]] * o.strides[j];
    return UOp::Make(Op::kLoad, load->dtype(), {temps_[i], Simplify(at)});
  }
  return nullptr;
}

UOpRef LocalStager::EndBarrier(const UOpList& after) const {
  return UOp::Make(Op::kBarrier, dtypes::kVoid, after);
}

std::string LocalStager::Describe() const {
  std::vector<int64_t> sizes;
  for (const StagedOperand& o : ops_) sizes.push_back(o.size);
  return absl::StrCat("STAGE(", axis_, ",", absl::StrJoin(sizes, "+"), ")");
}

}  // namespace kiln

// The scheduler's realize planning (see realize_planner.h).
#include "engine/schedule/realize_planner.h"

#include <algorithm>
#include <map>
#include <set>
#include <variant>

#include "engine/base/status.h"
#include "engine/uop/buffer.h"

namespace kiln {

namespace schedule_internal {

// A gather reads its source at data-dependent places.
bool GatherReadsInPlace(const UOp& x) {
  if (x.op() == Op::kBuffer) return true;
  if (x.op() != Op::kView || x.src(0)->op() != Op::kBuffer) return false;
  const ShapeTracker& st = *StOf(x);
  return st.views().size() == 1 && !st.view().mask();
}

std::optional<Pads> PlainPad(const UOp& view, ShapeInfer* shapes) {
  if (view.op() != Op::kView) return std::nullopt;
  const ShapeTracker& st = *StOf(view);
  if (st.views().size() != 1 || !st.view().mask()) return std::nullopt;
  const Shape& src = shapes->Of(view.src(0));
  const View::Mask& m = *st.view().mask();
  Pads pads;
  Shape interior;
  for (size_t d = 0; d < st.ndim(); ++d) {
    pads.push_back({m[d].first, st.shape()[d] - m[d].second});
    interior.push_back(m[d].second - m[d].first);
  }
  // The source may be a reshape of the interior (a flat input buffer).
  if (kiln::Prod(src) != kiln::Prod(interior) ||
      !(ShapeTracker::FromShape(interior).Pad(pads) == st))
    return std::nullopt;
  return pads;
}

namespace {

// A constant seen through a view that reads it everywhere (no mask), or
// through none: its value.
std::optional<ConstValue> EverywhereConst(const UOp& x) {
  const UOp* c = &x;
  if (c->op() == Op::kView) {
    if (StOf(*c)->HasMask()) return std::nullopt;
    c = c->src(0).get();
  }
  if (c->op() != Op::kConst) return std::nullopt;
  return c->const_value();
}

// Whether `inside` is true seen through the padding of `padded` (the
// condition of Tensor::Pad's and Tensor::Cat's WHERE).
bool InsideOf(const UOp& inside, const UOp& padded) {
  if (inside.op() != Op::kView || inside.src(0)->op() != Op::kConst) return false;
  const ConstValue t = inside.src(0)->const_value();
  const bool is_true = std::holds_alternative<int64_t>(t) ? std::get<int64_t>(t) != 0
                                                          : std::get<double>(t) != 0;
  const ShapeTracker& a = *StOf(inside);
  const ShapeTracker& b = *StOf(padded);
  return is_true && a.views().size() == 1 && a.shape() == b.shape() &&
         a.view().mask() == b.view().mask();
}

// The WHEREs of a Tensor::Cat chain at x (WHERE(inside_k, padded part k,
// rest)), whatever views the parts are read through.
int CatJoins(const UOp& x) {
  int n = 0;
  for (const UOp* w = &x; w->op() == Op::kWhere && InsideOf(*w->src(0), *w->src(1));
       w = w->src(2).get())
    ++n;
  return n;
}

}  // namespace

std::optional<PadSource> PaddedSource(const UOp& x, ShapeInfer* shapes) {
  if (std::optional<Pads> pads = PlainPad(x, shapes))
    return PadSource{&x, *pads, ConstValue(int64_t{0})};
  // Pad(value): WHERE(inside, padded x, value).
  if (x.op() != Op::kWhere) return std::nullopt;
  const UOp& padded = *x.src(1);
  std::optional<Pads> pads = PlainPad(padded, shapes);
  std::optional<ConstValue> fill = EverywhereConst(*x.src(2));
  if (!pads || !fill || !InsideOf(*x.src(0), padded)) return std::nullopt;
  return PadSource{&padded, *pads, *fill};
}

std::optional<Concat> ConcatParts(const UOp& x, ShapeInfer* shapes) {
  // Tensor::Cat: WHERE(inside_k, padded part k, rest), the innermost rest
  // the first part's padding view.
  Concat c;
  const UOp* rest = &x;
  while (rest->op() == Op::kWhere) {
    const UOp& padded = *rest->src(1);
    std::optional<Pads> pads = PlainPad(padded, shapes);
    if (!pads || !InsideOf(*rest->src(0), padded)) return std::nullopt;
    c.wheres.push_back(rest);
    c.parts.push_back({&padded, *pads, ConstValue(int64_t{0})});
    rest = rest->src(2).get();
  }
  std::optional<Pads> first = PlainPad(*rest, shapes);
  if (!first || c.parts.empty()) return std::nullopt;
  c.parts.push_back({rest, *first, ConstValue(int64_t{0})});
  std::reverse(c.parts.begin(), c.parts.end());
  // One axis, the parts side by side along it from 0 to its end.
  const Shape& full = shapes->Of(x.ref());
  int axis = -1;
  for (size_t d = 0; d < full.size(); ++d)
    if (c.parts[0].pads[d] != std::pair<int64_t, int64_t>{0, 0}) axis = static_cast<int>(d);
  if (axis < 0) return std::nullopt;
  int64_t at = 0;
  for (const PadSource& p : c.parts) {
    for (size_t d = 0; d < full.size(); ++d)
      if (static_cast<int>(d) != axis && p.pads[d] != std::pair<int64_t, int64_t>{0, 0})
        return std::nullopt;
    if (p.pads[axis].first != at) return std::nullopt;
    at = full[axis] - p.pads[axis].second;
  }
  if (at != full[axis]) return std::nullopt;
  return c;
}

}  // namespace schedule_internal

namespace {

using schedule_internal::CatJoins;
using schedule_internal::Concat;
using schedule_internal::ConcatParts;
using schedule_internal::GatherReadsInPlace;
using schedule_internal::Pads;
using schedule_internal::PadSource;
using schedule_internal::PaddedSource;
using schedule_internal::PlainPad;

// A view reading its whole source in order (a reshape): one contiguous
// view of as many elements as the source. A contiguous part of it (the
// first 1000 of a row of 1024) is not one: it reads fewer elements.
bool IsPureReshape(const UOp& view, ShapeInfer* shapes) {
  const ShapeTracker& st = *StOf(view);
  return st.views().size() == 1 && st.view().contiguous() &&
         kiln::Prod(st.shape()) == kiln::Prod(shapes->Of(view.src(0)));
}

// Elements a view reads (the unmasked part of its top view).
int64_t Reads(const ShapeTracker& st) {
  const View& v = st.view();
  int64_t n = 1;
  for (size_t i = 0; i < v.ndim(); ++i)
    n *= v.mask() ? (*v.mask())[i].second - (*v.mask())[i].first : v.shape()[i];
  return n;
}

// An op that costs work to recompute (not a buffer, constant or view).
bool IsComputed(const UOp& u) {
  return IsAlu(u.op()) || u.op() == Op::kCast || u.op() == Op::kBitcast;
}

// A realized leaf needs no kernel of its own.
bool IsLeaf(const UOp& u) { return u.op() == Op::kBuffer || u.op() == Op::kConst; }

int UsersOf(const UOp* x, const std::unordered_map<const UOp*, int>& users) {
  auto it = users.find(x);
  return it == users.end() ? 0 : it->second;
}

// Whether the value a padding view `v` reads can be computed straight into
// the padded region of a buffer of dtype `dt`: only the view reads it, and
// it is computed (or a buffer), not a constant, a copy or another view.
bool ComputesInPlace(const UOp* v, DType dt, const std::unordered_map<const UOp*, int>& users) {
  const UOp* s = v->src(0).get();
  return UsersOf(v, users) == 1 && UsersOf(s, users) == 1 && s->op() != Op::kConst &&
         s->op() != Op::kContiguous && s->op() != Op::kView && s->dtype() == dt;
}

// A CONTIGUOUS copy of a padded computed value that nothing else reads (a
// convolution's zero-padded input, a max pool's input padded with -inf):
// the value is computed straight into the interior of the padded buffer and
// only the border is filled with the padding value, instead of realizing
// the value and copying it with its padding. (Where the value is realized
// after all -- a reduce with short rows, see Run -- the interior is a plain
// copy of it, still without masks.) Returns what the copy copies.
std::optional<PadSource> PadFused(const UOp& u, const std::unordered_map<const UOp*, int>& users,
                                  ShapeInfer* shapes) {
  if (u.op() != Op::kContiguous) return std::nullopt;
  std::optional<PadSource> p = PaddedSource(*u.src(0), shapes);
  if (!p || UsersOf(u.src(0).get(), users) != 1 || !ComputesInPlace(p->view, u.dtype(), users))
    return std::nullopt;
  return p;
}

// Elements of a padded region stored one after another in the padded
// buffer: the innermost dims up to and including the first padded one.
int64_t ContiguousRun(const Shape& full, const Pads& pads) {
  int64_t run = 1;
  for (size_t d = full.size(); d-- > 0;) {
    run *= full[d] - pads[d].first - pads[d].second;
    if (pads[d] != std::pair<int64_t, int64_t>{0, 0}) break;
  }
  return run;
}

// ---------------- which nodes get their own buffer ----------------

// Decides which nodes get their own buffer, by rules applied to a fixpoint:
//   1. a reduce whose (unrealized) source holds reduces realizes them;
//   2. a node whose kernel group would hold two reduces realizes them;
//   3. a node seen through a view that is not a plain reshape is realized
//      when its group holds a reduce, or when the view reads a computed
//      value more often than it has elements;
//   4. a node with a reduce in its group and several users is realized
//      unless every use ends up in one kernel (OneKernelReads);
//   5. so is a computed value with several users in different kernels when
//      recomputing it in each would repeat a long chain of ops (kMaxRecompute):
//      an unrolled recurrence (c_t = f * c_{t-1} + ...) would otherwise
//      recompute its whole history in every step's kernel.
// Rules only ever add nodes. One sweep visits the nodes in topological
// order; after a change it recomputes the kernel groups it touched and
// re-checks rule 4 where it can newly hold (the only rule a later
// realization can turn on for an earlier node), so a sweep costs about one
// pass over the graph instead of one pass per change. Sweeps repeat until
// nothing changes (normally two).
class RealizePlanner {
 public:
  RealizePlanner(const UOpList& roots, ShapeInfer* shapes) : shapes_(shapes) {
    order_ = Toposort(roots);
    for (size_t i = 0; i < order_.size(); ++i) {
      const UOp* u = order_[i];
      pos_[u] = i;
      std::set<const UOp*> seen;
      for (const UOpRef& s : u->src())
        if (seen.insert(s.get()).second) {
          users_[s.get()]++;
          consumers_[s.get()].push_back(u);
        }
    }
    for (const UOpRef& r : roots)
      if (!IsLeaf(*r)) realize_.insert(r.get());
  }

  absl::StatusOr<std::unordered_set<const UOp*>> Run() {
    for (const UOp* u : order_)
      if (u->op() == Op::kContiguous) realize_.insert(u);
    for (const UOp* u : order_)
      if (std::optional<PadSource> p = PadFused(*u, users_, shapes_)) {
        pad_views_.emplace(p->view, p->pads);
        padded_.emplace(u, std::move(*p));
      }
    FuseConcats();
    // A concatenation of three or more parts read by several ops (SSD's six
    // heads' class scores, read by a softmax's max, sum and normalization;
    // Swin's shifted windows) is realized: one copy, instead of every
    // reader's kernel recomputing the chain of WHEREs over the parts' views
    // lane by lane (SSDlite 18.7 -> 13.0 ms of kernels, RetinaNet's changed
    // kernels 4.1 -> 2.1 ms). The parts are views here, so the WHEREs are all
    // a reader would recompute; two parts cost one select and stay fused.
    for (const UOp* u : order_)
      if (u->op() == Op::kWhere && !concat_wheres_.count(u) && !realize_.count(u) &&
          CatJoins(*u) >= 2 && Readers(u) >= 2)
        realize_.insert(u);
    // A reduce (a 1x1 convolution) computed into a padded buffer with rows
    // shorter than kShortRow keeps them apart (7 of every 9 elements of a
    // 7-wide map), and the kernel tiles them one row at a time: it is
    // realized with its rows merged, and the padded copy copies it
    // (MobileNetV2 0.90x, MnasNet 0.72-0.83x, EfficientNet-B0 0.88-0.98x,
    // batch 8 0.89-0.95x; 64 measured 3% slower than 32).
    // (A concatenation's part along the channels is one contiguous run.)
    constexpr int64_t kShortRow = 32;
    for (const auto& [v, pads] : pad_views_) {
      const UOp* s = v->src(0).get();
      if (ContiguousRun(shapes_->Of(v->ref()), pads) < kShortRow && HasUnrealizedReduce(s))
        realize_.insert(s);
    }
    for (const UOp* u : order_)
      if (u->op() == Op::kGather && !GatherReadsInPlace(*u->src(0))) realize_.insert(u->src(0).get());
    for (int sweep = 0; sweep < 64; ++sweep)
      if (!Sweep()) return realize_;
    return absl::InternalError("scheduler: realize planning does not converge");
  }

 private:
  bool Realized(const UOp* u) const { return IsLeaf(*u) || realize_.count(u); }

  // Ops reading u, looking through pure reshapes.
  int Readers(const UOp* u) {
    int n = 0;
    for (const UOp* c : consumers_[u])
      n += c->op() == Op::kView && IsPureReshape(*c, shapes_) ? Readers(c) : 1;
    return n;
  }

  // A concatenation with a part that runs a reduce (a branch of an
  // Inception block, a fire module's expand convolutions) is realized (or
  // the CONTIGUOUS copy that is its only reader), and each part computes
  // straight into its slice of it, instead of being realized apart and
  // copied. The parts must be computed in place
  // (ComputesInPlace) and the WHEREs joining them read by nothing else.
  void FuseConcats() {
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      const UOp* u = *it;
      if (u->op() != Op::kWhere || concat_wheres_.count(u)) continue;
      std::optional<Concat> c = ConcatParts(*u, shapes_);
      if (!c) continue;
      bool in_place = true, own = true;
      for (size_t i = 1; i < c->wheres.size(); ++i) in_place &= users_[c->wheres[i]] == 1;
      std::set<const UOp*> reduces;
      for (const PadSource& p : c->parts) {
        in_place &= ComputesInPlace(p.view, u->dtype(), users_);
        for (const UOp* r : UnrealizedReduces(p.view->src(0).get()))
          own &= reduces.insert(r).second;
      }
      // Parts computed from one shared reduce (a Winograd output's four
      // phases of one product) stay one kernel reading it.
      if (!in_place || !own || reduces.empty()) continue;
      // A copy of the concatenation (a pool's input) receives the parts.
      const UOp* into = u;
      if (users_[u] == 1 && consumers_[u][0]->op() == Op::kContiguous) into = consumers_[u][0];
      realize_.insert(into);
      concat_wheres_.insert(c->wheres.begin(), c->wheres.end());
      for (const PadSource& p : c->parts) pad_views_.emplace(p.view, p.pads);
      concats_.emplace(into, std::move(*c));
    }
  }

  // The reduces computing u (up to realized values) runs.
  std::set<const UOp*> UnrealizedReduces(const UOp* u) const {
    std::set<const UOp*> seen, reduces;
    std::vector<const UOp*> stack = {u};
    while (!stack.empty()) {
      const UOp* x = stack.back();
      stack.pop_back();
      if (x->op() == Op::kReduceAxis) reduces.insert(x);
      for (const UOpRef& s : x->src())
        if (!Realized(s.get()) && seen.insert(s.get()).second) stack.push_back(s.get());
    }
    return reduces;
  }
  bool HasUnrealizedReduce(const UOp* u) const { return !UnrealizedReduces(u).empty(); }

  // Whether every use of u (a value with a reduce in its group) ends up in
  // one kernel, reading u at the same place: then it is computed once there
  // (hardswish's x * relu6(x + 3) uses x twice) instead of realized. A use
  // through a view reads it elsewhere, so it does not count as one.
  bool OneKernelReads(const UOp* u) {
    std::set<const UOp*> kernels, seen;
    std::vector<const UOp*> stack = {u};
    while (!stack.empty()) {
      const UOp* x = stack.back();
      stack.pop_back();
      for (const UOp* c : consumers_[x]) {
        if (!seen.insert(c).second) continue;
        // A reshape reads every element once, in order.
        if ((c->op() == Op::kView && !IsPureReshape(*c, shapes_)) || c->op() == Op::kReduceAxis)
          return false;
        if (Realized(c)) kernels.insert(c);
        else stack.push_back(c);
        if (kernels.size() > 1) return false;
      }
    }
    return kernels.size() == 1;
  }

  // Unrealized reduces in u's kernel group (u itself included).
  const std::set<const UOp*>& Local(const UOp* u) { return local_[u]; }

  // Ops a kernel computes to produce u from realized values (saturating).
  static constexpr int64_t kMaxRecompute = 16;

  void ComputeLocal(const UOp* u) {
    if (concat_wheres_.count(u)) {  // its parts are kernels of their own
      local_[u].clear();
      chain_[u] = 0;
      return;
    }
    std::set<const UOp*> l;
    int64_t chain = IsComputed(*u) ? 1 : 0;
    if (u->op() == Op::kReduceAxis) l.insert(u);
    for (const UOpRef& s : u->src())
      if (!Realized(s.get())) {
        l.insert(local_[s.get()].begin(), local_[s.get()].end());
        chain = std::min<int64_t>(chain + chain_[s.get()], 1 << 20);
      }
    local_[u] = std::move(l);
    chain_[u] = chain;
  }

  // The first op every use of u passes through within a few elementwise ops
  // (SiLU's x * sigmoid(x), GELU's x * (1 + erf(x / sqrt 2)) / 2), or null:
  // no reader outside that elementwise region is reached from u without
  // passing it. It may be realized already (the region then ends at it).
  const UOp* Funnel(const UOp* u) {
    constexpr size_t kMaxOps = 24;
    const Shape& shape = shapes_->Of(u->ref());
    auto elementwise = [&](const UOp* c) {
      return IsComputed(*c) && shapes_->Of(c->ref()) == shape;
    };
    std::set<const UOp*> inside;
    std::vector<const UOp*> candidates, stack = {u};
    while (!stack.empty()) {
      const UOp* x = stack.back();
      stack.pop_back();
      for (const UOp* c : consumers_[x]) {
        if (!elementwise(c) || !inside.insert(c).second) continue;
        if (inside.size() > kMaxOps) return nullptr;
        candidates.push_back(c);
        if (!Realized(c)) stack.push_back(c);
      }
    }
    std::sort(candidates.begin(), candidates.end(),
              [&](const UOp* a, const UOp* b) { return pos_[a] < pos_[b]; });
    for (const UOp* d : candidates) {
      bool passes = true;
      std::set<const UOp*> seen;
      stack = {u};
      while (passes && !stack.empty()) {
        const UOp* x = stack.back();
        stack.pop_back();
        for (const UOp* c : consumers_[x]) {
          if (c == d) continue;
          if (!inside.count(c) || Realized(c)) {
            passes = false;
            break;
          }
          if (seen.insert(c).second) stack.push_back(c);
        }
      }
      if (passes) return d;
    }
    return nullptr;
  }

  // Whether `d` gets a buffer with the reduces of its group computed into it
  // anyway: it is realized, read by several ops, copied (CONTIGUOUS: a 1x1
  // convolution's computed input), or read through a view that is not a
  // reshape (a matmul's operand) or a fused padding.
  bool RealizedWithItsGroup(const UOp* d) {
    if (Realized(d) || users_[d] >= 2) return true;
    const std::vector<const UOp*>& cs = consumers_[d];
    if (cs.size() != 1) return false;
    return cs[0]->op() == Op::kContiguous ||
           (cs[0]->op() == Op::kView && !pad_views_.count(cs[0]) && !IsPureReshape(*cs[0], shapes_));
  }

  // Rules 4 and 5 at u. Rule 4 leaves u to the op its uses funnel into when
  // that op is realized with u's reduce: the reduce's kernel then stores the
  // activation (SiLU, GELU) instead of u, and no reader recomputes it.
  bool MultiUseRule(const UOp* u) {
    if (Realized(u) || users_[u] < 2) return false;
    if (Local(u).empty() && chain_[u] < kMaxRecompute) return false;
    if (!Local(u).empty()) {
      const UOp* d = Funnel(u);
      if (d && RealizedWithItsGroup(d)) return false;
    }
    return !OneKernelReads(u);
  }

  // Rules 1-4 at u; appends the nodes they realize to *out.
  void ApplyRules(const UOp* u, std::vector<const UOp*>* out) {
    auto realize = [&](const UOp* x) {
      if (realize_.insert(x).second) out->push_back(x);
    };
    if (u->op() == Op::kReduceAxis) {
      const UOp* s = u->src(0).get();
      if (!Realized(s))
        for (const UOp* r : std::set<const UOp*>(Local(s))) realize(r);
    } else if (Local(u).size() > 1) {
      for (const UOp* r : std::set<const UOp*>(Local(u))) realize(r);
    }
    if (u->op() == Op::kView && !pad_views_.count(u)) {
      const UOp* s = u->src(0).get();
      if (!Realized(s) && !Local(s).empty() && !IsPureReshape(*u, shapes_)) realize(s);
      // A computed value read several times through a view (expand,
      // sliding windows) is computed once instead of once per read.
      if (!Realized(s) && IsComputed(*s) && Reads(*StOf(*u)) > kiln::Prod(shapes_->Of(s->ref())))
        realize(s);
    }
    if (MultiUseRule(u)) realize(u);
  }

  // After `changed` were realized while the sweep stands at position `at`:
  // recomputes the groups of the nodes between them and `at` that they fed,
  // then re-checks rule 4 at the unrealized nodes feeding them (a use that
  // became a kernel of its own may split their readers over two kernels).
  void Settle(std::vector<const UOp*> changed, size_t at) {
    std::set<size_t> feeders;  // candidates for rule 4, by position
    while (!changed.empty()) {
      std::set<size_t> dirty;
      std::vector<const UOp*> stack = changed;
      for (const UOp* r : changed) dirty.insert(pos_[r]);
      while (!stack.empty()) {
        const UOp* x = stack.back();
        stack.pop_back();
        for (const UOp* c : consumers_[x]) {
          size_t p = pos_[c];
          if (p > at || !dirty.insert(p).second) continue;
          if (!Realized(c)) stack.push_back(c);
        }
      }
      for (size_t p : dirty) ComputeLocal(order_[p]);
      std::set<const UOp*> seen;
      stack = changed;
      while (!stack.empty()) {
        const UOp* x = stack.back();
        stack.pop_back();
        for (const UOpRef& s : x->src())
          if (!Realized(s.get()) && seen.insert(s.get()).second) {
            feeders.insert(pos_[s.get()]);
            stack.push_back(s.get());
          }
      }
      changed.clear();
      for (auto it = feeders.begin(); it != feeders.end(); ++it) {
        const UOp* f = order_[*it];
        if (MultiUseRule(f)) {  // one at a time: groups change with each
          realize_.insert(f);
          changed.push_back(f);
          feeders.erase(it);
          break;
        }
      }
    }
  }

  bool Sweep() {
    bool any = false;
    local_.clear();
    chain_.clear();
    for (size_t i = 0; i < order_.size(); ++i) {
      ComputeLocal(order_[i]);
      for (;;) {
        std::vector<const UOp*> changed;
        ApplyRules(order_[i], &changed);
        if (changed.empty()) break;
        any = true;
        Settle(std::move(changed), i);
      }
    }
    return any;
  }

  ShapeInfer* shapes_;
  std::vector<const UOp*> order_;
  std::unordered_map<const UOp*, size_t> pos_;
  std::unordered_map<const UOp*, int> users_;
  std::unordered_map<const UOp*, std::vector<const UOp*>> consumers_;
  std::unordered_set<const UOp*> realize_;
  // The padding views (with their pads) of pad-fused copies and concat parts.
  std::unordered_map<const UOp*, Pads> pad_views_;
  std::unordered_map<const UOp*, PadSource> padded_;  // pad-fused copies (PadFused)
  std::unordered_map<const UOp*, Concat> concats_;    // see FuseConcats
  std::unordered_set<const UOp*> concat_wheres_;  // the WHEREs joining their parts
  std::unordered_map<const UOp*, std::set<const UOp*>> local_;
  std::unordered_map<const UOp*, int64_t> chain_;  // see kMaxRecompute

 public:
  std::unordered_map<const UOp*, PadSource>& padded() { return padded_; }
  std::unordered_map<const UOp*, Concat>& concats() { return concats_; }
};

}  // namespace

namespace schedule_internal {

absl::StatusOr<RealizePlan> PlanRealize(const UOpList& roots, ShapeInfer* shapes) {
  RealizePlanner planner(roots, shapes);
  RealizePlan plan;
  ASSIGN_OR_RETURN(plan.realized, planner.Run());
  plan.padded = std::move(planner.padded());
  plan.concats = std::move(planner.concats());
  return plan;
}

}  // namespace schedule_internal
}  // namespace kiln

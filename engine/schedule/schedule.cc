#include "engine/schedule/schedule.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"
#include "engine/schedule/realize_planner.h"
#include "engine/schedule/schedule_passes.h"
#include "engine/uop/buffer.h"

namespace kiln {

namespace {

using schedule_internal::GatherReadsInPlace;
using schedule_internal::Pads;
using schedule_internal::PadSource;
using schedule_internal::PlanRealize;
using schedule_internal::RealizePlan;

// ---------------- kernel ASTs ----------------

UOpRef DefineGlobal(int i, DType dt) {
  return UOp::Make(Op::kDefineGlobal, dt.Ptr(), {}, Arg(static_cast<int64_t>(i)));
}

class KernelBuilder {
 public:
  KernelBuilder(const UOp* root, const std::unordered_set<const UOp*>& realized,
                const std::unordered_map<const UOp*, UOpRef>& buffer_of, ShapeInfer* shapes)
      : root_(root), realized_(realized), buffer_of_(buffer_of), shapes_(shapes) {}

  // Computes `value` (root's value, e.g. the source of its padding view)
  // into root's buffer through `out` (a view of that buffer in value's shape).
  absl::StatusOr<ScheduleItem> BuildInto(const UOpRef& value, const ShapeTracker& out) {
    value_ = value;
    out_ = out;
    return Build();
  }

  absl::StatusOr<ScheduleItem> Build() {
    const UOpRef& out_buf = buffer_of_.at(root_);
    bufs_.push_back(out_buf);
    UOpRef value_root = value_ ? value_ : root_->op() == Op::kContiguous ? root_->src(0) : root_->ref();
    Shape out_shape = shapes_->Of(value_root);
    // Find the kernel's reduce (at most one, by construction).
    const UOp* reduce = FindReduce(value_root.get());
    Shape space = out_shape;
    if (reduce) space = shapes_->Of(reduce->ref());
    ShapeTracker acc = ShapeTracker::FromShape(out_shape).Reshape(space);
    reduce_ = reduce;
    ASSIGN_OR_RETURN(UOpRef value, Lower(value_root, acc));
    ShapeTracker out_st = out_ ? out_->Reshape(space) : ShapeTracker::FromShape(space);
    UOpRef store = UOp::Make(Op::kStore, dtypes::kVoid,
                             {DefineGlobal(0, root_->dtype()), value}, Arg(StArg(out_st)));
    ScheduleItem item;
    item.ast = UOp::Make(Op::kSink, dtypes::kVoid, {store});
    item.bufs = bufs_;
    return item;
  }

 private:
  bool Realized(const UOp* u) const {
    return u != root_ && (u->op() == Op::kBuffer || realized_.count(u));
  }

  const UOp* FindReduce(const UOp* u) {
    if (Realized(u)) return nullptr;
    if (u->op() == Op::kReduceAxis) return u;
    for (const UOpRef& s : u->src())
      if (const UOp* r = FindReduce(s.get())) return r;
    return nullptr;
  }

  int ParamOf(const UOpRef& buf) {
    for (size_t i = 0; i < bufs_.size(); ++i)
      if (bufs_[i] == buf) return static_cast<int>(i);
    bufs_.push_back(buf);
    return static_cast<int>(bufs_.size() - 1);
  }

  // Lowers node u seen through tracker `acc` (u's shape -> kernel space).
  absl::StatusOr<UOpRef> Lower(const UOpRef& u, const ShapeTracker& acc) {
    UOpRef key_st = UOp::Make(Op::kValid, dtypes::kBool, {}, Arg(StArg(acc)));
    auto memo_key = std::make_pair(u.get(), key_st.get());
    auto hit = memo_.find(memo_key);
    if (hit != memo_.end()) return hit->second;
    keep_.push_back(key_st);
    ASSIGN_OR_RETURN(UOpRef r, LowerUncached(u, acc));
    memo_[memo_key] = r;
    return r;
  }

  UOpRef MaskGuard(const UOpRef& v, const ShapeTracker& acc) {
    if (!acc.HasMask()) return v;
    UOpRef valid = UOp::Make(Op::kValid, dtypes::kBool, {}, Arg(StArg(acc)));
    return Alu(Op::kWhere, {valid, v, UOp::Const(v->dtype(), int64_t{0})});
  }

  absl::StatusOr<UOpRef> LowerUncached(const UOpRef& u, const ShapeTracker& acc) {
    if (Realized(u.get())) {
      UOpRef buf = u->op() == Op::kBuffer ? u : buffer_of_.at(u.get());
      ShapeTracker st = ShapeTracker::FromShape(shapes_->Of(u)).Compose(acc);
      int p = ParamOf(buf);
      return UOp::Make(Op::kLoad, u->dtype(), {DefineGlobal(p, u->dtype())}, Arg(StArg(st)));
    }
    switch (u->op()) {
      case Op::kConst:
        // Under a reduce, a VALID guard carries the iteration shape even
        // without a mask, so every kernel region has a memory op.
        if (pre_reduce_ && !acc.HasMask()) {
          UOpRef valid = UOp::Make(Op::kValid, dtypes::kBool, {}, Arg(StArg(acc)));
          return Alu(Op::kWhere, {valid, u, UOp::Const(u->dtype(), int64_t{0})});
        }
        return MaskGuard(u, acc);
      case Op::kView:
        return Lower(u->src(0), StOf(*u)->Compose(acc));
      case Op::kContiguous:
        return Lower(u->src(0), acc);
      case Op::kReduceAxis: {
        if (!(acc.contiguous() && acc.shape() == shapes_->Of(u)))
          return absl::InternalError(
              absl::StrCat("scheduler: reduce seen through a view ", acc.ToString()));
        Shape in = shapes_->Of(u->src(0));
        pre_reduce_ = true;
        auto x_or = Lower(u->src(0), ShapeTracker::FromShape(in));
        pre_reduce_ = false;
        ASSIGN_OR_RETURN(UOpRef x, std::move(x_or));
        return UOp::Make(Op::kReduceAxis, u->dtype(), {x}, u->arg());
      }
      case Op::kCopy:
        return absl::UnimplementedError("cross-device COPY is not supported by the scheduler yet");
      case Op::kGather:
        return LowerGather(u, acc);
      default:
        break;
    }
    if (!(IsAlu(u->op()) || u->op() == Op::kCast || u->op() == Op::kBitcast))
      return absl::InternalError(absl::StrCat("scheduler: unexpected op ", u->Describe()));
    UOpList src;
    for (const UOpRef& s : u->src()) {
      ASSIGN_OR_RETURN(UOpRef l, Lower(s, acc));
      src.push_back(l);
    }
    UOpRef r = u->Replace(src);
    return IsZeroPreserving(u->op()) ? r : MaskGuard(r, acc);
  }

  // out[o] = x[.., idx[o], ..] (0 outside [0, n)): a LOAD of x's buffer
  // through x's view with the gathered axis taken out, plus idx * its stride.
  absl::StatusOr<UOpRef> LowerGather(const UOpRef& u, const ShapeTracker& acc) {
    const std::vector<int64_t>& a = u->arg().Ints();
    const UOpRef& x = u->src(0);
    const Shape& xs = shapes_->Of(x);
    const Shape& os = shapes_->Of(u);
    if (a.size() != xs.size() + 2 || a[0] < 0 || a[0] >= static_cast<int64_t>(xs.size()))
      return absl::InternalError("scheduler: malformed GATHER");
    const int64_t axis = a[0], n = a[1];
    UOpRef buf;
    View base = View::Create(xs);
    if (Realized(x.get())) {
      buf = x->op() == Op::kBuffer ? x : buffer_of_.at(x.get());
    } else if (GatherReadsInPlace(*x)) {
      buf = x->src(0);
      base = StOf(*x)->view();
    } else {
      return absl::InternalError("scheduler: GATHER of an unrealized value");
    }
    std::vector<int64_t> strides(os.size(), 0);
    for (size_t d = 0; d < xs.size(); ++d) {
      int64_t o = a[2 + d];
      if (static_cast<int64_t>(d) == axis || xs[d] == 1) continue;
      if (o < 0 || o >= static_cast<int64_t>(os.size()))
        return absl::InternalError("scheduler: malformed GATHER dims");
      strides[o] = base.strides()[d];
    }
    View xv = View::Create(os, strides, base.offset()).WithSymbolicOffset(base.symbolic_offset());
    ShapeTracker st = ShapeTracker({xv}).Compose(acc);
    ASSIGN_OR_RETURN(UOpRef idx, Lower(u->src(1), acc));
    if (idx->dtype() != dtypes::kIndex) idx = UOp::Make(Op::kCast, dtypes::kIndex, {idx});
    UOpRef zero = UOp::ConstInt(0);
    UOpRef in_range = LogicalAnd(Alu(Op::kCmpLt, {idx * -1, UOp::ConstInt(1)}), idx < n);
    // Out of range reads element 0 of the axis (always in the buffer), then 0.
    UOpRef safe = Alu(Op::kWhere, {in_range, idx, zero});
    UOpRef off = safe * base.strides()[axis];
    int p = ParamOf(buf);
    UOpRef load = UOp::Make(Op::kLoad, u->dtype(), {DefineGlobal(p, u->dtype()), off},
                            Arg(StArg(st)));
    return MaskGuard(Alu(Op::kWhere, {in_range, load, UOp::Const(u->dtype(), int64_t{0})}), acc);
  }

  const UOp* root_;
  UOpRef value_;                    // BuildInto: the value computed
  std::optional<ShapeTracker> out_;  // BuildInto: where it is stored
  const UOp* reduce_ = nullptr;
  bool pre_reduce_ = false;
  const std::unordered_set<const UOp*>& realized_;
  const std::unordered_map<const UOp*, UOpRef>& buffer_of_;
  ShapeInfer* shapes_;
  UOpList bufs_;
  std::map<std::pair<const UOp*, const UOp*>, UOpRef> memo_;
  UOpList keep_;
};

// The last dim's left and right padding of every interior row as one view
// of runs (rows of the dims before the last two interior, then the interior
// rows of the second-last dim and one more, each run the right padding of
// a row and the left padding of the next): (..., R + 1, right + left) with
// strides (..., W, 1), starting at the right padding of the row before the
// first interior row. The first run's right part and the last run's left
// part lie in the second-last dim's padding slabs, written twice with the
// same value. Nothing when the second-last dim has no padding on a side (a
// run would leave the buffer) or the last dim none on either.
std::optional<ShapeTracker> ColumnSeam(const Shape& full, const Pads& pads) {
  const size_t nd = full.size(), h = nd - 2, w = nd - 1;
  const int64_t left = pads[w].first, right = pads[w].second;
  if (left <= 0 || right <= 0 || pads[h].first <= 0 || pads[h].second <= 0) return std::nullopt;
  Shape shape;
  std::vector<int64_t> strides(nd, 0);
  int64_t stride = 1, offset = 0;
  for (size_t e = nd; e-- > 0;) {
    strides[e] = stride;
    stride *= full[e];
  }
  for (size_t e = 0; e < h; ++e) {
    shape.push_back(full[e] - pads[e].first - pads[e].second);
    offset += pads[e].first * strides[e];
  }
  const int64_t rows = full[h] - pads[h].first - pads[h].second + 1;
  shape.push_back(rows);
  shape.push_back(right + left);
  offset += (pads[h].first - 1) * strides[h] + full[w] - right;
  std::vector<int64_t> st(strides.begin(), strides.begin() + h);
  st.push_back(strides[h]);
  st.push_back(1);
  for (int64_t s : shape)
    if (s <= 0) return std::nullopt;
  return ShapeTracker({View::Create(shape, st, offset)});
}

// Kernels that write `fill` into the border of a padded buffer of shape
// `full` (interior given by `pads`): per padded dim d, the slabs before and
// after the interior along d, interior along the dims before d and full
// along the dims after it (disjoint, together exactly the border). The
// last dim's two slabs (a map's left and right columns) are one seam kernel
// where they can be: the right padding of row r and the left padding of row
// r + 1 are adjacent in memory, so one run per row writes both (a column
// slab alone wrote one element per row and cache line: MobileNetV2's 112 x
// 112 x 96 map took 72 + 33 us for its two columns).
std::vector<ScheduleItem> BorderFills(const UOpRef& buf, DType dt, const Shape& full,
                                      const Pads& pads, ConstValue fill) {
  std::vector<ScheduleItem> items;
  auto fill_view = [&](const ShapeTracker& st) {
    UOpRef store = UOp::Make(Op::kStore, dtypes::kVoid,
                             {DefineGlobal(0, dt), UOp::Const(dt, fill)}, Arg(StArg(st)));
    items.push_back({UOp::Make(Op::kSink, dtypes::kVoid, {store}), {buf}});
  };
  const size_t nd = full.size();
  std::optional<ShapeTracker> seam;
  if (nd >= 2) seam = ColumnSeam(full, pads);
  for (size_t d = 0; d < nd; ++d) {
    if (seam && d == nd - 1) {
      fill_view(*seam);
      continue;
    }
    for (int side = 0; side < 2; ++side) {
      Pads box;
      for (size_t e = 0; e < full.size(); ++e) {
        if (e < d) box.push_back({pads[e].first, full[e] - pads[e].second});
        else if (e > d) box.push_back({0, full[e]});
        else if (side == 0) box.push_back({0, pads[d].first});
        else box.push_back({full[d] - pads[d].second, full[d]});
      }
      if (box[d].first >= box[d].second) continue;
      fill_view(ShapeTracker::FromShape(full).Shrink(box));
    }
  }
  return items;
}

// The kernel computing the value a padding view reads (`pad.view`'s
// source) straight into the padded region of `whole` (the view of the
// destination buffer, in the padded shape): no masks, no copy.
absl::StatusOr<ScheduleItem> IntoRegion(KernelBuilder* kb, const PadSource& pad,
                                        const ShapeTracker& whole, ShapeInfer* shapes) {
  const Shape& full = whole.shape();
  Pads interior;
  for (size_t d = 0; d < full.size(); ++d)
    interior.push_back({pad.pads[d].first, full[d] - pad.pads[d].second});
  ShapeTracker into = whole.Shrink(interior);
  UOpRef value = pad.view->src(0);
  if (shapes->Of(value) != into.shape())  // a flat buffer: seen in the interior's shape
    value = UOp::Make(Op::kView, value->dtype(), {value},
                      Arg(StArg(ShapeTracker::FromShape(shapes->Of(value)).Reshape(into.shape()))));
  ASSIGN_OR_RETURN(ScheduleItem item, kb->BuildInto(value, into));
  RETURN_IF_ERROR(Unbind(&item));
  return item;
}

}  // namespace

absl::StatusOr<Schedule> CreateSchedule(const UOpList& roots, const std::string& device,
                                        const ScheduleTarget* target) {
  if (target && roots.size() != 1)
    return absl::InternalError("scheduler: an assignment has one root");
  if (target && (target->st.HasMask() ||
                 target->st.RealSize() > BufferOf(*target->buffer).size()))
    return absl::InvalidArgumentError("scheduler: the assignment's view leaves its buffer");
  ShapeInfer shapes;
  ASSIGN_OR_RETURN(RealizePlan plan, PlanRealize(roots, &shapes));
  std::unordered_set<const UOp*>& realized = plan.realized;
  std::vector<const UOp*> order = Toposort(roots);

  Schedule sched;
  std::unordered_map<const UOp*, UOpRef> buffer_of;
  std::unordered_set<const UOp*> output_bufs;
  // Roots that already are a contiguous view of a whole buffer need no kernel.
  std::unordered_map<const UOp*, UOpRef> direct;
  for (const UOpRef& r : roots) {
    if (target) break;  // an assignment always writes its target
    if (r->op() == Op::kBuffer) direct[r.get()] = r;
    if (r->op() == Op::kView && r->src(0)->op() == Op::kBuffer && StOf(*r)->contiguous() &&
        StOf(*r)->size() == BufferOf(*r->src(0)).size())
      direct[r.get()] = r->src(0);
  }
  for (const UOp* u : order) {
    if (!realized.count(u) || direct.count(u)) continue;
    if (target && u == roots[0].get()) {
      buffer_of[u] = target->buffer;
      continue;
    }
    int64_t n = Prod(shapes.Of(u->ref()));
    buffer_of[u] = NewBuffer(u->dtype(), n, device);
  }
  for (const UOpRef& r : roots) {
    auto d = direct.find(r.get());
    if (d != direct.end()) {
      sched.outputs.push_back(d->second);
      continue;
    }
    if (r->op() == Op::kConst) {  // a bare scalar constant: realize as one element
      buffer_of[r.get()] = NewBuffer(r->dtype(), 1, device);
      realized.insert(r.get());
    }
    sched.outputs.push_back(buffer_of.at(r.get()));
    output_bufs.insert(buffer_of.at(r.get()).get());
  }
  for (const UOp* u : order) {
    if (!buffer_of.count(u)) continue;
    if (Prod(shapes.Of(u->ref())) == 0) continue;  // empty: nothing to compute
    KernelBuilder kb(u, realized, buffer_of, &shapes);
    if (auto concat = plan.concats.find(u); concat != plan.concats.end()) {  // part by part
      const bool into_target = target && u == roots[0].get();
      if (into_target && shapes.Of(u->ref()) != target->st.shape())
        return absl::InvalidArgumentError("scheduler: an assignment of another shape");
      ShapeTracker whole = into_target ? target->st : ShapeTracker::FromShape(shapes.Of(u->ref()));
      for (const PadSource& part : concat->second.parts) {
        KernelBuilder pk(u, realized, buffer_of, &shapes);
        ASSIGN_OR_RETURN(ScheduleItem item, IntoRegion(&pk, part, whole, &shapes));
        sched.items.push_back(std::move(item));
      }
      continue;
    }
    if (target && u == roots[0].get()) {
      if (shapes.Of(u->ref()) != target->st.shape())
        return absl::InvalidArgumentError("scheduler: an assignment of another shape");
      UOpRef value = u->op() == Op::kContiguous ? u->src(0) : u->ref();
      ASSIGN_OR_RETURN(ScheduleItem item, kb.BuildInto(value, target->st));
      RETURN_IF_ERROR(Unbind(&item));
      sched.items.push_back(std::move(item));
      continue;
    }
    if (auto pad = plan.padded.find(u); pad != plan.padded.end()) {
      const Shape& full = shapes.Of(u->ref());
      for (ScheduleItem& fill :
           BorderFills(buffer_of.at(u), u->dtype(), full, pad->second.pads, pad->second.fill))
        sched.items.push_back(std::move(fill));
      ASSIGN_OR_RETURN(ScheduleItem item,
                       IntoRegion(&kb, pad->second, ShapeTracker::FromShape(full), &shapes));
      sched.items.push_back(std::move(item));
      continue;
    }
    ASSIGN_OR_RETURN(ScheduleItem item, kb.Build());
    RETURN_IF_ERROR(Unbind(&item));
    sched.items.push_back(std::move(item));
  }
  PlanMemory(&sched, output_bufs, device);
  return sched;
}

}  // namespace kiln

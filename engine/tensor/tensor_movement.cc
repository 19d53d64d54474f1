// Zero-copy movement ops: every one composes the tensor's ShapeTracker.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/shape/shape_tracker.h"
#include "engine/tensor/tensor.h"
#include "engine/tensor/tensor_internal.h"
#include "engine/uop/buffer.h"

namespace kiln {
namespace {
constexpr size_t kMaxStackedViews = 4;
}  // namespace

// Applies `st` (a tracker over this tensor's current shape) as a new view.
Tensor Tensor::View(const ShapeTracker& st) const {
  const UOpRef& u = uop();
  UOpRef base = u;
  ShapeTracker full = st;
  if (u->op() == Op::kView) {  // fold into the existing view
    base = u->src(0);
    full = StOf(*u)->Compose(st);
  } else if (u->op() == Op::kConst) {
    base = u;
  }
  Shape base_shape = base->op() == Op::kBuffer ? Shape{BufferOf(*base).size()}
                     : base->op() == Op::kConst ? Shape{}
                                                : Shape();
  UOpRef v;
  if (full.contiguous() && base->op() == Op::kBuffer && full.shape() == base_shape) {
    v = base;
  } else {
    v = UOp::Make(Op::kView, dtype(), {base}, Arg(StArg(full)));
  }
  return Derive(v, st.shape(), dtype());
}

Tensor Tensor::ViewOp(const std::function<ShapeTracker(const ShapeTracker&)>& op) const {
  const UOpRef& u = uop();
  if (u->op() != Op::kView) return View(op(ShapeTracker::FromShape(shape())));
  ShapeTracker st = op(*StOf(*u));
  // Movements that do not merge stack views, and indexing through a stack
  // costs time exponential in its height (a model of 30 Transpose + Reshape
  // pairs took minutes): past kMaxStackedViews, copy the tensor first.
  if (st.views().size() > kMaxStackedViews) return Contiguous().ViewOp(op);
  const UOpRef& base = u->src(0);
  if (st.contiguous() && base->op() == Op::kBuffer && st.shape() == Shape{BufferOf(*base).size()})
    return Derive(base, st.shape(), dtype());
  return Derive(UOp::Make(Op::kView, dtype(), {base}, Arg(StArg(st))), st.shape(), dtype());
}

Tensor Tensor::Reshape(Shape ns) const {
  if (!ok()) return *this;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < ns.size(); ++i) {
    if (ns[i] == -1) {
      if (infer >= 0) return Fail(*this, "reshape: more than one -1");
      infer = static_cast<int>(i);
    } else if (ns[i] < 0) {
      return Fail(*this, "reshape: negative dimension");
    } else if (__builtin_mul_overflow(known, ns[i], &known)) {
      return Fail(*this, absl::StrCat("reshape: ", ShapeStr(shape()), " -> ", ShapeStr(ns),
                                      " changes the number of elements"));
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel() % known != 0)
      return Fail(*this, absl::StrCat("reshape: cannot infer -1 for ", ShapeStr(shape()), " -> ",
                                      ShapeStr(ns)));
    ns[infer] = numel() / known;
  }
  // Checked: a product that overflows could wrap to the right count.
  if (absl::Status bad = CheckShape(ns, "reshape"); !bad.ok())
    return TensorInternal::ErrorLike(*this, bad);
  if (kiln::Prod(ns) != numel())
    return Fail(*this, absl::StrCat("reshape: ", ShapeStr(shape()), " -> ", ShapeStr(ns),
                                    " changes the number of elements"));
  if (ns == shape()) return *this;
  return ViewOp([&](const ShapeTracker& s) { return s.Reshape(ns); });
}

Tensor Tensor::Permute(std::vector<int64_t> order) const {
  if (!ok()) return *this;
  if (static_cast<int>(order.size()) != ndim())
    return Fail(*this, absl::StrCat("permute: ", order.size(), " axes for rank ", ndim()));
  std::vector<int> o;
  std::vector<bool> seen(ndim(), false);
  for (int64_t a : order) {
    if (a < 0) a += ndim();
    if (a < 0 || a >= ndim() || seen[a]) return Fail(*this, "permute: invalid permutation");
    seen[a] = true;
    o.push_back(static_cast<int>(a));
  }
  bool identity = true;
  for (int i = 0; i < ndim(); ++i) identity &= o[i] == i;
  if (identity) return *this;
  return ViewOp([&](const ShapeTracker& s) { return s.Permute(o); });
}

bool Tensor::RepeatsAlong(const std::vector<int64_t>& axes) const {
  if (!ok() || uop()->op() != Op::kView) return false;
  const kiln::View& top = StOf(*uop())->view();  // the outermost view decides
  for (int64_t a : axes) {
    if (a < 0 || a >= ndim()) return false;
    if (shape()[a] == 1) continue;
    if (top.strides()[a] != 0) return false;
    if (top.mask() && ((*top.mask())[a].first != 0 || (*top.mask())[a].second != shape()[a]))
      return false;
  }
  return true;
}

Tensor Tensor::Expand(Shape ns) const {
  if (!ok()) return *this;
  if (ns.size() < shape().size())
    return Fail(*this, absl::StrCat("expand: ", ShapeStr(shape()), " -> ", ShapeStr(ns)));
  Shape padded(ns.size() - shape().size(), 1);
  padded.insert(padded.end(), shape().begin(), shape().end());
  for (size_t i = 0; i < ns.size(); ++i) {
    if (ns[i] == -1) ns[i] = padded[i];
    if (padded[i] != ns[i] && padded[i] != 1)
      return Fail(*this, absl::StrCat("expand: ", ShapeStr(shape()), " -> ", ShapeStr(ns)));
  }
  if (absl::Status bad = CheckShape(ns, "expand"); !bad.ok())
    return TensorInternal::ErrorLike(*this, bad);
  Tensor r = Reshape(padded);
  if (ns == padded) return r;
  return r.ViewOp([&](const ShapeTracker& s) { return s.Expand(ns); });
}

Tensor Tensor::Pad(const Pads& pads, double value) const {
  if (!ok()) return *this;
  if (static_cast<int>(pads.size()) != ndim())
    return Fail(*this, absl::StrCat("pad: ", pads.size(), " pads for rank ", ndim()));
  // Negative padding shrinks first.
  Pads shrink, grow;
  bool any_shrink = false, any_grow = false;
  Shape grown = shape();
  for (int i = 0; i < ndim(); ++i) {
    auto [b, a] = pads[i];
    // |pad| beyond the dim (or INT64_MIN) crops everything; checked sums.
    if ((b < 0 && b < -shape()[i]) || (a < 0 && a < -shape()[i]))
      return Fail(*this, "pad: negative padding larger than the dimension");
    if (__builtin_add_overflow(grown[i], b, &grown[i]) ||
        __builtin_add_overflow(grown[i], a, &grown[i]))
      return TensorInternal::ErrorLike(
          *this, absl::ResourceExhaustedError(absl::StrCat(
                     "pad: padding ", ShapeStr(shape()), " by (", b, ",", a, ") is too large")));
    int64_t lo = b < 0 ? -b : 0, hi = shape()[i] - (a < 0 ? -a : 0);
    if (lo > hi) return Fail(*this, "pad: negative padding larger than the dimension");
    shrink.push_back({lo, hi});
    grow.push_back({std::max<int64_t>(b, 0), std::max<int64_t>(a, 0)});
    any_shrink |= b < 0 || a < 0;
    any_grow |= b > 0 || a > 0;
  }
  if (absl::Status bad = CheckShape(grown, "pad"); !bad.ok())
    return TensorInternal::ErrorLike(*this, bad);
  Tensor x = any_shrink ? Shrink(shrink) : *this;
  if (!any_grow) return x;
  Tensor padded = x.ViewOp([&](const ShapeTracker& s) { return s.Pad(grow); });
  if (value == 0) return padded;
  Tensor inside = Full(engine(), x.shape(), int64_t{1}, dtypes::kBool, device());
  inside = inside.ViewOp([&](const ShapeTracker& s) { return s.Pad(grow); });
  return Where(inside, padded, x.Scalar(value));
}

Tensor Tensor::Shrink(const Pads& bounds) const {
  if (!ok()) return *this;
  if (static_cast<int>(bounds.size()) != ndim()) return Fail(*this, "shrink: rank mismatch");
  bool identity = true;
  for (int i = 0; i < ndim(); ++i) {
    auto [lo, hi] = bounds[i];
    if (lo < 0 || hi > shape()[i] || lo > hi)
      return Fail(*this, absl::StrCat("shrink: bounds (", lo, ",", hi, ") out of range for dim ",
                                      shape()[i]));
    identity &= lo == 0 && hi == shape()[i];
  }
  if (identity) return *this;
  return ViewOp([&](const ShapeTracker& s) { return s.Shrink(bounds); });
}

Tensor Tensor::ShrinkAt(int64_t axis, const UOpRef& start, int64_t size) const {
  if (!ok()) return *this;
  if (axis < 0) axis += ndim();
  if (axis < 0 || axis >= ndim()) return Fail(*this, "shrink_at: axis out of range");
  if (!start || start->dtype().IsFloat() || size < 0 || start->vmin() < 0 ||
      start->vmax() > shape()[axis] - size)
    return Fail(*this, absl::StrCat("shrink_at: a start in [", start ? start->vmin() : 0, ", ",
                                    start ? start->vmax() : 0, "] with size ", size,
                                    " leaves dim ", shape()[axis]));
  return ViewOp([&](const ShapeTracker& s) {
    return s.ShrinkAt(static_cast<int>(axis), start, size);
  });
}

Tensor Tensor::Flip(std::vector<int64_t> axes) const {
  if (!ok()) return *this;
  std::vector<bool> f(ndim(), false);
  for (int64_t a : axes) {
    if (a < 0) a += ndim();
    if (a < 0 || a >= ndim()) return Fail(*this, "flip: axis out of range");
    f[a] = !f[a];
  }
  if (std::none_of(f.begin(), f.end(), [](bool b) { return b; })) return *this;
  return ViewOp([&](const ShapeTracker& s) { return s.Flip(f); });
}

Tensor Tensor::Slices(const std::vector<Slice>& slices) const {
  if (!ok()) return *this;
  if (static_cast<int>(slices.size()) > ndim()) return Fail(*this, "slice: too many axes");
  Pads bounds;
  std::vector<int64_t> flip_axes, steps;
  for (int i = 0; i < ndim(); ++i) {
    int64_t n = shape()[i];
    Slice s = i < static_cast<int>(slices.size()) ? slices[i] : Slice{};
    if (s.step == 0) return Fail(*this, "slice: step must not be 0");
    auto clamp = [&](std::optional<int64_t> v, int64_t def, int64_t lo, int64_t hi) {
      if (!v) return def;
      int64_t x = *v < 0 ? *v + n : *v;
      return std::clamp<int64_t>(x, lo, hi);
    };
    int64_t start, stop;
    if (s.step > 0) {
      start = clamp(s.start, 0, 0, n);
      stop = clamp(s.stop, n, 0, n);
      stop = std::max(stop, start);
      bounds.push_back({start, stop});
    } else {
      start = clamp(s.start, n - 1, -1, n - 1);
      stop = clamp(s.stop, -1, -1, n - 1);
      // elements start, start+step, ... > stop: as a forward range [stop+1, start+1)
      int64_t lo = stop + 1, hi = start + 1;
      if (hi < lo) hi = lo;
      bounds.push_back({lo, hi});
      flip_axes.push_back(i);
    }
    // A step at least the extent picks one element: clamp it (|INT64_MIN|
    // does not exist, and huge steps would overflow the view's arithmetic).
    int64_t extent = std::max<int64_t>(bounds.back().second - bounds.back().first, 1);
    steps.push_back(s.step < 0 ? (s.step < -extent ? extent : -s.step)
                               : std::min(s.step, extent));
  }
  Tensor r = Shrink(bounds).Flip(flip_axes);
  bool strided = std::any_of(steps.begin(), steps.end(), [](int64_t s) { return s != 1; });
  if (!strided) return r;
  return r.ViewOp([&](const ShapeTracker& s) { return s.Stride(steps); });
}

Tensor Tensor::Squeeze(std::vector<int64_t> axes) const {
  if (!ok()) return *this;
  std::vector<bool> drop(ndim(), false);
  if (axes.empty()) {
    for (int i = 0; i < ndim(); ++i) drop[i] = shape()[i] == 1;
  } else {
    for (int64_t a : axes) {
      if (a < 0) a += ndim();
      if (a < 0 || a >= ndim()) return Fail(*this, "squeeze: axis out of range");
      if (shape()[a] != 1) return Fail(*this, "squeeze: dimension is not 1");
      drop[a] = true;
    }
  }
  Shape ns;
  for (int i = 0; i < ndim(); ++i)
    if (!drop[i]) ns.push_back(shape()[i]);
  return Reshape(ns);
}

Tensor Tensor::Unsqueeze(int64_t axis) const {
  if (!ok()) return *this;
  if (axis < 0) axis += ndim() + 1;
  if (axis < 0 || axis > ndim()) return Fail(*this, "unsqueeze: axis out of range");
  Shape ns = shape();
  ns.insert(ns.begin() + axis, 1);
  return Reshape(ns);
}

Tensor Tensor::Transpose(int64_t a, int64_t b) const {
  if (!ok()) return *this;
  if (a < 0) a += ndim();
  if (b < 0) b += ndim();
  if (a < 0 || b < 0 || a >= ndim() || b >= ndim()) return Fail(*this, "transpose: bad axes");
  std::vector<int64_t> order;
  for (int i = 0; i < ndim(); ++i) order.push_back(i);
  std::swap(order[a], order[b]);
  return Permute(order);
}

Tensor Tensor::Flatten(int64_t start, int64_t end) const {
  if (!ok()) return *this;
  if (ndim() == 0) return Reshape({1});
  if (start < 0) start += ndim();
  if (end < 0) end += ndim();
  if (start < 0 || end >= ndim() || start > end) return Fail(*this, "flatten: bad axes");
  Shape ns(shape().begin(), shape().begin() + start);
  int64_t p = 1;
  for (int64_t i = start; i <= end; ++i) p *= shape()[i];
  ns.push_back(p);
  ns.insert(ns.end(), shape().begin() + end + 1, shape().end());
  return Reshape(ns);
}

Tensor Tensor::AsStrided(Shape ns, std::vector<int64_t> strides, int64_t offset) const {
  if (!ok()) return *this;
  if (ns.size() != strides.size()) return Fail(*this, "as_strided: rank mismatch");
  if (absl::Status bad = CheckShape(ns, "as_strided"); !bad.ok())
    return TensorInternal::ErrorLike(*this, bad);
  int64_t lo = offset, hi = offset;
  for (size_t i = 0; i < ns.size(); ++i) {
    if (ns[i] == 0) lo = 0, hi = -1;
    int64_t span;
    if (__builtin_mul_overflow(std::max<int64_t>(ns[i] - 1, 0), strides[i], &span) ||
        __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi))
      return Fail(*this, "as_strided: window reaches outside the tensor");
  }
  if (kiln::Prod(ns) > 0 && (lo < 0 || hi >= numel()))
    return Fail(*this, "as_strided: window reaches outside the tensor");
  ShapeTracker window({View::Create(ns, strides, offset)});
  int64_t n = numel();
  return ViewOp([&](const ShapeTracker& s) { return s.Reshape({n}).Compose(window); });
}

}  // namespace kiln

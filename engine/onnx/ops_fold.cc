// Host (constant-folding) versions of the operators that appear in shape
// arithmetic: elementwise math and comparisons, Where, reductions and the
// movement ops. They run when every input of a node is a small host value,
// so Shape -> Gather -> Concat -> Reshape chains never reach the device.
#include <cmath>
#include <functional>

#include "engine/onnx/graph_builder.h"
#include "engine/onnx/ops_common.h"
#include "engine/onnx/shape_util.h"

namespace kiln {
namespace {

std::vector<int64_t> Strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

// For each element of `out`, the flat index of the element of `in` it
// broadcasts from.
std::vector<int64_t> BroadcastIndex(const Shape& out, const Shape& in) {
  int64_t n = kiln::Prod(out);
  std::vector<int64_t> idx(n);
  size_t r = out.size(), lead = r - in.size();
  std::vector<int64_t> ist = Strides(in);
  std::vector<int64_t> ost = Strides(out);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, src = 0;
    for (size_t d = 0; d < r; ++d) {
      int64_t c = rem / ost[d];
      rem %= ost[d];
      if (d >= lead && in[d - lead] != 1) src += c * ist[d - lead];
    }
    idx[i] = src;
  }
  return idx;
}

// Copies elements of `in` at `src` indices into a new tensor of `shape`.
HostTensor Take(const HostTensor& in, const std::vector<int64_t>& src, Shape shape) {
  HostTensor out(in.dtype, std::move(shape));
  int item = in.dtype.ItemSize();
  for (size_t i = 0; i < src.size(); ++i)
    std::memcpy(out.data.data() + i * item, in.data.data() + src[i] * item, item);
  return out;
}

// At most kHostKeepLimit elements (and a valid shape: checked, no overflow).
bool Small(const Shape& s) { return CheckedNumel(s, kHostKeepLimit).ok(); }

using IntFn = std::function<int64_t(int64_t, int64_t)>;
using FloatFn = std::function<double(double, double)>;

// A broadcasting binary op; `cmp` ops produce bool.
FoldFn BinaryFold(IntFn fi, FloatFn ff, bool cmp) {
  return [fi, ff, cmp](OpContext& ctx) -> absl::StatusOr<bool> {
    if (ctx.num_inputs() != 2 || !ctx.Host(0) || !ctx.Host(1)) return false;
    if (ctx.opset() < 7 && ctx.Int("broadcast", 0)) return false;
    const HostTensor &a = *ctx.Host(0), &b = *ctx.Host(1);
    auto shape = BroadcastShapes(a.shape, b.shape);
    if (!shape.ok() || !Small(*shape)) return false;
    DType t = PromoteTypes(a.dtype, b.dtype);
    std::vector<int64_t> ia = BroadcastIndex(*shape, a.shape), ib = BroadcastIndex(*shape, b.shape);
    HostTensor out(cmp ? dtypes::kBool : t, *shape);
    bool ints = !t.IsFloat();
    for (size_t i = 0; i < ia.size(); ++i) {
      if (ints) {
        if (!fi) return false;
        out.SetInt(i, fi(a.GetInt(ia[i]), b.GetInt(ib[i])));
      } else {
        out.SetDouble(i, ff(a.GetDouble(ia[i]), b.GetDouble(ib[i])));
      }
    }
    ctx.SetHost(0, std::move(out));
    return true;
  };
}

FoldFn UnaryFold(IntFn fi, FloatFn ff) {
  return [fi, ff](OpContext& ctx) -> absl::StatusOr<bool> {
    if (ctx.num_inputs() != 1 || !ctx.Host(0)) return false;
    const HostTensor& a = *ctx.Host(0);
    HostTensor out(a.dtype, a.shape);
    for (int64_t i = 0; i < a.numel(); ++i) {
      if (!a.dtype.IsFloat()) out.SetInt(i, fi(a.GetInt(i), 0));
      else out.SetDouble(i, ff(a.GetDouble(i), 0));
    }
    ctx.SetHost(0, std::move(out));
    return true;
  };
}

// Integer folds wrap like the kernels (-fwrapv) instead of overflowing.
uint64_t U(int64_t v) { return static_cast<uint64_t>(v); }
int64_t Wrapped(uint64_t v) { return static_cast<int64_t>(v); }

// a / b and floor(a / b) without traps: x / 0 is 0 (as in the kernels) and
// INT64_MIN / -1 wraps (a plain division raises SIGFPE).
int64_t DivInt(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  return a / b;
}
int64_t FloorDivInt(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return DivInt(a, b);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

absl::StatusOr<bool> WhereFold(OpContext& ctx) {
  if (ctx.num_inputs() != 3) return false;
  const HostTensor *c = ctx.Host(0), *a = ctx.Host(1), *b = ctx.Host(2);
  auto s1 = BroadcastShapes(c->shape, a->shape);
  if (!s1.ok()) return false;
  auto shape = BroadcastShapes(*s1, b->shape);
  if (!shape.ok() || !Small(*shape) || a->dtype != b->dtype) return false;
  std::vector<int64_t> ic = BroadcastIndex(*shape, c->shape), ia = BroadcastIndex(*shape, a->shape),
                       ib = BroadcastIndex(*shape, b->shape);
  std::vector<int64_t> src(ic.size());
  HostTensor out(a->dtype, *shape);
  int item = a->dtype.ItemSize();
  for (size_t i = 0; i < ic.size(); ++i) {
    const HostTensor* from = c->GetInt(ic[i]) ? a : b;
    int64_t j = c->GetInt(ic[i]) ? ia[i] : ib[i];
    std::memcpy(out.data.data() + i * item, from->data.data() + j * item, item);
  }
  ctx.SetHost(0, std::move(out));
  return true;
}

// Reshape-like ops: same data, a new shape.
using ShapeFn = std::function<absl::StatusOr<Shape>(const OpContext&, const Shape&)>;
FoldFn ShapeFold(ShapeFn f) {
  return [f](OpContext& ctx) -> absl::StatusOr<bool> {
    HostTensor in = *ctx.Host(0);
    ASSIGN_OR_RETURN(in.shape, f(ctx, in.shape));
    ctx.SetHost(0, std::move(in));
    return true;
  };
}

absl::StatusOr<bool> ConcatFold(OpContext& ctx) {
  if (ctx.num_inputs() < 1) return false;
  const HostTensor& first = *ctx.Host(0);
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", 0), std::max(first.ndim(), 1)));
  Shape out = first.shape;
  if (out.empty()) return false;
  out[axis] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const HostTensor& h = *ctx.Host(i);
    if (h.ndim() != first.ndim() || h.dtype != first.dtype) return false;
    for (int d = 0; d < h.ndim(); ++d)
      if (d != axis && h.shape[d] != first.shape[d]) return false;
    out[axis] += h.shape[axis];
  }
  HostTensor r(first.dtype, out);
  int64_t outer = 1, item = first.dtype.ItemSize();
  for (int64_t d = 0; d < axis; ++d) outer *= out[d];
  int64_t inner = kiln::Prod(out) / std::max<int64_t>(outer, 1) / std::max<int64_t>(out[axis], 1);
  uint8_t* dst = r.data.data();
  for (int64_t o = 0; o < outer; ++o)
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const HostTensor& h = *ctx.Host(i);
      int64_t chunk = h.shape[axis] * inner * item;
      std::memcpy(dst, h.data.data() + o * chunk, chunk);
      dst += chunk;
    }
  ctx.SetHost(0, std::move(r));
  return true;
}

absl::StatusOr<bool> SliceFold(OpContext& ctx) {
  const HostTensor& x = *ctx.Host(0);
  ASSIGN_OR_RETURN(std::vector<Tensor::Slice> slices, SliceArgs(ctx, x.shape));
  // Python slice semantics per axis.
  std::vector<std::vector<int64_t>> picks(x.ndim());
  Shape out;
  for (int d = 0; d < x.ndim(); ++d) {
    int64_t n = x.shape[d];
    const Tensor::Slice& s = slices[d];
    auto clamp = [&](std::optional<int64_t> v, int64_t def, int64_t lo, int64_t hi) {
      if (!v) return def;
      int64_t y = *v < 0 ? *v + n : *v;
      return std::clamp<int64_t>(y, lo, hi);
    };
    // Steps may be as large as INT64_MAX / INT64_MIN: stop before i + step
    // would pass the end (or overflow).
    if (s.step > 0) {
      int64_t end = clamp(s.stop, n, 0, n);
      for (int64_t i = clamp(s.start, 0, 0, n); i < end; i += s.step) {
        picks[d].push_back(i);
        if (s.step >= end - i) break;
      }
    } else {
      int64_t end = clamp(s.stop, -1, -1, n - 1);
      for (int64_t i = clamp(s.start, n - 1, -1, n - 1); i > end; i += s.step) {
        picks[d].push_back(i);
        if (s.step <= end - i) break;
      }
    }
    out.push_back(static_cast<int64_t>(picks[d].size()));
  }
  std::vector<int64_t> st = Strides(x.shape), ost = Strides(out), src(kiln::Prod(out));
  for (size_t i = 0; i < src.size(); ++i) {
    int64_t rem = static_cast<int64_t>(i), s = 0;
    for (int d = 0; d < x.ndim(); ++d) {
      s += picks[d][rem / ost[d]] * st[d];
      rem %= ost[d];
    }
    src[i] = s;
  }
  ctx.SetHost(0, Take(x, src, out));
  return true;
}

absl::StatusOr<bool> GatherFold(OpContext& ctx) {
  const HostTensor &x = *ctx.Host(0), &idx = *ctx.Host(1);
  if (x.ndim() == 0) return false;
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", 0), x.ndim()));
  Shape out(x.shape.begin(), x.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
  if (!Small(out)) return false;
  int64_t outer = 1, inner = 1, n = x.shape[axis];
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (int64_t d = axis + 1; d < x.ndim(); ++d) inner *= x.shape[d];
  std::vector<int64_t> src;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < idx.numel(); ++k) {
      int64_t j = idx.GetInt(k);
      if (j < 0) j += n;
      if (j < 0 || j >= n) return Invalid(absl::StrCat("index ", idx.GetInt(k), " is out of range"));
      for (int64_t i = 0; i < inner; ++i) src.push_back((o * n + j) * inner + i);
    }
  ctx.SetHost(0, Take(x, src, out));
  return true;
}

absl::StatusOr<bool> ExpandFold(OpContext& ctx) {
  const HostTensor& x = *ctx.Host(0);
  std::vector<int64_t> shape = ctx.Host(1)->Int64s();
  ASSIGN_OR_RETURN(Shape out, BroadcastShapes(x.shape, shape));
  if (!Small(out)) return false;
  ctx.SetHost(0, Take(x, BroadcastIndex(out, x.shape), out));
  return true;
}

absl::StatusOr<bool> TransposeFold(OpContext& ctx) {
  const HostTensor& x = *ctx.Host(0);
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, TransposePerm(ctx, x.ndim()));
  Shape out;
  for (int64_t p : perm) out.push_back(x.shape[p]);
  std::vector<int64_t> st = Strides(x.shape), ost = Strides(out), src(x.numel());
  for (size_t i = 0; i < src.size(); ++i) {
    int64_t rem = static_cast<int64_t>(i), s = 0;
    for (size_t d = 0; d < out.size(); ++d) {
      s += (rem / ost[d]) * st[perm[d]];
      rem %= ost[d];
    }
    src[i] = s;
  }
  ctx.SetHost(0, Take(x, src, out));
  return true;
}

absl::StatusOr<bool> TileFold(OpContext& ctx) {
  const HostTensor& x = *ctx.Host(0);
  std::vector<int64_t> reps = ctx.Host(1)->Int64s();
  if (static_cast<int>(reps.size()) != x.ndim()) return false;
  Shape out;
  for (int d = 0; d < x.ndim(); ++d) {
    int64_t o;
    if (reps[d] < 0 || __builtin_mul_overflow(x.shape[d], reps[d], &o)) return false;
    out.push_back(o);
  }
  if (!Small(out)) return false;
  std::vector<int64_t> st = Strides(x.shape), ost = Strides(out), src(kiln::Prod(out));
  for (size_t i = 0; i < src.size(); ++i) {
    int64_t rem = static_cast<int64_t>(i), s = 0;
    for (int d = 0; d < x.ndim(); ++d) {
      s += ((rem / ost[d]) % x.shape[d]) * st[d];
      rem %= ost[d];
    }
    src[i] = s;
  }
  ctx.SetHost(0, Take(x, src, out));
  return true;
}

// ReduceSum / Prod / Min / Max of integer host values (shape arithmetic).
FoldFn ReduceFold(int since, std::function<int64_t(int64_t, int64_t)> f, int64_t init) {
  return [since, f, init](OpContext& ctx) -> absl::StatusOr<bool> {
    const HostTensor& x = *ctx.Host(0);
    if (x.dtype.IsFloat() || x.numel() == 0) return false;
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, AxesArg(ctx, 1, since));
    bool keep = ctx.Int("keepdims", 1) != 0;
    std::vector<bool> red(x.ndim(), false);
    if (!axes || axes->empty()) {
      if (ctx.Int("noop_with_empty_axes", 0)) return false;
      red.assign(x.ndim(), true);
    } else {
      ASSIGN_OR_RETURN(std::vector<int64_t> ax, NormAxes(*axes, x.ndim()));
      for (int64_t a : ax) red[a] = true;
    }
    Shape kept, full;
    for (int d = 0; d < x.ndim(); ++d) {
      full.push_back(red[d] ? 1 : x.shape[d]);
      if (!red[d]) kept.push_back(x.shape[d]);
    }
    std::vector<int64_t> acc(kiln::Prod(full), init);
    std::vector<int64_t> st = Strides(x.shape), fst = Strides(full);
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t rem = i, o = 0;
      for (int d = 0; d < x.ndim(); ++d) {
        int64_t c = rem / st[d];
        rem %= st[d];
        if (!red[d]) o += c * fst[d];
      }
      acc[o] = f(acc[o], x.GetInt(i));
    }
    ctx.SetHost(0, HostTensor::FromInt64s(acc, keep ? full : kept, x.dtype));
    return true;
  };
}

}  // namespace

void RegisterFoldOps(OpRegistry* r) {
  using I = int64_t;
  auto safe_div = [](I a, I b) { return DivInt(a, b); };
  r->SetFold("Add", BinaryFold([](I a, I b) { return Wrapped(U(a) + U(b)); },
                               [](double a, double b) { return a + b; }, false));
  r->SetFold("Sub", BinaryFold([](I a, I b) { return Wrapped(U(a) - U(b)); },
                               [](double a, double b) { return a - b; }, false));
  r->SetFold("Mul", BinaryFold([](I a, I b) { return Wrapped(U(a) * U(b)); },
                               [](double a, double b) { return a * b; }, false));
  r->SetFold("Div", BinaryFold(safe_div, [](double a, double b) { return a / b; }, false));
  r->SetFold("Equal", BinaryFold([](I a, I b) -> I { return a == b; },
                                 [](double a, double b) -> double { return a == b; }, true));
  r->SetFold("Less", BinaryFold([](I a, I b) -> I { return a < b; },
                                [](double a, double b) -> double { return a < b; }, true));
  r->SetFold("Greater", BinaryFold([](I a, I b) -> I { return a > b; },
                                   [](double a, double b) -> double { return a > b; }, true));
  r->SetFold("LessOrEqual", BinaryFold([](I a, I b) -> I { return a <= b; },
                                       [](double a, double b) -> double { return a <= b; }, true));
  r->SetFold("GreaterOrEqual",
             BinaryFold([](I a, I b) -> I { return a >= b; },
                        [](double a, double b) -> double { return a >= b; }, true));
  r->SetFold("And", BinaryFold([](I a, I b) -> I { return a && b; }, nullptr, true));
  r->SetFold("Or", BinaryFold([](I a, I b) -> I { return a || b; }, nullptr, true));
  r->SetFold("Max", BinaryFold([](I a, I b) { return std::max(a, b); },
                               [](double a, double b) { return std::fmax(a, b); }, false));
  r->SetFold("Min", BinaryFold([](I a, I b) { return std::min(a, b); },
                               [](double a, double b) { return std::fmin(a, b); }, false));
  r->SetFold("Mod", [](OpContext& ctx) -> absl::StatusOr<bool> {
    if (ctx.Int("fmod", 0)) return false;
    return BinaryFold(
        [](I a, I b) {
          return b == 0 || b == -1 ? 0
                                   : static_cast<I>(static_cast<uint64_t>(a) -
                                                    static_cast<uint64_t>(FloorDivInt(a, b)) *
                                                        static_cast<uint64_t>(b));
        },
        [](double a, double b) { return a - std::floor(a / b) * b; }, false)(ctx);
  });
  r->SetFold("Neg", UnaryFold([](I a, I) { return Wrapped(0 - U(a)); }, [](double a, double) { return -a; }));
  r->SetFold("Abs", UnaryFold([](I a, I) { return a < 0 ? Wrapped(0 - U(a)) : a; },
                              [](double a, double) { return std::fabs(a); }));
  r->SetFold("Not", UnaryFold([](I a, I) -> I { return !a; }, nullptr));
  r->SetFold("Where", WhereFold);
  using C = const OpContext&;
  r->SetFold("Reshape", ShapeFold([](C ctx, const Shape& in) -> absl::StatusOr<Shape> {
    std::vector<int64_t> target =
        ctx.opset() < 5 ? ctx.Ints("shape") : ctx.Host(1) ? ctx.Host(1)->Int64s() : in;
    return ReshapeTarget(in, target, ctx.Int("allowzero", 0) != 0);
  }));
  r->SetFold("Flatten", ShapeFold([](C ctx, const Shape& in) {
    return FlattenShape(in, ctx.Int("axis", 1));
  }));
  r->SetFold("Squeeze", ShapeFold([](C ctx, const Shape& in) -> absl::StatusOr<Shape> {
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, AxesArg(ctx, 1, 13));
    return SqueezeShape(in, axes);
  }));
  r->SetFold("Unsqueeze", ShapeFold([](C ctx, const Shape& in) -> absl::StatusOr<Shape> {
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, AxesArg(ctx, 1, 13));
    if (!axes) return Invalid("axes are required");
    return UnsqueezeShape(in, *axes);
  }));
  r->SetFold("Concat", ConcatFold);
  r->SetFold("Slice", SliceFold);
  r->SetFold("Gather", GatherFold);
  r->SetFold("Expand", ExpandFold);
  r->SetFold("Transpose", TransposeFold);
  r->SetFold("Tile", TileFold);
  r->SetFold("ReduceProd", ReduceFold(18, [](I a, I b) { return Wrapped(U(a) * U(b)); }, 1));
  r->SetFold("ReduceSum", ReduceFold(13, [](I a, I b) { return Wrapped(U(a) + U(b)); }, 0));
  r->SetFold("ReduceMax", ReduceFold(18, [](I a, I b) { return std::max(a, b); }, INT64_MIN));
  r->SetFold("ReduceMin", ReduceFold(18, [](I a, I b) { return std::min(a, b); }, INT64_MAX));
}

}  // namespace kiln

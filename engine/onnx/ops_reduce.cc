// Reductions: Reduce*, ArgMax / ArgMin, Softmax / LogSoftmax / Hardmax,
// CumSum, LpNormalization, MeanVarianceNormalization.
#include "engine/onnx/ops_common.h"

namespace kiln {
namespace {

using ReduceFn = std::function<Tensor(const Tensor&, const std::vector<int64_t>&, bool)>;

// `since`: the opset where `axes` became an input.
void Reduce(OpRegistry* r, const std::string& name, int since, ReduceFn fn) {
  r->Register(name, [fn, since](OpContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(ctx.CheckInputs(1, 2));
    ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, AxesArg(ctx, 1, since));
    bool keep = ctx.Int("keepdims", 1) != 0;
    bool noop = ctx.Int("noop_with_empty_axes", 0) != 0;
    std::vector<int64_t> norm;
    if (!axes || axes->empty()) {
      if (noop) {
        ctx.Set(0, x);
        return absl::OkStatus();
      }
      for (int64_t i = 0; i < x.ndim(); ++i) norm.push_back(i);
    } else {
      ASSIGN_OR_RETURN(norm, NormAxes(*axes, x.ndim()));
    }
    if (norm.empty()) {  // a scalar: nothing to reduce
      ctx.Set(0, fn(x.Reshape({1}), {0}, false));
      return absl::OkStatus();
    }
    ctx.Set(0, fn(x, norm, keep));
    return absl::OkStatus();
  });
}

// Float-valued reductions of integer inputs are cast back to the input type.
Tensor SameType(const Tensor& r, DType t) { return r.dtype() == t ? r : r.Cast(t); }

absl::Status ArgOp(OpContext& ctx, bool is_max) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", 0), x.ndim()));
  bool keep = ctx.Int("keepdims", 1) != 0;
  bool last = ctx.Int("select_last_index", 0) != 0;
  ctx.Set(0, is_max ? x.Argmax(axis, keep, last) : x.Argmin(axis, keep, last));
  return absl::OkStatus();
}

enum class SoftKind { kSoftmax, kLogSoftmax, kHardmax };

Tensor Hardmax(const Tensor& x, int64_t axis) {
  Tensor idx = x.Argmax(axis, /*keepdim=*/true);
  Shape s(x.ndim(), 1);
  s[axis] = x.dim(static_cast<int>(axis));
  Tensor range = Tensor::Arange(x.engine(), 0, static_cast<double>(s[axis]), 1, dtypes::kInt64,
                                x.device())
                     .Reshape(s);
  return range.Eq(idx).Cast(x.dtype());
}

absl::Status SoftOp(OpContext& ctx, SoftKind kind) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  DType t = x.dtype();
  bool half = t == dtypes::kFloat16 || t == dtypes::kBFloat16;
  if (half) x = x.Cast(dtypes::kFloat32);
  auto apply = [&](const Tensor& v, int64_t axis) {
    switch (kind) {
      case SoftKind::kSoftmax: return v.Softmax(axis);
      case SoftKind::kLogSoftmax: return v.LogSoftmax(axis);
      default: return Hardmax(v, axis);
    }
  };
  Tensor y;
  if (ctx.opset() < 13) {
    // Older opsets flatten to 2-D at `axis` and normalize each row.
    if (x.ndim() == 0) x = x.Reshape({1});
    int64_t axis = ctx.Int("axis", 1);
    if (axis < 0) axis += x.ndim();
    if (axis < 0 || axis > x.ndim())
      return Invalid(absl::StrCat("axis ", ctx.Int("axis", 1), " is out of range"));
    int64_t rows = 1;
    for (int64_t i = 0; i < axis; ++i) rows *= x.dim(static_cast<int>(i));
    Shape shape = x.shape();
    y = apply(x.Reshape({rows, -1}), 1).Reshape(shape);
  } else {
    ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", -1), x.ndim()));
    y = apply(x, axis);
  }
  ctx.Set(0, half ? y.Cast(t) : y);
  return absl::OkStatus();
}

absl::Status CumSumOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> axis_v, ctx.StaticInts(1));
  if (axis_v.size() != 1) return Invalid("axis must be a scalar");
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(axis_v[0], x.ndim()));
  bool reverse = ctx.Int("reverse", 0) != 0, exclusive = ctx.Int("exclusive", 0) != 0;
  if (reverse) x = x.Flip({axis});
  if (exclusive) {
    Pads pads(x.ndim(), {0, 0});
    pads[axis] = {1, -1};
    x = x.Pad(pads);
  }
  Tensor y = x.Cumsum(axis);
  if (reverse) y = y.Flip({axis});
  ctx.Set(0, y);
  return absl::OkStatus();
}

absl::Status LpNormOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", -1), x.ndim()));
  int64_t p = ctx.Int("p", 2);
  Tensor norm;
  if (p == 1) norm = x.Abs().Sum({axis}, true);
  else if (p == 2) norm = x.Square().Sum({axis}, true).Sqrt();
  else return Invalid("p must be 1 or 2");
  ctx.Set(0, x / norm);
  return absl::OkStatus();
}

absl::Status MvnOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  std::vector<int64_t> axes = ctx.HasAttr("axes") ? ctx.Ints("axes") : std::vector<int64_t>{0, 2, 3};
  ASSIGN_OR_RETURN(axes, NormAxes(axes, x.ndim()));
  Tensor mean = x.Mean(axes, true);
  Tensor var = (x * x).Mean(axes, true) - mean * mean;
  ctx.Set(0, (x - mean) / (var.Sqrt() + 1e-9));
  return absl::OkStatus();
}

}  // namespace

void RegisterReduceOps(OpRegistry* r) {
  using V = const std::vector<int64_t>&;
  using T = const Tensor&;
  Reduce(r, "ReduceSum", 13, [](T x, V a, bool k) { return x.Sum(a, k); });
  Reduce(r, "ReduceMean", 18, [](T x, V a, bool k) { return x.Mean(a, k); });
  Reduce(r, "ReduceMax", 18, [](T x, V a, bool k) { return x.Max(a, k); });
  Reduce(r, "ReduceMin", 18, [](T x, V a, bool k) { return x.Min(a, k); });
  Reduce(r, "ReduceProd", 18, [](T x, V a, bool k) { return x.Prod(a, k); });
  Reduce(r, "ReduceL1", 18, [](T x, V a, bool k) { return x.Abs().Sum(a, k); });
  Reduce(r, "ReduceL2", 18, [](T x, V a, bool k) {
    return SameType(x.Square().Sum(a, k).Sqrt(), x.dtype());
  });
  Reduce(r, "ReduceSumSquare", 18, [](T x, V a, bool k) { return x.Square().Sum(a, k); });
  Reduce(r, "ReduceLogSum", 18,
         [](T x, V a, bool k) { return SameType(x.Sum(a, k).Log(), x.dtype()); });
  Reduce(r, "ReduceLogSumExp", 18,
         [](T x, V a, bool k) { return SameType(x.LogSumExp(a, k), x.dtype()); });
  r->Register("ArgMax", [](OpContext& ctx) { return ArgOp(ctx, true); });
  r->Register("ArgMin", [](OpContext& ctx) { return ArgOp(ctx, false); });
  r->Register("Softmax", [](OpContext& ctx) { return SoftOp(ctx, SoftKind::kSoftmax); });
  r->Register("LogSoftmax", [](OpContext& ctx) { return SoftOp(ctx, SoftKind::kLogSoftmax); });
  r->Register("Hardmax", [](OpContext& ctx) { return SoftOp(ctx, SoftKind::kHardmax); });
  r->Register("CumSum", CumSumOp);
  r->Register("LpNormalization", LpNormOp);
  r->Register("MeanVarianceNormalization", MvnOp);
}

}  // namespace kiln

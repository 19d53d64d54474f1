// Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
// MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv. Integer products
// accumulate in int32; requantization rounds half to even and saturates.
#include "engine/onnx/ops_common.h"

namespace kiln {
namespace {

// Per-axis parameters (1-D, one value per channel of `axis`) reshaped to
// broadcast against a rank-`rank` tensor; scalars pass through.
absl::StatusOr<Tensor> PerAxis(const Tensor& p, int64_t axis, const Tensor& x) {
  if (p.numel() == 1) return p.Reshape({});
  ASSIGN_OR_RETURN(axis, NormAxis(axis, x.ndim()));
  int64_t dim = x.dim(static_cast<int>(axis));
  if (p.ndim() != 1 || p.dim(0) != dim)
    return Invalid("per-axis scale / zero point must be 1-D with one value per channel");
  Shape s(x.ndim(), 1);
  s[axis] = dim;
  return p.Reshape(s);
}

Tensor Saturate(const Tensor& x, DType t) {
  return x.Clip(DTypeMin(t), DTypeMax(t)).Cast(t);
}

absl::Status QuantizeOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 3));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor scale, ctx.In(1));
  int64_t axis = ctx.Int("axis", 1);
  DType out = dtypes::kUInt8;
  Tensor zp = Tensor::Zeros(ctx.engine(), {}, out, ctx.device());
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(zp, ctx.In(2));
    out = zp.dtype();
  }
  ASSIGN_OR_RETURN(scale, PerAxis(scale, axis, x));
  ASSIGN_OR_RETURN(zp, PerAxis(zp, axis, x));
  Tensor q = (x.Cast(dtypes::kFloat32) / scale.Cast(dtypes::kFloat32)).Round() +
             zp.Cast(dtypes::kFloat32);
  ctx.Set(0, Saturate(q, out));
  return absl::OkStatus();
}

absl::Status DequantizeOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 3));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor scale, ctx.In(1));
  int64_t axis = ctx.Int("axis", 1);
  ASSIGN_OR_RETURN(scale, PerAxis(scale, axis, x));
  Tensor xi = x.Cast(dtypes::kInt32);
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(Tensor zp, ctx.In(2));
    ASSIGN_OR_RETURN(zp, PerAxis(zp, axis, x));
    xi = xi - zp.Cast(dtypes::kInt32);
  }
  ctx.Set(0, xi.Cast(scale.dtype()) * scale);
  return absl::OkStatus();
}

absl::Status DynamicQuantizeOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  Tensor xf = x.Cast(dtypes::kFloat32);
  Tensor zero = xf.Scalar(0);
  Tensor hi = xf.Max().Maximum(zero), lo = xf.Min().Minimum(zero);
  Tensor scale = (hi - lo) / 255.0;
  Tensor zp = Saturate((zero - lo / scale).Round(), dtypes::kUInt8);
  Tensor y = Saturate((xf / scale).Round() + zp.Cast(dtypes::kFloat32), dtypes::kUInt8);
  ctx.Set(0, y);
  ctx.Set(1, scale);
  ctx.Set(2, zp);
  return absl::OkStatus();
}

// x - zero_point in int32; `row_axis` (>= 0) gives per-row zero points.
absl::StatusOr<Tensor> Shift(const OpContext& ctx, const Tensor& x, int zp_input,
                             int64_t zp_axis) {
  Tensor xi = x.Cast(dtypes::kInt32);
  if (!ctx.Has(zp_input)) return xi;
  ASSIGN_OR_RETURN(Tensor zp, ctx.In(zp_input));
  if (zp.numel() > 1) {
    ASSIGN_OR_RETURN(zp, PerAxis(zp, zp_axis, x));
  } else {
    zp = zp.Reshape({});
  }
  return xi - zp.Cast(dtypes::kInt32);
}

absl::Status MatMulIntegerOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 4));
  ASSIGN_OR_RETURN(Tensor a, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor b, ctx.In(1));
  ASSIGN_OR_RETURN(a, Shift(ctx, a, 2, std::max(a.ndim() - 2, 0)));
  ASSIGN_OR_RETURN(b, Shift(ctx, b, 3, b.ndim() - 1));
  ctx.Set(0, a.Matmul(b));
  return absl::OkStatus();
}

Tensor::ConvOptions ConvOpts(const OpContext& ctx, const Tensor& x, absl::Status* status) {
  Tensor::ConvOptions o;
  size_t nd = x.ndim() - 2;
  o.stride = ctx.Ints("strides");
  o.dilation = ctx.Ints("dilations");
  o.groups = ctx.Int("group", 1);
  std::vector<int64_t> pads = ctx.Ints("pads");
  std::string auto_pad = ctx.Str("auto_pad", "NOTSET");
  (void)ctx.HasAttr("kernel_shape");  // implied by the weight
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    *status = Unsupported("auto_pad SAME is not supported for integer convolutions");
  if (!pads.empty() && pads.size() == 2 * nd)
    for (size_t i = 0; i < nd; ++i) o.padding.push_back({pads[i], pads[i + nd]});
  return o;
}

absl::Status ConvIntegerOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 4));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor w, ctx.In(1));
  if (x.ndim() < 3 || w.ndim() != x.ndim()) return Invalid("input and weight ranks differ");
  absl::Status s;
  Tensor::ConvOptions o = ConvOpts(ctx, x, &s);
  RETURN_IF_ERROR(s);
  // The input zero point also fills the padding.
  Tensor xi = x.Cast(dtypes::kInt32);
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(Tensor zp, ctx.In(2));
    xi = xi - zp.Reshape({}).Cast(dtypes::kInt32);
  }
  ASSIGN_OR_RETURN(Tensor wi, Shift(ctx, w, 3, 0));
  ctx.Set(0, xi.Conv(wi, nullptr, o));
  return absl::OkStatus();
}

// Requantizes an int32 accumulator: round(acc * a_s * b_s / y_s) + y_zp.
absl::StatusOr<Tensor> Requantize(const OpContext& ctx, const Tensor& acc, const Tensor& a_scale,
                                  const Tensor& b_scale, int y_scale_in, int y_zp_in) {
  ASSIGN_OR_RETURN(Tensor ys, ctx.In(y_scale_in));
  ASSIGN_OR_RETURN(Tensor yzp, ctx.In(y_zp_in));
  Tensor m = a_scale.Cast(dtypes::kFloat64) * b_scale.Cast(dtypes::kFloat64) /
             ys.Reshape({}).Cast(dtypes::kFloat64);
  Tensor y = (acc.Cast(dtypes::kFloat64) * m).Round() + yzp.Reshape({}).Cast(dtypes::kFloat64);
  return Saturate(y, yzp.dtype());
}

absl::Status QLinearMatMulOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(8, 8));
  ASSIGN_OR_RETURN(Tensor a, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor as, ctx.In(1));
  ASSIGN_OR_RETURN(Tensor b, ctx.In(3));
  ASSIGN_OR_RETURN(Tensor bs, ctx.In(4));
  ASSIGN_OR_RETURN(a, Shift(ctx, a, 2, std::max(a.ndim() - 2, 0)));
  ASSIGN_OR_RETURN(b, Shift(ctx, b, 5, b.ndim() - 1));
  if (as.numel() > 1) as = as.Reshape({as.numel(), 1});
  if (bs.numel() == 1) bs = bs.Reshape({});
  ASSIGN_OR_RETURN(Tensor y, Requantize(ctx, a.Matmul(b), as.numel() == 1 ? as.Reshape({}) : as,
                                        bs, 6, 7));
  ctx.Set(0, y);
  return absl::OkStatus();
}

absl::Status QLinearConvOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(8, 9));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor xs, ctx.In(1));
  ASSIGN_OR_RETURN(Tensor w, ctx.In(3));
  ASSIGN_OR_RETURN(Tensor ws, ctx.In(4));
  if (x.ndim() < 3 || w.ndim() != x.ndim()) return Invalid("input and weight ranks differ");
  absl::Status s;
  Tensor::ConvOptions o = ConvOpts(ctx, x, &s);
  RETURN_IF_ERROR(s);
  ASSIGN_OR_RETURN(Tensor xzp, ctx.In(2));
  Tensor xi = x.Cast(dtypes::kInt32) - xzp.Reshape({}).Cast(dtypes::kInt32);
  ASSIGN_OR_RETURN(Tensor wi, Shift(ctx, w, 5, 0));
  Tensor acc = xi.Conv(wi, nullptr, o);
  if (ctx.Has(8)) {
    ASSIGN_OR_RETURN(Tensor bias, ctx.In(8));
    Shape bsh(acc.ndim(), 1);
    bsh[1] = bias.numel();
    acc = acc + bias.Cast(dtypes::kInt32).Reshape(bsh);
  }
  Shape ch(acc.ndim(), 1);
  if (ws.numel() > 1) ch[1] = ws.numel(), ws = ws.Reshape(ch);
  else ws = ws.Reshape({});
  ASSIGN_OR_RETURN(Tensor y, Requantize(ctx, acc, xs.Reshape({}), ws, 6, 7));
  ctx.Set(0, y);
  return absl::OkStatus();
}

}  // namespace

void RegisterQuantOps(OpRegistry* r) {
  r->Register("QuantizeLinear", QuantizeOp);
  r->Register("DequantizeLinear", DequantizeOp);
  r->Register("DynamicQuantizeLinear", DynamicQuantizeOp);
  r->Register("MatMulInteger", MatMulIntegerOp);
  r->Register("ConvInteger", ConvIntegerOp);
  r->Register("QLinearMatMul", QLinearMatMulOp);
  r->Register("QLinearConv", QLinearConvOp);
}

}  // namespace kiln

// Normalizations: BatchNormalization (inference and training statistics),
// InstanceNormalization, LayerNormalization, GroupNormalization, LRN.
#include <cmath>

#include "engine/onnx/channel_blocks.h"
#include "engine/onnx/ops_common.h"

namespace kiln {
namespace {

// Shape (1, C, 1, ...) for per-channel parameters of a rank-`rank` input.
Shape ChannelShape(int64_t rank, int64_t c) {
  Shape s(rank, 1);
  if (rank > 1) s[1] = c;
  return s;
}

std::vector<int64_t> AxesFrom(int64_t first, int64_t rank) {
  std::vector<int64_t> a;
  for (int64_t i = first; i < rank; ++i) a.push_back(i);
  return a;
}

bool IsHalf(DType t) { return t == dtypes::kFloat16 || t == dtypes::kBFloat16; }

absl::Status BatchNormOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(5, 5));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor scale, ctx.In(1));
  ASSIGN_OR_RETURN(Tensor bias, ctx.In(2));
  ASSIGN_OR_RETURN(Tensor mean, ctx.In(3));
  ASSIGN_OR_RETURN(Tensor var, ctx.In(4));
  if (x.ndim() < 2) return Invalid("input must have rank >= 2");
  double eps = ctx.Float("epsilon", 1e-5f);
  double momentum = ctx.Float("momentum", 0.9f);
  if (ctx.opset() < 9 && ctx.Int("spatial", 1) == 0)
    return Unsupported("spatial=0 (per-element statistics) is not supported");
  bool training = ctx.opset() >= 14 ? ctx.Int("training_mode", 0) != 0
                                    : (ctx.opset() < 7 ? ctx.Int("is_test", 0) == 0 &&
                                                             ctx.num_outputs() > 1
                                                       : ctx.num_outputs() > 1);
  DType t = x.dtype();
  Tensor xf = IsHalf(t) ? x.Cast(dtypes::kFloat32) : x;
  Shape cs = ChannelShape(x.ndim(), x.dim(1));
  auto f = [&](const Tensor& v) { return v.Cast(xf.dtype()).Reshape(cs); };
  if (!training) {
    // In channel blocks (channel_blocks.h): the per-channel operands padded
    // to whole blocks (the padded lanes stay finite: mean 0, variance 1).
    const std::optional<Tensor>& in = ctx.Raw(0).blocked;
    const bool per_channel = scale.numel() == x.dim(1) && bias.numel() == x.dim(1) &&
                             mean.numel() == x.dim(1) && var.numel() == x.dim(1);
    if (in && x.ndim() == 4 && t == dtypes::kFloat32 && per_channel) {
      auto b = [&](const Tensor& v, double pad) { return PerChannelInBlocks(v.Cast(t), pad); };
      Tensor y = (*in - b(mean, 0)) * (b(var, 1) + eps).Rsqrt() * b(scale, 1) + b(bias, 0);
      if (y.ok()) {
        ctx.SetValue(0, BlockedValue(y, x.dim(1)));
        return absl::OkStatus();
      }
    }
    Tensor y = (xf - f(mean)) * (f(var) + eps).Rsqrt() * f(scale) + f(bias);
    ctx.Set(0, y.Cast(t));
    return absl::OkStatus();
  }
  std::vector<int64_t> axes = {0};
  for (int64_t i = 2; i < x.ndim(); ++i) axes.push_back(i);
  Tensor bmean = xf.Mean(axes, true);
  Tensor bvar = (xf - bmean).Square().Mean(axes, true);
  Tensor y = (xf - bmean) * (bvar + eps).Rsqrt() * f(scale) + f(bias);
  ctx.Set(0, y.Cast(t));
  Tensor m1 = bmean.Reshape({x.dim(1)}), v1 = bvar.Reshape({x.dim(1)});
  if (ctx.Wants(1))
    ctx.Set(1, (mean.Cast(xf.dtype()) * momentum + m1 * (1 - momentum)).Cast(mean.dtype()));
  if (ctx.Wants(2))
    ctx.Set(2, (var.Cast(xf.dtype()) * momentum + v1 * (1 - momentum)).Cast(var.dtype()));
  if (ctx.Wants(3)) ctx.Set(3, m1);
  if (ctx.Wants(4)) ctx.Set(4, v1);
  return absl::OkStatus();
}

absl::Status InstanceNormOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(3, 3));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor scale, ctx.In(1));
  ASSIGN_OR_RETURN(Tensor bias, ctx.In(2));
  if (x.ndim() < 3) return Invalid("input must be (N, C, *spatial)");
  DType t = x.dtype();
  Tensor xf = IsHalf(t) ? x.Cast(dtypes::kFloat32) : x;
  std::vector<int64_t> axes = AxesFrom(2, x.ndim());
  Tensor mean = xf.Mean(axes, true);
  Tensor c = xf - mean;
  Tensor var = c.Square().Mean(axes, true);
  Shape cs = ChannelShape(x.ndim(), x.dim(1));
  Tensor y = c * (var + static_cast<double>(ctx.Float("epsilon", 1e-5f))).Rsqrt() *
                 scale.Cast(xf.dtype()).Reshape(cs) +
             bias.Cast(xf.dtype()).Reshape(cs);
  ctx.Set(0, y.Cast(t));
  return absl::OkStatus();
}

absl::Status LayerNormOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 3));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor scale, ctx.In(1));
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", -1), x.ndim()));
  double eps = ctx.Float("epsilon", 1e-5f);
  if (ctx.Int("stash_type", 1) != 1) return Unsupported("stash_type other than float32");
  DType t = x.dtype();
  // stash_type 1: statistics in float32 (float64 inputs keep float64).
  Tensor xf = t == dtypes::kFloat64 ? x : x.Cast(dtypes::kFloat32);
  std::vector<int64_t> axes = AxesFrom(axis, x.ndim());
  Tensor mean = xf.Mean(axes, true);
  Tensor c = xf - mean;
  Tensor inv = (c.Square().Mean(axes, true) + eps).Rsqrt();
  Tensor y = c * inv * scale.Cast(xf.dtype());
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(Tensor b, ctx.In(2));
    y = y + b.Cast(xf.dtype());
  }
  ctx.Set(0, y.Cast(t));
  if (ctx.Wants(1)) ctx.Set(1, mean);
  if (ctx.Wants(2)) ctx.Set(2, inv);
  return absl::OkStatus();
}

absl::Status GroupNormOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(3, 3));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor scale, ctx.In(1));
  ASSIGN_OR_RETURN(Tensor bias, ctx.In(2));
  int64_t groups = ctx.Int("num_groups", 0);
  if (ctx.Int("stash_type", 1) != 1) return Unsupported("stash_type other than float32");
  if (x.ndim() < 2 || groups <= 0 || x.dim(1) % groups != 0)
    return Invalid("num_groups must divide the channels");
  int64_t n = x.dim(0), c = x.dim(1);
  DType t = x.dtype();
  Tensor xf = IsHalf(t) ? x.Cast(dtypes::kFloat32) : x;
  Tensor g = xf.Reshape({n, groups, -1});
  Tensor mean = g.Mean({2}, true);
  Tensor cen = g - mean;
  Tensor var = cen.Square().Mean({2}, true);
  Tensor norm = (cen * (var + static_cast<double>(ctx.Float("epsilon", 1e-5f))).Rsqrt())
                    .Reshape(x.shape());
  // Opset 18 has one scale / bias per group; later opsets one per channel.
  auto per_channel = [&](const Tensor& p) {
    Tensor v = p.Cast(xf.dtype());
    if (v.numel() == groups && groups != c)
      v = v.Reshape({groups, 1}).Expand({groups, c / groups}).Reshape({c});
    return v.Reshape(ChannelShape(x.ndim(), c));
  };
  ctx.Set(0, (norm * per_channel(scale) + per_channel(bias)).Cast(t));
  return absl::OkStatus();
}

absl::Status LrnOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  int64_t size = ctx.Int("size", 0);
  if (size <= 0 || x.ndim() < 2) return Invalid("size must be positive and rank >= 2");
  // One slice per window element is unrolled.
  if (size > 4096) return Unsupported(absl::StrCat("LRN size ", size, " is too large (> 4096)"));
  double alpha = ctx.Float("alpha", 1e-4f), beta = ctx.Float("beta", 0.75f);
  double bias = ctx.Float("bias", 1.0f);
  int64_t c = x.dim(1);
  Tensor sq = x.Square();
  Pads p(x.ndim(), {0, 0});
  p[1] = {(size - 1) / 2, size - 1 - (size - 1) / 2};
  Tensor padded = sq.Pad(p);
  Tensor sum;
  for (int64_t i = 0; i < size; ++i) {
    std::vector<Tensor::Slice> s(x.ndim());
    s[1] = Tensor::Slice{i, i + c, 1};
    Tensor part = padded.Slices(s);
    sum = i == 0 ? part : sum + part;
  }
  ctx.Set(0, x / (sum * (alpha / static_cast<double>(size)) + bias).Pow(x.Scalar(beta)));
  return absl::OkStatus();
}

}  // namespace

void RegisterNormOps(OpRegistry* r) {
  r->Register("BatchNormalization", BatchNormOp);
  r->Register("InstanceNormalization", InstanceNormOp);
  r->Register("LayerNormalization", LayerNormOp);
  r->Register("GroupNormalization", GroupNormOp);
  r->Register("LRN", LrnOp);
}

}  // namespace kiln

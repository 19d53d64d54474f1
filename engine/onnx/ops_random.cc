// Random operators: RandomUniform(Like), RandomNormal(Like), Bernoulli,
// Multinomial, from the Tensor API's counter-based generator. A node's seed
// attribute seeds it; without one, the seed is derived from the node's first
// output name, so a model gives the same values on every run (ONNX leaves the
// unseeded choice to the runtime). Values differ from numpy's generator.
#include <functional>

#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/ops_common.h"
#include "engine/onnx/tensor_proto.h"

namespace kiln {
namespace {

uint64_t Seed(const OpContext& ctx) {
  if (ctx.HasAttr("seed")) {
    float f = ctx.Float("seed", 0);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    return 0x9e3779b97f4a7c15ULL ^ bits;
  }
  return std::hash<std::string>()(ctx.node().output_size() ? ctx.node().output(0) : "");
}

absl::StatusOr<DType> TypeAttr(const OpContext& ctx, DType def) {
  if (!ctx.HasAttr("dtype")) return def;
  std::optional<DType> t = DTypeFromOnnx(static_cast<int>(ctx.Int("dtype", 1)));
  if (!t) return Unsupported("unsupported dtype");
  return *t;
}

// Output shape and dtype: the `shape` attribute, or the first input's.
absl::StatusOr<std::pair<Shape, DType>> Target(const OpContext& ctx, bool like) {
  if (like) {
    RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
    ASSIGN_OR_RETURN(DType t, TypeAttr(ctx, ctx.Type(0)));
    return std::make_pair(ctx.ShapeOf(0), t);
  }
  RETURN_IF_ERROR(ctx.CheckInputs(0, 0));
  if (!ctx.HasAttr("shape")) return Invalid("attribute 'shape' is required");
  Shape s = ctx.Ints("shape");
  for (int64_t d : s)
    if (d < 0) return Invalid("negative dimension");
  ASSIGN_OR_RETURN(DType t, TypeAttr(ctx, dtypes::kFloat32));
  return std::make_pair(s, t);
}

absl::Status UniformOp(OpContext& ctx, bool like) {
  ASSIGN_OR_RETURN(auto target, Target(ctx, like));
  double lo = ctx.Float("low", 0.0f), hi = ctx.Float("high", 1.0f);
  Tensor u = Tensor::Rand(ctx.engine(), target.first, Seed(ctx), dtypes::kFloat32, ctx.device());
  ctx.Set(0, (u * (hi - lo) + lo).Cast(target.second));
  return absl::OkStatus();
}

absl::Status NormalOp(OpContext& ctx, bool like) {
  ASSIGN_OR_RETURN(auto target, Target(ctx, like));
  double mean = ctx.Float("mean", 0.0f), scale = ctx.Float("scale", 1.0f);
  Tensor z = Tensor::Randn(ctx.engine(), target.first, Seed(ctx), dtypes::kFloat32, ctx.device());
  ctx.Set(0, (z * scale + mean).Cast(target.second));
  return absl::OkStatus();
}

absl::Status BernoulliOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor p, ctx.In(0));
  ASSIGN_OR_RETURN(DType t, TypeAttr(ctx, p.dtype()));
  Tensor u = Tensor::Rand(ctx.engine(), p.shape(), Seed(ctx), dtypes::kFloat32, ctx.device());
  ctx.Set(0, u.Lt(p.Cast(dtypes::kFloat32)).Cast(t));
  return absl::OkStatus();
}

// Samples class indices from unnormalized log-probabilities (batch, classes)
// by inverting the cumulative distribution.
absl::Status MultinomialOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor logits, ctx.In(0));
  if (logits.ndim() != 2) return Invalid("input must be (batch, classes)");
  int64_t n = ctx.Int("sample_size", 1), batch = logits.dim(0), classes = logits.dim(1);
  if (n <= 0) return Invalid("sample_size must be positive");
  ASSIGN_OR_RETURN(DType t, TypeAttr(ctx, dtypes::kInt32));
  Tensor cdf = logits.Cast(dtypes::kFloat32).Softmax(1).Cumsum(1);  // (batch, classes)
  Tensor u = Tensor::Rand(ctx.engine(), {batch, n, 1}, Seed(ctx), dtypes::kFloat32, ctx.device());
  // The sample is the number of classes whose cdf lies below u.
  Tensor below = cdf.Reshape({batch, 1, classes}).Le(u).Cast(dtypes::kInt32).Sum({2});
  ctx.Set(0, below.Minimum(below.Scalar(static_cast<double>(classes - 1))).Cast(t));
  return absl::OkStatus();
}

}  // namespace

void RegisterRandomOps(OpRegistry* r) {
  r->Register("RandomUniform", [](OpContext& ctx) { return UniformOp(ctx, false); });
  r->Register("RandomUniformLike", [](OpContext& ctx) { return UniformOp(ctx, true); });
  r->Register("RandomNormal", [](OpContext& ctx) { return NormalOp(ctx, false); });
  r->Register("RandomNormalLike", [](OpContext& ctx) { return NormalOp(ctx, true); });
  r->Register("Bernoulli", BernoulliOp);
  r->Register("Multinomial", MultinomialOp);
}

}  // namespace kiln

// Loss functions: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
#include "engine/onnx/ops_common.h"

namespace kiln {
namespace {

// loss[n, d...] = -input[n, target[n, d...], d...] * weight[target], zero
// where target == ignore_index; reduced by `reduction`.
absl::StatusOr<Tensor> Nll(const OpContext& ctx, const Tensor& input, const Tensor& target,
                           const std::optional<Tensor>& weight) {
  if (input.ndim() < 2 || target.ndim() != input.ndim() - 1)
    return Invalid("input must be (N, C, d...) and target (N, d...)");
  int64_t c = input.dim(1);
  Shape hs(input.ndim(), 1);
  hs[1] = c;
  Tensor iota = Tensor::Arange(ctx.engine(), 0, static_cast<double>(c), 1, dtypes::kInt64,
                               ctx.device())
                    .Reshape(hs);
  Tensor t = target.Cast(dtypes::kInt64);
  Tensor keep = ctx.HasAttr("ignore_index")
                    ? t.Ne(t.Scalar(static_cast<double>(ctx.Int("ignore_index", 0))))
                    : t.Eq(t);
  Tensor hot = t.Unsqueeze(1).Eq(iota).LogicalAnd(keep.Unsqueeze(1));  // (N, C, d...)
  Tensor zero = input.ZerosLike();
  Tensor picked = Tensor::Where(hot, input, zero).Sum({1});
  Tensor w;
  if (weight) {
    Tensor wv = weight->Cast(input.dtype()).Reshape(hs);
    w = Tensor::Where(hot, wv, zero).Sum({1});
  } else {
    w = keep.Cast(input.dtype());
  }
  Tensor loss = -(picked * w);
  std::string reduction = ctx.Str("reduction", "mean");
  if (reduction == "none") return loss;
  if (reduction == "sum") return loss.Sum();
  if (reduction == "mean") return loss.Sum() / w.Sum();
  return Invalid(absl::StrCat("unknown reduction '", reduction, "'"));
}

absl::Status NllOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 3));
  ASSIGN_OR_RETURN(Tensor input, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor target, ctx.In(1));
  std::optional<Tensor> weight;
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(weight, ctx.In(2));
  }
  ASSIGN_OR_RETURN(Tensor loss, Nll(ctx, input, target, weight));
  ctx.Set(0, loss);
  return absl::OkStatus();
}

absl::Status SceOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 3));
  ASSIGN_OR_RETURN(Tensor scores, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor labels, ctx.In(1));
  std::optional<Tensor> weight;
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(weight, ctx.In(2));
  }
  if (scores.ndim() < 2) return Invalid("scores must be (N, C, d...)");
  DType t = scores.dtype();
  bool half = t == dtypes::kFloat16 || t == dtypes::kBFloat16;
  Tensor s = half ? scores.Cast(dtypes::kFloat32) : scores;
  Tensor log_prob = s.LogSoftmax(1);
  ASSIGN_OR_RETURN(Tensor loss, Nll(ctx, log_prob, labels, weight));
  ctx.Set(0, loss.Cast(t));
  if (ctx.Wants(1)) ctx.Set(1, log_prob.Cast(t));
  return absl::OkStatus();
}

}  // namespace

void RegisterLossOps(OpRegistry* r) {
  r->Register("NegativeLogLikelihoodLoss", NllOp);
  r->Register("SoftmaxCrossEntropyLoss", SceOp);
}

}  // namespace kiln

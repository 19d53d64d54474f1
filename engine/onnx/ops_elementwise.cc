// Elementwise ONNX operators: unary math and activations, binary arithmetic
// and logic, variadic Sum / Mean / Max / Min, Where, Clip, Cast.
#include <cmath>

#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/ops_common.h"
#include "engine/onnx/tensor_proto.h"

namespace kiln {
namespace {

constexpr double kPi = 3.14159265358979323846;

// ---- functions the Tensor API lacks, built from its primitives ----

// atan via two argument reductions (|x| > 1 -> 1/x, then the half-angle
// formula) and an odd series on |w| <= tan(pi/8).
Tensor Atan(const Tensor& x) {
  Tensor ax = x.Abs();
  Tensor big = ax.Gt(ax.Scalar(1));
  Tensor z = Tensor::Where(big, ax.Reciprocal(), ax);
  Tensor w = z / ((z * z + 1.0).Sqrt() + 1.0);
  Tensor w2 = w * w;
  Tensor s = w2.Scalar(1.0 / 17);
  for (int k = 15; k >= 1; k -= 2) s = s * w2 * -1.0 + 1.0 / k;
  // s = 1 - w2/3 + w2^2/5 - ... evaluated by Horner from the highest term.
  Tensor r = w * s * 2.0;
  r = Tensor::Where(big, r.Scalar(kPi / 2) - r, r);
  return Tensor::Where(x.Lt(x.Scalar(0)), -r, r);
}
Tensor Asin(const Tensor& x) {
  return Atan(x / ((x.Scalar(1) - x * x).Sqrt() + 1.0)) * 2.0;
}
Tensor Acos(const Tensor& x) {
  return Atan(((x.Scalar(1) - x) / (x + 1.0)).Sqrt()) * 2.0;
}
Tensor Sinh(const Tensor& x) {
  Tensor e = x.Exp();
  Tensor big = (e - e.Reciprocal()) * 0.5;
  Tensor x2 = x * x;
  Tensor small = x * ((x2 * (1.0 / 120) + 1.0 / 6) * x2 + 1.0);
  return Tensor::Where(x.Abs().Lt(x.Scalar(0.05)), small, big);
}
Tensor Cosh(const Tensor& x) {
  Tensor e = x.Exp();
  return (e + e.Reciprocal()) * 0.5;
}
Tensor Asinh(const Tensor& x) {
  Tensor ax = x.Abs();
  Tensor big = (ax + (ax * ax + 1.0).Sqrt()).Log();
  Tensor x2 = x * x;
  Tensor small = ax * ((x2 * (3.0 / 40) - 1.0 / 6) * x2 + 1.0);
  Tensor r = Tensor::Where(ax.Lt(x.Scalar(0.05)), small, big);
  return Tensor::Where(x.Lt(x.Scalar(0)), -r, r);
}
Tensor Acosh(const Tensor& x) { return (x + (x * x - 1.0).Sqrt()).Log(); }
Tensor Atanh(const Tensor& x) {
  Tensor big = ((x + 1.0) / (x.Scalar(1) - x)).Log() * 0.5;
  Tensor x2 = x * x;
  Tensor small = x * ((x2 * 0.2 + 1.0 / 3) * x2 + 1.0);
  return Tensor::Where(x.Abs().Lt(x.Scalar(0.05)), small, big);
}

using UnaryFn = std::function<Tensor(const Tensor&, const OpContext&)>;

// float16 / bfloat16 inputs compute in float32 and round once at the end.
void Unary(OpRegistry* r, const std::string& name, UnaryFn fn) {
  r->Register(name, [fn](OpContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
    ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
    DType t = x.dtype();
    bool half = t == dtypes::kFloat16 || t == dtypes::kBFloat16;
    Tensor y = fn(half ? x.Cast(dtypes::kFloat32) : x, ctx);
    if (half && y.dtype() == dtypes::kFloat32) y = y.Cast(t);
    ctx.Set(0, y);
    return absl::OkStatus();
  });
}

// Opset < 7 binary ops broadcast only with broadcast=1, aligning b at `axis`.
absl::StatusOr<Tensor> LegacyBroadcast(const OpContext& ctx, const Tensor& a, const Tensor& b) {
  if (ctx.opset() >= 7 || ctx.Int("broadcast", 0) == 0) return b;
  int64_t axis = ctx.Int("axis", a.ndim() - b.ndim());
  if (axis < 0) axis += a.ndim();
  if (axis < 0 || axis + b.ndim() > a.ndim())
    return Invalid(absl::StrCat("legacy broadcast axis ", axis, " does not fit"));
  Shape s = b.shape();
  s.resize(a.ndim() - axis, 1);
  return b.Reshape(s);
}

using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&, const OpContext&)>;

void Binary(OpRegistry* r, const std::string& name, BinaryFn fn) {
  r->Register(name, [fn](OpContext& ctx) -> absl::Status {
    RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
    ASSIGN_OR_RETURN(Tensor a, ctx.In(0));
    ASSIGN_OR_RETURN(Tensor b, ctx.In(1));
    ASSIGN_OR_RETURN(b, LegacyBroadcast(ctx, a, b));
    ctx.Set(0, fn(a, b, ctx));
    return absl::OkStatus();
  });
}

// Sum / Mean / Max / Min over any number of broadcasting inputs.
void Variadic(OpRegistry* r, const std::string& name,
              std::function<Tensor(const Tensor&, const Tensor&)> fn, bool mean = false) {
  r->Register(name, [fn, mean](OpContext& ctx) -> absl::Status {
    if (ctx.num_inputs() < 1) return Invalid("needs at least one input");
    ASSIGN_OR_RETURN(Tensor acc, ctx.In(0));
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      ASSIGN_OR_RETURN(Tensor x, ctx.In(i));
      acc = fn(acc, x);
    }
    if (mean) acc = acc / acc.Scalar(ctx.num_inputs());
    ctx.Set(0, acc);
    return absl::OkStatus();
  });
}

absl::Status ClipOp(OpContext& ctx) {
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  if (ctx.opset() < 11) {
    RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
    std::optional<double> lo, hi;
    if (ctx.HasAttr("min")) lo = ctx.Float("min", 0);
    if (ctx.HasAttr("max")) hi = ctx.Float("max", 0);
    ctx.Set(0, x.Clip(lo, hi));
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(ctx.CheckInputs(1, 3));
  if (ctx.Has(1)) {
    ASSIGN_OR_RETURN(Tensor lo, ctx.In(1));
    x = x.Maximum(lo.Cast(x.dtype()));
  }
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(Tensor hi, ctx.In(2));
    x = x.Minimum(hi.Cast(x.dtype()));
  }
  ctx.Set(0, x);
  return absl::OkStatus();
}

absl::Status CastOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  int64_t to;
  const onnx::AttributeProto* attr = ctx.Attr("to");
  if (attr == nullptr) return Invalid("attribute 'to' is required");
  if (attr->type() == onnx::AttributeProto::STRING) {  // Cast-1 names the type
    onnx::TensorProto::DataType dt;
    if (!onnx::TensorProto::DataType_Parse(attr->s(), &dt))
      return Invalid(absl::StrCat("unknown type name '", attr->s(), "'"));
    to = dt;
  } else {
    to = ctx.Int("to", 0);
  }
  std::optional<DType> t = DTypeFromOnnx(static_cast<int>(to));
  if (!t) return Unsupported(absl::StrCat("cast to ", OnnxTypeName(static_cast<int>(to)),
                                          " is not supported"));
  if (const HostTensor* h = ctx.Host(0)) {
    ctx.SetHost(0, h->Cast(*t));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ctx.Set(0, x.Cast(*t));
  return absl::OkStatus();
}

absl::Status CastLikeOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  DType t = ctx.Type(1);
  if (const HostTensor* h = ctx.Host(0)) {
    ctx.SetHost(0, h->Cast(t));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ctx.Set(0, x.Cast(t));
  return absl::OkStatus();
}

absl::Status PReluOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor slope, ctx.In(1));
  ASSIGN_OR_RETURN(slope, LegacyBroadcast(ctx, x, slope));
  if (ctx.opset() < 7 && slope.ndim() == 1 && x.ndim() >= 2 && slope.dim(0) == x.dim(1) &&
      slope.dim(0) != x.dim(-1)) {
    Shape s(x.ndim() - 1, 1);
    s[0] = slope.dim(0);
    slope = slope.Reshape(s);
  }
  slope = slope.Cast(x.dtype());
  ctx.Set(0, Tensor::Where(x.Lt(x.Scalar(0)), x * slope, x));
  return absl::OkStatus();
}

absl::Status WhereOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(3, 3));
  ASSIGN_OR_RETURN(Tensor c, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor a, ctx.In(1));
  ASSIGN_OR_RETURN(Tensor b, ctx.In(2));
  ctx.Set(0, Tensor::Where(c, a, b));
  return absl::OkStatus();
}

}  // namespace

void RegisterElementwiseOps(OpRegistry* r) {
  using C = const OpContext&;
  Unary(r, "Abs", [](const Tensor& x, C) { return x.Abs(); });
  Unary(r, "Neg", [](const Tensor& x, C) { return x.Neg(); });
  Unary(r, "Exp", [](const Tensor& x, C) { return x.Exp(); });
  Unary(r, "Log", [](const Tensor& x, C) { return x.Log(); });
  Unary(r, "Sqrt", [](const Tensor& x, C) { return x.Sqrt(); });
  Unary(r, "Reciprocal", [](const Tensor& x, C) { return x.Reciprocal(); });
  Unary(r, "Floor", [](const Tensor& x, C) { return x.Floor(); });
  Unary(r, "Ceil", [](const Tensor& x, C) { return x.Ceil(); });
  Unary(r, "Round", [](const Tensor& x, C) { return x.Round(); });
  Unary(r, "Sign", [](const Tensor& x, C) { return x.Sign(); });
  Unary(r, "Sin", [](const Tensor& x, C) { return x.Sin(); });
  Unary(r, "Cos", [](const Tensor& x, C) { return x.Cos(); });
  Unary(r, "Tan", [](const Tensor& x, C) { return x.Tan(); });
  Unary(r, "Asin", [](const Tensor& x, C) { return Asin(x); });
  Unary(r, "Acos", [](const Tensor& x, C) { return Acos(x); });
  Unary(r, "Atan", [](const Tensor& x, C) { return Atan(x); });
  Unary(r, "Sinh", [](const Tensor& x, C) { return Sinh(x); });
  Unary(r, "Cosh", [](const Tensor& x, C) { return Cosh(x); });
  Unary(r, "Tanh", [](const Tensor& x, C) { return x.Tanh(); });
  Unary(r, "Asinh", [](const Tensor& x, C) { return Asinh(x); });
  Unary(r, "Acosh", [](const Tensor& x, C) { return Acosh(x); });
  Unary(r, "Atanh", [](const Tensor& x, C) { return Atanh(x); });
  Unary(r, "Erf", [](const Tensor& x, C) { return x.Erf(); });
  Unary(r, "Sigmoid", [](const Tensor& x, C) { return x.Sigmoid(); });
  Unary(r, "Relu", [](const Tensor& x, C) { return x.Relu(); });
  Unary(r, "Softplus", [](const Tensor& x, C) { return x.Softplus(); });
  Unary(r, "Softsign", [](const Tensor& x, C) { return x / (x.Abs() + 1.0); });
  Unary(r, "Mish", [](const Tensor& x, C) { return x * x.Softplus().Tanh(); });
  Unary(r, "HardSwish", [](const Tensor& x, C) { return x.HardSwish(); });
  Unary(r, "IsNaN", [](const Tensor& x, C) { return x.IsNan(); });
  Unary(r, "Not", [](const Tensor& x, C) { return x.LogicalNot(); });
  Unary(r, "BitwiseNot", [](const Tensor& x, C) { return x.BitwiseNot(); });
  Unary(r, "IsInf", [](const Tensor& x, C ctx) {
    return x.IsInf(ctx.Int("detect_positive", 1) != 0, ctx.Int("detect_negative", 1) != 0);
  });
  Unary(r, "Elu", [](const Tensor& x, C ctx) { return x.Elu(ctx.Float("alpha", 1.0f)); });
  Unary(r, "LeakyRelu",
        [](const Tensor& x, C ctx) { return x.LeakyRelu(ctx.Float("alpha", 0.01f)); });
  Unary(r, "HardSigmoid", [](const Tensor& x, C ctx) {
    return x.HardSigmoid(ctx.Float("alpha", 0.2f), ctx.Float("beta", 0.5f));
  });
  Unary(r, "ThresholdedRelu", [](const Tensor& x, C ctx) {
    return Tensor::Where(x.Gt(x.Scalar(ctx.Float("alpha", 1.0f))), x, x.ZerosLike());
  });
  Unary(r, "Selu", [](const Tensor& x, C ctx) {
    double alpha = ctx.Float("alpha", 1.67326319217681884765625f);
    double gamma = ctx.Float("gamma", 1.05070102214813232421875f);
    return Tensor::Where(x.Gt(x.Scalar(0)), x, (x.Exp() - 1.0) * alpha) * gamma;
  });
  Unary(r, "Celu", [](const Tensor& x, C ctx) {
    double alpha = ctx.Float("alpha", 1.0f);
    return x.Relu() + ((x / alpha).Exp() - 1.0).Minimum(x.Scalar(0)) * alpha;
  });
  Unary(r, "Shrink", [](const Tensor& x, C ctx) {
    double bias = ctx.Float("bias", 0.0f), lambd = ctx.Float("lambd", 0.5f);
    Tensor zero = x.ZerosLike();
    return Tensor::Where(x.Lt(x.Scalar(-lambd)), x + bias,
                         Tensor::Where(x.Gt(x.Scalar(lambd)), x - bias, zero));
  });
  Unary(r, "Gelu", [](const Tensor& x, C ctx) {
    return ctx.Str("approximate", "none") == "tanh" ? x.GeluTanh() : x.Gelu();
  });

  using T = const Tensor&;
  Binary(r, "Add", [](T a, T b, C) { return a + b; });
  Binary(r, "Sub", [](T a, T b, C) { return a - b; });
  Binary(r, "Mul", [](T a, T b, C) { return a * b; });
  Binary(r, "Div", [](T a, T b, C) { return a / b; });
  Binary(r, "Pow", [](T a, T b, C) { return a.Pow(b.Cast(a.dtype())); });
  Binary(r, "Mod", [](T a, T b, C ctx) { return ctx.Int("fmod", 0) ? a.Fmod(b) : a.Mod(b); });
  Binary(r, "Equal", [](T a, T b, C) { return a.Eq(b); });
  Binary(r, "Less", [](T a, T b, C) { return a.Lt(b); });
  Binary(r, "LessOrEqual", [](T a, T b, C) { return a.Le(b); });
  Binary(r, "Greater", [](T a, T b, C) { return a.Gt(b); });
  Binary(r, "GreaterOrEqual", [](T a, T b, C) { return a.Ge(b); });
  Binary(r, "And", [](T a, T b, C) { return a.LogicalAnd(b); });
  Binary(r, "Or", [](T a, T b, C) { return a.LogicalOr(b); });
  Binary(r, "Xor", [](T a, T b, C) { return a.LogicalXor(b); });
  Binary(r, "BitwiseAnd", [](T a, T b, C) { return a.BitwiseAnd(b); });
  Binary(r, "BitwiseOr", [](T a, T b, C) { return a.BitwiseOr(b); });
  Binary(r, "BitwiseXor", [](T a, T b, C) { return a.BitwiseXor(b); });
  Binary(r, "BitShift", [](T a, T b, C ctx) {
    std::string dir = ctx.Str("direction", "");
    if (dir == "LEFT") return a.ShiftLeft(b);
    if (dir == "RIGHT") return a.ShiftRight(b);
    return Tensor::Error(Invalid("direction must be LEFT or RIGHT"));
  });

  Variadic(r, "Sum", [](T a, T b) { return a + b; });
  Variadic(r, "Mean", [](T a, T b) { return a + b; }, /*mean=*/true);
  Variadic(r, "Max", [](T a, T b) { return a.Maximum(b); });
  Variadic(r, "Min", [](T a, T b) { return a.Minimum(b); });

  r->Register("Clip", ClipOp);
  r->Register("Cast", CastOp);
  r->Register("CastLike", CastLikeOp);
  r->Register("PRelu", PReluOp);
  r->Register("Where", WhereOp);
}

}  // namespace kiln

// Composite math built from the primitives: transcendental functions,
// activations, rounding, division variants, softmax, matmul, norms.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/tensor/tensor.h"
#include "engine/tensor/tensor_internal.h"

namespace kiln {
namespace {

// Split-K matmuls (K >= kMatmulSplitKMin) reduce chunks of at most this.
constexpr int64_t kSplitKChunk = 1024;
// The fewest rows of A for which a right operand read across its rows
// is copied into (K, N) rows first (TransposedCopyPays): the copy is K x N
// elements, the matmul M x N x K multiply-adds.
constexpr int64_t kTransposedCopyRows = 16;

Tensor F(const Tensor& t) { return t.dtype().IsFloat() ? t : t.Cast(dtypes::kFloat32); }
}  // namespace

Tensor Tensor::Exp() const { Tensor x = F(*this); return (x * M_LOG2E).Exp2(); }
Tensor Tensor::Log() const { Tensor x = F(*this); return x.Log2() * M_LN2; }
Tensor Tensor::Rsqrt() const { return Sqrt().Reciprocal(); }
Tensor Tensor::Cos() const { Tensor x = F(*this); return (x.Scalar(M_PI_2) - x).Sin(); }
Tensor Tensor::Tan() const { return Sin() / Cos(); }
Tensor Tensor::Sigmoid() const {
  Tensor x = F(*this);
  return ((-x).Exp() + 1.0).Reciprocal();
}
Tensor Tensor::Tanh() const {
  Tensor x = F(*this);
  Tensor ax = x.Abs();
  Tensor e = (ax * -2.0).Exp();
  Tensor big = (x.Scalar(1.0) - e) / (e + 1.0) * x.Sign();
  // Near 0, a short series keeps full relative precision.
  Tensor x2 = x * x;
  Tensor small = x * (((x2 * (-17.0 / 315) + 2.0 / 15) * x2 - 1.0 / 3) * x2 + 1.0);
  return Where(ax.Lt(x.Scalar(0.0625)), small, big);
}
Tensor Tensor::Relu() const { return Maximum(ZerosLike()); }
Tensor Tensor::LeakyRelu(double alpha) const {
  Tensor x = F(*this);
  return Where(x.Gt(x.Scalar(0)), x, x * alpha);
}
Tensor Tensor::Elu(double alpha) const {
  Tensor x = F(*this);
  return Where(x.Gt(x.Scalar(0)), x, (x.Exp() - 1.0) * alpha);
}
Tensor Tensor::Erf() const {
  // An odd rational function x P(x^2) / Q(x^2) of degrees 6 and 4 in x^2,
  // fitted to erf on [-4, 4] (least squares in the relative error,
  // reweighted towards its maximum); past 4, erf is +-1 in float32.
  // Evaluated in float32: |error| < 4.3e-7, one division and no exp (GELU's
  // kernels 1.2x faster than with Abramowitz & Stegun 7.1.26 and a Taylor
  // series near 0, both computed: ConvNeXt-T's 5.05 -> 4.07 ms). The
  // input's clamp compares (false for NaN, which passes through); the
  // result's (rounding may pass 1 by 2 ulp) is a MAX / MIN, which does not
  // keep NaN on every device, so NaN is put back from x. (The result is
  // read once, so the kernel computing it also clamps it: a value read
  // several times past a long chain gets a buffer of its own.)
  Tensor x = F(*this);
  Tensor hi = x.Scalar(4.0), lo = x.Scalar(-4.0);
  Tensor xc = Where(x.Gt(hi), hi, Where(x.Lt(lo), lo, x));
  Tensor t = xc * xc;
  Tensor p = (((((t * 1.911326777e-08 - 1.942305712e-06) * t + 1.472597716e-04) * t +
                3.989299137e-03) * t + 5.152074082e-02) * t + 2.070943356e-01) * t +
             1.128379094;
  Tensor q = (((t * 1.020817146e-03 + 1.495543254e-02) * t + 1.179579310e-01) * t +
              5.168638278e-01) * t + 1.0;
  Tensor r = -(-(xc * p / q).Maximum(x.Scalar(-1.0))).Maximum(x.Scalar(-1.0));
  return Where(x.Ne(x), x, r);
}
Tensor Tensor::Gelu() const {
  Tensor x = F(*this);
  return x * 0.5 * ((x * M_SQRT1_2).Erf() + 1.0);
}
Tensor Tensor::GeluTanh() const {
  Tensor x = F(*this);
  return x * 0.5 * (((x * x * x * 0.044715 + x) * std::sqrt(2.0 / M_PI)).Tanh() + 1.0);
}
Tensor Tensor::HardSigmoid(double alpha, double beta) const {
  Tensor x = F(*this);
  return (x * alpha + beta).Clip(0.0, 1.0);
}
Tensor Tensor::HardSwish() const { return F(*this) * HardSigmoid(1.0 / 6, 0.5); }
Tensor Tensor::Softplus() const {
  Tensor x = F(*this);
  return Where(x.Gt(x.Scalar(20)), x, (x.Exp() + 1.0).Log());
}
Tensor Tensor::Abs() const {
  if (!ok() || dtype().IsUnsigned() || dtype().IsBool()) return *this;
  return Where(Lt(ZerosLike()), Neg(), *this);
}
Tensor Tensor::Sign() const {
  if (!ok()) return *this;
  Tensor z = ZerosLike();
  return Where(Gt(z), OnesLike(), Where(Lt(z), Scalar(-1), z));
}
Tensor Tensor::Floor() const {
  if (!ok() || !dtype().IsFloat()) return *this;
  Tensor t = Trunc();
  return Where(Lt(t), t - 1.0, t);
}
Tensor Tensor::Ceil() const {
  if (!ok() || !dtype().IsFloat()) return *this;
  Tensor t = Trunc();
  return Where(Gt(t), t + 1.0, t);
}
Tensor Tensor::Round() const {
  if (!ok() || !dtype().IsFloat()) return *this;
  Tensor r = (*this + 0.5).Floor();
  // Ties go to even: if x was exactly halfway and r is odd, step back.
  Tensor tie = (r - *this).Eq(Scalar(0.5));
  Tensor odd = (r - (r * 0.5).Floor() * 2.0).Ne(Scalar(0));
  return Where(tie.LogicalAnd(odd), r - 1.0, r);
}
Tensor Tensor::Clip(std::optional<double> lo, std::optional<double> hi) const {
  Tensor x = *this;
  if (lo) x = x.Maximum(x.Scalar(*lo));
  if (hi) x = x.Minimum(x.Scalar(*hi));
  return x;
}
Tensor Tensor::IsNan() const {
  if (!ok()) return *this;
  if (!dtype().IsFloat()) return Full(engine(), shape(), int64_t{0}, dtypes::kBool, device());
  return Ne(*this);
}
Tensor Tensor::IsInf(bool pos, bool neg) const {
  if (!ok()) return *this;
  Tensor r = Full(engine(), shape(), int64_t{0}, dtypes::kBool, device());
  if (!dtype().IsFloat()) return r;
  if (pos) r = r.LogicalOr(Eq(Scalar(INFINITY)));
  if (neg) r = r.LogicalOr(Eq(Scalar(-INFINITY)));
  return r;
}

Tensor Tensor::FloorDiv(const Tensor& o) const {
  if (!ok()) return *this;
  DType t = PromoteTypes(dtype(), o.dtype());
  if (t.IsFloat()) return Div(o).Floor();
  Tensor a = Cast(t), b = o.Cast(t);
  Tensor q = a.Div(b);
  if (t.IsUnsigned()) return q;
  Tensor inexact = (q * b).Ne(a);
  Tensor neg = a.Lt(a.ZerosLike()).LogicalXor(b.Lt(b.ZerosLike()));
  return Where(inexact.LogicalAnd(neg), q - 1.0, q);
}
Tensor Tensor::Fmod(const Tensor& o) const {
  if (!ok()) return *this;
  DType t = PromoteTypes(dtype(), o.dtype());
  if (!t.IsFloat()) return Binary(Op::kMod, o);
  Tensor a = Cast(t), b = o.Cast(t);
  return a - (a / b).Trunc() * b;
}
Tensor Tensor::Mod(const Tensor& o) const {
  if (!ok()) return *this;
  DType t = PromoteTypes(dtype(), o.dtype());
  Tensor a = Cast(t), b = o.Cast(t);
  Tensor r = a.Fmod(b);
  if (t.IsUnsigned()) return r;
  Tensor z = r.ZerosLike();
  Tensor fix = r.Ne(z).LogicalAnd(r.Lt(z).LogicalXor(b.Lt(b.ZerosLike())));
  return Where(fix, r + b, r);
}

// ---------------- reductions built on max / sum ----------------

Tensor Tensor::Argmax(int64_t axis, bool keepdim, bool select_last) const {
  if (!ok()) return *this;
  if (axis < 0) axis += ndim();
  if (axis < 0 || axis >= ndim()) return TensorInternal::ErrorLike(*this, absl::InvalidArgumentError("argmax: axis out of range"));
  int64_t n = shape()[axis];
  Tensor x = select_last ? Flip({axis}) : *this;
  Tensor m = x.Eq(x.Max({axis}, true));
  Shape s(ndim(), 1);
  s[axis] = n;
  // n, n-1, ..., 1 along the axis: the first max has the largest weight.
  Tensor w = Arange(engine(), static_cast<double>(n), 0, -1, dtypes::kInt64, device()).Reshape(s);
  Tensor first = Where(m, w, w.ZerosLike()).Max({axis}, keepdim);
  Tensor idx = first.Scalar(static_cast<double>(n)) - first;
  if (select_last) idx = idx.Scalar(static_cast<double>(n - 1)) - idx;
  return idx;
}
Tensor Tensor::Argmin(int64_t axis, bool keepdim, bool select_last) const {
  if (!ok()) return *this;
  Tensor x = dtype().IsFloat() ? Neg() : BitwiseNot();
  return x.Argmax(axis, keepdim, select_last);
}
Tensor Tensor::LogSumExp(std::vector<int64_t> axes, bool keepdim) const {
  Tensor x = F(*this);
  Tensor m = x.Max(axes, true);
  Tensor r = (x - m).Exp().Sum(axes, true).Log() + m;
  return keepdim ? r : r.Squeeze(axes.empty() ? std::vector<int64_t>{} : axes);
}
Tensor Tensor::Softmax(int64_t axis) const {
  Tensor x = F(*this);
  // The exponentials stored once: the normalization read them instead of
  // computing every exp a second time (attention's softmax over 4 x 128 x
  // 128 scores, batch 8: 258 -> 209 us; BERT 0.91-0.98x).
  Tensor e = (x - x.Max({axis}, true)).Exp().Contiguous();
  return e / e.Sum({axis}, true);
}
Tensor Tensor::LogSoftmax(int64_t axis) const {
  Tensor x = F(*this);
  Tensor s = x - x.Max({axis}, true);
  return s - s.Exp().Sum({axis}, true).Log();
}

// ---------------- linear algebra and norms ----------------

Tensor Tensor::Matmul(const Tensor& o) const {
  if (!ok()) return *this;
  if (!o.ok()) return o;
  if (ndim() == 0 || o.ndim() == 0)
    return TensorInternal::ErrorLike(*this, absl::InvalidArgumentError("matmul of a scalar"));
  // An operand read through stacked views (a transposed value reshaped:
  // attention heads merged back, (H, S, D) -> (S, H * D)) has no stride
  // along K; its loads in the matmul's inner loop become index arithmetic
  // element by element and nothing vectorizes. A copy (one elementwise
  // kernel over the operand, against K times as many FMAs) gives the matmul
  // a plain operand.
  auto plain = [](const Tensor& t) {
    const UOp& u = *t.uop();
    return u.op() == Op::kView && StOf(u)->views().size() > 1 ? t.Contiguous() : t;
  };
  Tensor a = plain(ndim() == 1 ? Reshape({1, shape()[0]}) : *this);
  Tensor b = plain(o.ndim() == 1 ? o.Reshape({o.shape()[0], 1}) : o);
  int64_t k = a.shape().back();
  if (b.shape()[b.ndim() - 2] != k)
    return TensorInternal::ErrorLike(
        *this, absl::InvalidArgumentError(absl::StrCat("matmul: shapes ", ShapeStr(shape()),
                                                       " and ", ShapeStr(o.shape()),
                                                       " do not align")));
  // Split K: a long reduction whose operands both overflow the cache (a
  // box head's 150 x 12544 features times 12544 x 1024 weights) streams one
  // of them from memory again for every tile of the other. Chunks of K
  // reduced first (partial sums (chunks, M, N), realized) keep a chunk of
  // each operand in cache; summing the chunks costs chunks x M x N.
  const int64_t m = a.shape()[a.ndim() - 2], n = b.shape().back();
  if (a.ndim() == 2 && b.ndim() == 2 && k >= kMatmulSplitKMin && std::min(m, n) >= 32 &&
      a.dtype() == dtypes::kFloat32 && b.dtype() == dtypes::kFloat32) {
    // The fewest chunks of at most kSplitKChunk, a multiple of 16 each.
    int64_t chunks = (k + kSplitKChunk - 1) / kSplitKChunk;
    while (chunks <= k / 256 && (k % chunks != 0 || (k / chunks) % 16 != 0)) ++chunks;
    if (chunks <= k / 256 && chunks > 1) {
      const int64_t kc = k / chunks;
      Tensor ac = a.Reshape({m, chunks, kc}).Permute({1, 0, 2}).Unsqueeze(2);  // (c, M, 1, kc)
      Tensor bc = b.Reshape({chunks, kc, n}).Transpose(-1, -2).Unsqueeze(1);   // (c, 1, N, kc)
      return (ac * bc).Sum({-1}).Contiguous().Sum({0});
    }
  }
  // a (..., M, K) -> (..., M, 1, K);  b (..., K, N) -> (..., 1, N, K)
  Tensor a3 = a.Unsqueeze(-2);
  Tensor b3 = b.Transpose(-1, -2).Unsqueeze(-3);
  Tensor r = (a3 * b3).Sum({-1});
  if (ndim() == 1) r = r.Squeeze({-2});
  if (o.ndim() == 1) r = r.Squeeze({-1});
  return r;
}
// `b` (..., K, N) is one strided view whose K axis is adjacent in memory
// and whose N axis is not (B = X^T of a row-major X: attention's K^T). A
// CPU matmul then vectorizes only K: a dot product per output, ending in a
// horizontal sum of every accumulator -- with K = 64 (a head) about as many
// adds as multiply-adds (S = Q K^T of 4 heads x 128 x 128, batch 8: 67
// GFLOP/s; copied first, 223 GFLOP/s and 65 us for the copy).
bool Tensor::TransposedCopyPays(int64_t m, const Tensor& b) {
  if (!b.ok() || m < kTransposedCopyRows || b.ndim() < 2 || b.shape().back() < 8) return false;
  const UOp& u = *b.uop();
  if (u.op() != Op::kView) return false;
  const ShapeTracker* st = StOf(u);
  if (st == nullptr || st->views().size() != 1 || st->views()[0].mask()) return false;
  const std::vector<int64_t>& s = st->views()[0].strides();
  const int64_t sn = s[s.size() - 1], sk = s[s.size() - 2];
  return sk == 1 && (sn > 2 || sn < -2);
}

Tensor Tensor::Linear(const Tensor& w, const Tensor* bias) const {
  Tensor r = Matmul(w.Transpose());
  return bias ? r + *bias : r;
}
Tensor Tensor::LayerNorm(std::vector<int64_t> axes, double eps) const {
  Tensor x = F(*this);
  Tensor c = x - x.Mean(axes, true);
  return c * (c.Square().Mean(axes, true) + eps).Rsqrt();
}
Tensor Tensor::BatchNorm(const Tensor& scale, const Tensor& bias, const Tensor& mean,
                         const Tensor& var, double eps) const {
  if (!ok()) return *this;
  if (ndim() < 2) return TensorInternal::ErrorLike(*this, absl::InvalidArgumentError("batchnorm needs rank >= 2"));
  Shape s(ndim(), 1);
  s[1] = shape()[1];
  Tensor inv = (var.Reshape(s) + eps).Rsqrt() * scale.Reshape(s);
  return (*this - mean.Reshape(s)) * inv + bias.Reshape(s);
}

}  // namespace kiln

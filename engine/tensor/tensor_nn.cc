// Neural-network ops built from the primitives: sliding windows (Pool), max /
// average pooling and Resize (convolutions: tensor_conv.cc).
//
// Pool is the building block: it pads (with a chosen value) and takes a
// strided window view of the padded tensor, so conv and pooling are a
// zero-copy view, an elementwise op and one reduce.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/tensor/tensor.h"
#include "engine/tensor/tensor_internal.h"

namespace kiln {

std::string VecStr(const std::vector<int64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

std::vector<int64_t> OrDefault(const std::vector<int64_t>& v, size_t n, int64_t def) {
  return v.empty() ? std::vector<int64_t>(n, def) : v;
}

absl::Status CheckOption(const char* op, const char* name, const std::vector<int64_t>& v, size_t n,
                         int64_t min) {
  if (v.size() != n)
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", name, " ", VecStr(v), " needs ", n, " entries"));
  for (int64_t x : v)
    if (x < min)
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", name, " ", VecStr(v), " must be >= ", min));
  return absl::OkStatus();
}

std::vector<int64_t> AxisRange(int64_t first, int64_t n) {
  std::vector<int64_t> a;
  for (int64_t i = 0; i < n; ++i) a.push_back(first + i);
  return a;
}

namespace {

// The value that never wins a max for `t`.
double MaxIdentity(DType t) {
  if (t.IsFloat()) return -INFINITY;
  if (t.IsBool()) return 0;
  return DTypeMin(t);
}

}  // namespace

// ---------------- sliding windows ----------------

Tensor Tensor::Pool(const std::vector<int64_t>& kernel_in, const std::vector<int64_t>& stride_in,
                    const std::vector<int64_t>& dilation_in, const Pads& padding_in,
                    double pad_value) const {
  if (!ok()) return *this;
  const size_t nk = kernel_in.size();
  if (nk == 0 || static_cast<int>(nk) > ndim())
    return Fail(*this,
                absl::StrCat("pool: kernel ", VecStr(kernel_in), " for shape ", ShapeStr(shape())));
  std::vector<int64_t> stride = OrDefault(stride_in, nk, 1);
  std::vector<int64_t> dilation = OrDefault(dilation_in, nk, 1);
  Pads padding = padding_in.empty() ? Pads(nk, {0, 0}) : padding_in;
  for (auto s : {CheckOption("pool", "kernel", kernel_in, nk, 1),
                 CheckOption("pool", "stride", stride, nk, 1),
                 CheckOption("pool", "dilation", dilation, nk, 1)})
    if (!s.ok()) return TensorInternal::ErrorLike(*this, s);
  if (padding.size() != nk)
    return Fail(*this,
                absl::StrCat("pool: ", padding.size(), " paddings for ", nk, " kernel dims"));
  const int lead = ndim() - static_cast<int>(nk);
  Pads full(ndim(), {0, 0});
  for (size_t i = 0; i < nk; ++i) full[lead + i] = padding[i];
  Tensor p = Pad(full, pad_value);
  if (!p.ok()) return p;
  // Windows read every element several times: give them a plain buffer to
  // read (no padding masks, nothing recomputed), so the window view is one
  // affine view that vectorizes. Costs one cheap copy kernel, or none where
  // the scheduler computes the input into the padded buffer. A convolution
  // copying its windows (im2col) reads them from that buffer too: its copy
  // through the padding masks ran at 8-17 GB/s (DenseNet-121 batch 8: 24 ms
  // of its 417; elementwise kernels 74.7 -> 70.5 ms with the buffer).
  bool padded = false;
  for (const auto& [b, a] : padding) padded |= b != 0 || a != 0;
  // (A view of a CONTIGUOUS is one of its buffer: a slice of a batch padded
  // once, see Tensor::ChunkBatch.)
  if (padded || !p.Stored()) p = p.Contiguous();
  const Shape& ps = p.shape();
  Shape out_shape(ps.begin(), ps.begin() + lead);
  for (size_t i = 0; i < nk; ++i) {
    int64_t span;
    if (__builtin_mul_overflow(dilation[i], kernel_in[i] - 1, &span) || span >= ps[lead + i])
      span = ps[lead + i] + 1;  // (overflowing: certainly larger than the input)
    else
      span += 1;
    if (ps[lead + i] < span)
      return Fail(*this, absl::StrCat("pool: window ", span, " (kernel ", VecStr(kernel_in),
                                      ") is larger than the padded input ", ShapeStr(ps)));
    out_shape.push_back((ps[lead + i] - span) / stride[i] + 1);
  }
  for (size_t i = 0; i < nk; ++i) out_shape.push_back(kernel_in[i]);
  if (kiln::Prod(out_shape) == 0) return Zeros(engine(), out_shape, dtype(), device());
  // Row-major strides of the padded tensor.
  std::vector<int64_t> st(ps.size(), 1);
  for (int i = static_cast<int>(ps.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * ps[i + 1];
  std::vector<int64_t> strides(st.begin(), st.begin() + lead);
  for (size_t i = 0; i < nk; ++i) strides.push_back(st[lead + i] * stride[i]);
  for (size_t i = 0; i < nk; ++i) strides.push_back(st[lead + i] * dilation[i]);
  return p.AsStrided(out_shape, strides, 0);
}

// ---------------- pooling ----------------

namespace {
// Per pooled dim: input length, kernel, stride, dilation, pads and output.
struct PoolDim {
  int64_t in, k, s, d, pb, pa, out, extra;
};

absl::StatusOr<std::vector<PoolDim>> PoolGeometry(const char* op, const Tensor& x,
                                                  const Tensor::PoolOptions& o) {
  size_t nk = o.kernel.size();
  if (nk == 0 || static_cast<int>(nk) > x.ndim())
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": kernel ", VecStr(o.kernel), " for shape ", ShapeStr(x.shape())));
  std::vector<int64_t> stride = OrDefault(o.stride, nk, 0);
  if (o.stride.empty()) stride = o.kernel;
  std::vector<int64_t> dilation = OrDefault(o.dilation, nk, 1);
  RETURN_IF_ERROR(CheckOption(op, "kernel", o.kernel, nk, 1));
  RETURN_IF_ERROR(CheckOption(op, "stride", stride, nk, 1));
  RETURN_IF_ERROR(CheckOption(op, "dilation", dilation, nk, 1));
  Pads padding = o.padding.empty() ? Pads(nk, {0, 0}) : o.padding;
  if (padding.size() != nk)
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", padding.size(), " paddings for ", nk, " kernel dims"));
  std::vector<PoolDim> dims;
  int lead = x.ndim() - static_cast<int>(nk);
  for (size_t i = 0; i < nk; ++i) {
    PoolDim p{x.shape()[lead + i], o.kernel[i],       stride[i], dilation[i],
              padding[i].first,    padding[i].second, 0,         0};
    if (p.pb < 0 || p.pa < 0)
      return absl::InvalidArgumentError(absl::StrCat(op, ": negative padding"));
    int64_t span = p.d * (p.k - 1) + 1, eff = p.in + p.pb + p.pa;
    if (eff < span)
      return absl::InvalidArgumentError(absl::StrCat(op, ": window ", span, " is larger than the",
                                                     " padded input of shape ",
                                                     ShapeStr(x.shape())));
    p.out = (eff - span) / p.s + 1;
    if (o.ceil_mode) {
      p.out = (eff - span + p.s - 1) / p.s + 1;
      // The last window must start inside the input or the front padding.
      if ((p.out - 1) * p.s >= p.in + p.pb) --p.out;
    }
    p.extra = std::max<int64_t>(0, (p.out - 1) * p.s + span - eff);
    dims.push_back(p);
  }
  return dims;
}

Pads PoolPads(const std::vector<PoolDim>& dims) {
  Pads p;
  for (const PoolDim& d : dims) p.push_back({d.pb, d.pa + d.extra});
  return p;
}
std::vector<int64_t> Field(const std::vector<PoolDim>& dims, int64_t PoolDim::*f) {
  std::vector<int64_t> v;
  for (const PoolDim& d : dims) v.push_back(d.*f);
  return v;
}
}  // namespace

Tensor Tensor::MaxPool(const PoolOptions& o) const {
  if (!ok()) return *this;
  auto dims = PoolGeometry("max_pool", *this, o);
  if (!dims.ok()) return TensorInternal::ErrorLike(*this, dims.status());
  Tensor w = Pool(o.kernel, Field(*dims, &PoolDim::s), Field(*dims, &PoolDim::d), PoolPads(*dims),
                  MaxIdentity(dtype()));
  return w.Max(AxisRange(-static_cast<int64_t>(dims->size()), dims->size()));
}

Tensor Tensor::AvgPool(const PoolOptions& o) const {
  if (!ok()) return *this;
  auto dims_or = PoolGeometry("avg_pool", *this, o);
  if (!dims_or.ok()) return TensorInternal::ErrorLike(*this, dims_or.status());
  const std::vector<PoolDim>& dims = *dims_or;
  DType t = dtype() == dtypes::kFloat64 ? dtype() : dtypes::kFloat32;
  Tensor x = Cast(t);
  Tensor sum = x.Pool(o.kernel, Field(dims, &PoolDim::s), Field(dims, &PoolDim::d), PoolPads(dims))
                   .Sum(AxisRange(-static_cast<int64_t>(dims.size()), dims.size()));
  if (!sum.ok()) return sum;
  // The divisor per output position: a product of per-dim counts of the
  // window elements inside the input (or inside input + pads).
  std::vector<float> count = {1.0f};
  Shape out_shape;
  for (const PoolDim& d : dims) {
    std::vector<float> next;
    for (float c : count) {
      for (int64_t i = 0; i < d.out; ++i) {
        int64_t n = 0;
        for (int64_t j = 0; j < d.k; ++j) {
          int64_t pos = i * d.s - d.pb + j * d.d;
          n += o.count_include_pad ? (pos >= -d.pb && pos < d.in + d.pa) : (pos >= 0 && pos < d.in);
        }
        next.push_back(c * static_cast<float>(std::max<int64_t>(n, 1)));
      }
    }
    count = std::move(next);
    out_shape.push_back(d.out);
  }
  Tensor div = FromVector(engine(), count, out_shape, dtypes::kFloat32, device());
  Tensor r = sum / div.Cast(t);
  return dtype().IsFloat() ? r.Cast(dtype()) : r;
}

Tensor Tensor::GlobalAvgPool() const {
  if (!ok()) return *this;
  if (ndim() < 2) return Fail(*this, absl::StrCat("global_avg_pool: shape ", ShapeStr(shape())));
  if (ndim() == 2) return *this;
  if (dtype() == dtypes::kFloat16 || dtype() == dtypes::kBFloat16)
    return Cast(dtypes::kFloat32).Mean(AxisRange(2, ndim() - 2), true).Cast(dtype());
  return Mean(AxisRange(2, ndim() - 2), true);
}

Tensor Tensor::GlobalMaxPool() const {
  if (!ok()) return *this;
  if (ndim() < 2) return Fail(*this, absl::StrCat("global_max_pool: shape ", ShapeStr(shape())));
  if (ndim() == 2) return *this;
  return Max(AxisRange(2, ndim() - 2), true);
}

// ---------------- resize ----------------

namespace {
// Source coordinate of output index `x` (ONNX coordinate_transformation_mode).
double SourceCoord(Tensor::CoordMode m, int64_t x, int64_t in, int64_t out) {
  double scale = static_cast<double>(out) / static_cast<double>(in);
  switch (m) {
    case Tensor::CoordMode::kHalfPixel:
      return (static_cast<double>(x) + 0.5) / scale - 0.5;
    case Tensor::CoordMode::kPytorchHalfPixel:
      return out > 1 ? (static_cast<double>(x) + 0.5) / scale - 0.5 : -0.5;
    case Tensor::CoordMode::kAlignCorners:
      return out == 1 ? 0.0
                      : static_cast<double>(x) * static_cast<double>(in - 1) /
                            static_cast<double>(out - 1);
    case Tensor::CoordMode::kAsymmetric:
      return static_cast<double>(x) / scale;
  }
  return 0;
}

int64_t NearestIndex(Tensor::NearestMode m, double c) {
  double f = std::floor(c);
  switch (m) {
    case Tensor::NearestMode::kRoundPreferFloor:
      return static_cast<int64_t>(c - f == 0.5 ? f : std::round(c));
    case Tensor::NearestMode::kRoundPreferCeil:
      return static_cast<int64_t>(c - f == 0.5 ? f + 1 : std::round(c));
    case Tensor::NearestMode::kFloor:
      return static_cast<int64_t>(f);
    case Tensor::NearestMode::kCeil:
      return static_cast<int64_t>(std::ceil(c));
  }
  return 0;
}
}  // namespace

Tensor Tensor::Resize(const Shape& sizes, ResizeMode mode, CoordMode coord,
                      NearestMode nearest) const {
  if (!ok()) return *this;
  if (static_cast<int>(sizes.size()) != ndim())
    return Fail(*this,
                absl::StrCat("resize: sizes ", VecStr(sizes), " for shape ", ShapeStr(shape())));
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0) return Fail(*this, absl::StrCat("resize: negative size ", VecStr(sizes)));
    if (shape()[i] == 0 && sizes[i] != 0)
      return Fail(*this, absl::StrCat("resize: cannot resize the empty dim of ", ShapeStr(shape()),
                                      " to ", VecStr(sizes)));
  }
  if (absl::Status bad = CheckShape(sizes, "resize"); !bad.ok())
    return TensorInternal::ErrorLike(*this, bad);
  if (kiln::Prod(sizes) == 0) return Zeros(engine(), sizes, dtype(), device());
  for (int axis = 0; axis < ndim(); ++axis)  // the host-built (out, in) tables
    if (sizes[axis] != shape()[axis] && sizes[axis] > kMaxHostIota / std::max<int64_t>(shape()[axis], 1))
      return TensorInternal::ErrorLike(
          *this, absl::ResourceExhaustedError(absl::StrCat(
                     "resize: ", ShapeStr(shape()), " -> ", VecStr(sizes),
                     " needs an interpolation table that is too large")));
  Tensor r = *this;
  bool linear = mode == ResizeMode::kLinear;
  // Linear interpolation computes in float32 (float64 stays float64).
  DType ct = dtype() == dtypes::kFloat64 ? dtype() : dtypes::kFloat32;
  if (linear) r = r.Cast(ct);
  for (int axis = 0; axis < ndim(); ++axis) {
    int64_t in = shape()[axis], out = sizes[axis];
    if (in == out) continue;
    Shape ts(ndim() + 1, 1);  // tables are (out, in) at (axis, axis + 1)
    ts[axis] = out;
    ts[axis + 1] = in;
    Tensor xs = r.Unsqueeze(axis);  // (..., 1, in, ...)
    Tensor zero = r.Const(int64_t{0}, r.dtype());
    if (!linear) {
      // Nearest: a host-built one-hot (out, in) selection table.
      std::vector<uint8_t> pick(out * in, 0);
      for (int64_t x = 0; x < out; ++x)
        pick[x * in + std::clamp<int64_t>(NearestIndex(nearest, SourceCoord(coord, x, in, out)), 0,
                                          in - 1)] = 1;
      Tensor sel = Where(FromVector(engine(), pick, ts, dtypes::kBool, device()), xs, zero);
      r = sel.Sum({axis + 1});
      if (r.dtype() != dtype()) r = r.Cast(dtype());
      continue;
    }
    // Linear: an (out, in) interpolation matrix with at most two non-zero
    // weights per row (neighbours clamped to the edge).
    std::vector<float> wt(out * in, 0.0f);
    for (int64_t x = 0; x < out; ++x) {
      double c = SourceCoord(coord, x, in, out);
      double f = std::floor(c);
      double frac = c - f;
      int64_t i0 = std::clamp<int64_t>(static_cast<int64_t>(f), 0, in - 1);
      int64_t i1 = std::clamp<int64_t>(static_cast<int64_t>(f) + 1, 0, in - 1);
      wt[x * in + i0] += static_cast<float>(1.0 - frac);
      wt[x * in + i1] += static_cast<float>(frac);
    }
    Tensor w = FromVector(engine(), wt, ts, dtypes::kFloat32, device()).Cast(ct);
    // Where keeps an inf / nan out of the rows whose weight is 0.
    r = Where(w.Ne(w.ZerosLike()), xs * w, zero).Sum({axis + 1});
  }
  if (linear && !dtype().IsFloat()) return r.Round().Cast(dtype());
  return r.Cast(dtype());
}

}  // namespace kiln

// Less common tensor operators built from gathers and masks:
// ReverseSequence, Det (Gaussian elimination with partial pivoting, unrolled
// over the matrix size), MaxUnpool, GridSample.
#include <cmath>

#include "engine/onnx/ops_common.h"

namespace kiln {
namespace {

Tensor Iota(const OpContext& ctx, int64_t n, int64_t rank, int64_t axis) {
  Shape s(rank, 1);
  s[axis] = n;
  return Tensor::Arange(ctx.engine(), 0, static_cast<double>(n), 1, dtypes::kInt64, ctx.device())
      .Reshape(s);
}

absl::Status ReverseSequenceOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor lens, ctx.In(1));
  ASSIGN_OR_RETURN(int64_t baxis, NormAxis(ctx.Int("batch_axis", 1), x.ndim()));
  ASSIGN_OR_RETURN(int64_t taxis, NormAxis(ctx.Int("time_axis", 0), x.ndim()));
  if (baxis == taxis) return Invalid("batch_axis and time_axis must differ");
  int64_t rank = x.ndim();
  Shape ls(rank, 1);
  ls[baxis] = x.dim(static_cast<int>(baxis));
  Tensor len = lens.Cast(dtypes::kInt64).Reshape(ls);
  Tensor t = Iota(ctx, x.dim(static_cast<int>(taxis)), rank, taxis);
  Tensor idx = Tensor::Where(t.Lt(len), len - t - 1.0, t).Expand(x.shape());
  ctx.Set(0, x.Gather(taxis, idx));
  return absl::OkStatus();
}

// Row i of (..., n, n) as (..., 1, n).
Tensor Row(const Tensor& a, int64_t i) {
  std::vector<Tensor::Slice> s(a.ndim());
  s[a.ndim() - 2] = Tensor::Slice{i, i + 1, 1};
  return a.Slices(s);
}
Tensor Col(const Tensor& a, int64_t j) {
  std::vector<Tensor::Slice> s(a.ndim());
  s[a.ndim() - 1] = Tensor::Slice{j, j + 1, 1};
  return a.Slices(s);
}

absl::Status DetOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  if (x.ndim() < 2 || x.dim(-1) != x.dim(-2)) return Invalid("input must be (..., n, n)");
  int64_t n = x.dim(-1), r = x.ndim();
  // The elimination is unrolled over n.
  if (n > 1024) return Unsupported(absl::StrCat("Det of ", n, "x", n, " matrices (n > 1024)"));
  DType t = x.dtype();
  Tensor a = t == dtypes::kFloat64 ? x : x.Cast(dtypes::kFloat32);
  Shape batch(x.shape().begin(), x.shape().end() - 2);
  Shape b1 = batch;
  b1.push_back(1);
  b1.push_back(1);
  Tensor det = Tensor::Ones(ctx.engine(), b1, a.dtype(), ctx.device());
  Tensor rows = Iota(ctx, n, r, r - 2);  // (.., n, 1)
  for (int64_t k = 0; k < n; ++k) {
    // Pivot: the largest |a[i, k]| with i >= k.
    Tensor col = Col(a, k).Abs();
    col = Tensor::Where(rows.Lt(rows.Scalar(static_cast<double>(k))), col.Scalar(-1), col);
    Tensor p = col.Argmax(r - 2, /*keepdim=*/true);  // (.., 1, 1)
    Tensor is_p = rows.Eq(p), is_k = rows.Eq(rows.Scalar(static_cast<double>(k)));
    Tensor row_p = Tensor::Where(is_p, a, a.ZerosLike()).Sum({r - 2}, true);
    Tensor row_k = Row(a, k);
    a = Tensor::Where(is_k, row_p, Tensor::Where(is_p, row_k, a));
    det = Tensor::Where(p.Eq(p.Scalar(static_cast<double>(k))), det, -det);
    Tensor pivot = Col(Row(a, k), k);  // (.., 1, 1)
    det = det * pivot;
    Tensor zero = pivot.ZerosLike();
    Tensor factor = Tensor::Where(pivot.Eq(zero), zero, Col(a, k) / pivot);  // (.., n, 1)
    factor = Tensor::Where(rows.Gt(rows.Scalar(static_cast<double>(k))), factor, factor.ZerosLike());
    a = a - factor * Row(a, k);
  }
  ctx.Set(0, det.Reshape(batch).Cast(t));
  return absl::OkStatus();
}

absl::Status MaxUnpoolOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 3));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor idx, ctx.In(1));
  if (x.ndim() < 3 || idx.shape() != x.shape()) return Invalid("X and I must match, rank >= 3");
  size_t nd = x.ndim() - 2;
  std::vector<int64_t> kernel = ctx.Ints("kernel_shape"), strides = ctx.Ints("strides"),
                       pads = ctx.Ints("pads");
  if (strides.empty()) strides.assign(nd, 1);
  if (pads.empty()) pads.assign(2 * nd, 0);
  if (kernel.size() != nd || strides.size() != nd || pads.size() != 2 * nd)
    return Invalid("kernel_shape / strides / pads do not match the spatial rank");
  // Indices address the default output; an explicit output_shape pads it at the end.
  Shape out = {x.dim(0), x.dim(1)};
  for (size_t i = 0; i < nd; ++i) {
    int64_t o;
    if (__builtin_mul_overflow(x.dim(static_cast<int>(2 + i)) - 1, strides[i], &o) ||
        __builtin_add_overflow(o, kernel[i], &o) || __builtin_sub_overflow(o, pads[i], &o) ||
        __builtin_sub_overflow(o, pads[i + nd], &o) || o < 0)
      return Invalid("kernel_shape / strides / pads give a bad output size");
    out.push_back(o);
  }
  RETURN_IF_ERROR(CheckedNumel(out, kMaxTensorShapeElements, "the MaxUnpool output").status());
  Shape final_shape = out;
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(final_shape, ctx.StaticInts(2));
    if (final_shape.size() != out.size()) return Invalid("bad output_shape");
    for (size_t i = 0; i < out.size(); ++i)
      if (final_shape[i] < out[i]) return Invalid("output_shape is smaller than the unpooled shape");
  }
  int64_t total = kiln::Prod(out), m = x.numel();
  Tensor hot = idx.Reshape({m, 1}).Cast(dtypes::kInt64).Eq(Iota(ctx, total, 2, 1));  // (m, total)
  Tensor vals = x.Reshape({m, 1});
  Tensor y = Tensor::Where(hot, vals, vals.ZerosLike()).Sum({0});
  Pads grow;
  for (size_t i = 0; i < out.size(); ++i) grow.push_back({0, final_shape[i] - out[i]});
  ctx.Set(0, y.Reshape(out).Pad(grow));
  return absl::OkStatus();
}

// ---- GridSample (PyTorch grid_sample semantics) ----

// Reflects coordinates into [lo, hi] (twice-scaled bounds, as PyTorch does).
Tensor Reflect(const Tensor& c, double twice_lo, double twice_hi) {
  if (twice_lo == twice_hi) return c.ZerosLike();
  double lo = twice_lo / 2, span = (twice_hi - twice_lo) / 2;
  Tensor in = (c - lo).Abs();
  Tensor flips = (in / span).Floor();
  Tensor extra = in - flips * span;
  Tensor even = (flips - (flips / 2.0).Floor() * 2.0).Eq(flips.Scalar(0));
  return Tensor::Where(even, extra + lo, extra.Scalar(span) - extra + lo);
}

// Applies the padding mode to a source coordinate along a dim of size n.
Tensor PadCoord(const Tensor& c, int64_t n, const std::string& mode, bool align) {
  double hi = static_cast<double>(n - 1);
  if (mode == "border") return c.Clip(0.0, hi);
  if (mode == "reflection") {
    Tensor r = align ? Reflect(c, 0, 2 * hi) : Reflect(c, -1, 2.0 * static_cast<double>(n) - 1);
    return r.Clip(0.0, hi);
  }
  return c;
}

absl::Status GridSampleOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor grid, ctx.In(1));
  if (x.ndim() != 4 || grid.ndim() != 4 || grid.dim(3) != 2 || grid.dim(0) != x.dim(0))
    return Invalid("X must be (N, C, H, W) and grid (N, Ho, Wo, 2)");
  std::string mode = ctx.Str("mode", "bilinear"), pad = ctx.Str("padding_mode", "zeros");
  bool align = ctx.Int("align_corners", 0) != 0;
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), ho = grid.dim(1), wo = grid.dim(2);
  DType t = x.dtype() == dtypes::kFloat64 ? dtypes::kFloat64 : dtypes::kFloat32;
  Tensor g = grid.Cast(t);
  auto unnorm = [&](int64_t j, int64_t size) {
    Tensor v = g.Slices({{}, {}, {}, Tensor::Slice{j, j + 1, 1}}).Reshape({n, ho * wo});
    double s = static_cast<double>(size);
    return align ? (v + 1.0) * ((s - 1) / 2) : ((v + 1.0) * s - 1.0) / 2.0;
  };
  Tensor gx = unnorm(0, w), gy = unnorm(1, h);
  Tensor flat = x.Cast(t).Reshape({n, c, h * w});
  // Value at integer coordinates (iy, ix) (n, P), zero outside the input.
  auto tap = [&](const Tensor& iy, const Tensor& ix) {
    Tensor inside = iy.Ge(iy.Scalar(0)).LogicalAnd(iy.Le(iy.Scalar(static_cast<double>(h - 1))))
                        .LogicalAnd(ix.Ge(ix.Scalar(0)))
                        .LogicalAnd(ix.Le(ix.Scalar(static_cast<double>(w - 1))));
    Tensor lin = (iy.Clip(0.0, static_cast<double>(h - 1)) * static_cast<double>(w) +
                  ix.Clip(0.0, static_cast<double>(w - 1)))
                     .Cast(dtypes::kInt64);
    Tensor v = flat.Gather(2, lin.Reshape({n, 1, ho * wo}).Expand({n, c, ho * wo}));
    return Tensor::Where(inside.Reshape({n, 1, ho * wo}), v, v.ZerosLike());
  };
  Tensor y;
  if (mode == "nearest" || mode == "bilinear") {
    Tensor px = PadCoord(gx, w, pad, align), py = PadCoord(gy, h, pad, align);
    if (mode == "nearest") {
      y = tap(py.Round(), px.Round());
    } else {
      Tensor x0 = px.Floor(), y0 = py.Floor();
      Tensor fx = (px - x0).Reshape({n, 1, ho * wo}), fy = (py - y0).Reshape({n, 1, ho * wo});
      Tensor x1 = x0 + 1.0, y1 = y0 + 1.0;
      y = tap(y0, x0) * (fx.Scalar(1) - fx) * (fy.Scalar(1) - fy) + tap(y0, x1) * fx * (fy.Scalar(1) - fy) +
          tap(y1, x0) * (fx.Scalar(1) - fx) * fy + tap(y1, x1) * fx * fy;
    }
  } else if (mode == "bicubic") {
    const double a = -0.75;
    auto coeffs = [&](const Tensor& f) {
      auto far = [&](const Tensor& d) { return ((d * a - 5 * a) * d + 8 * a) * d - 4 * a; };
      auto near = [&](const Tensor& d) { return ((d * (a + 2)) - (a + 3)) * d * d + 1.0; };
      Tensor one = f.Scalar(1);
      return std::vector<Tensor>{far(f + 1.0), near(f), near(one - f), far(one + one - f)};
    };
    Tensor x0 = gx.Floor(), y0 = gy.Floor();
    std::vector<Tensor> cx = coeffs((gx - x0).Reshape({n, 1, ho * wo}));
    std::vector<Tensor> cy = coeffs((gy - y0).Reshape({n, 1, ho * wo}));
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        Tensor iy = PadCoord(y0 + static_cast<double>(i - 1), h, pad, align);
        Tensor ix = PadCoord(x0 + static_cast<double>(j - 1), w, pad, align);
        Tensor term = tap(iy.Trunc(), ix.Trunc()) * cy[i] * cx[j];
        y = (i == 0 && j == 0) ? term : y + term;
      }
  } else {
    return Invalid(absl::StrCat("unknown mode '", mode, "'"));
  }
  ctx.Set(0, y.Reshape({n, c, ho, wo}).Cast(x.dtype()));
  return absl::OkStatus();
}

}  // namespace

void RegisterExtraOps(OpRegistry* r) {
  r->Register("ReverseSequence", ReverseSequenceOp);
  r->Register("Det", DetOp);
  r->Register("MaxUnpool", MaxUnpoolOp);
  r->Register("GridSample", GridSampleOp);
}

}  // namespace kiln

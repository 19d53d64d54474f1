// Resize and Upsample, following the ONNX reference implementation: per axis
// (innermost first) the output coordinate maps back to the input
// (coordinate_transformation_mode, with the given scale, not out / in), then
// nearest picks one input element (gather, or a zero-copy expand for integer
// upsampling) and linear / cubic mix 2 / 4 neighbours, each an indexed load
// scaled by a per-output coefficient computed on the host.
#include <cmath>

#include "engine/onnx/ops_common.h"

namespace kiln {
namespace {

// Largest output size along one axis (the host builds per-output-index
// tables of this length).
constexpr int64_t kMaxResizeAxis = int64_t{1} << 24;

struct ResizeAttrs {
  std::string mode = "nearest";
  std::string coord = "half_pixel";
  std::string nearest = "round_prefer_floor";  // "simple": opset < 11
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
};

// One axis: output size, scale, and (tf_crop_and_resize) roi.
struct AxisSpec {
  int64_t in = 0, out = 0;
  double scale = 1;
  double roi_lo = 0, roi_hi = 1;
};

// Source coordinate of output index x; false when tf_crop_and_resize
// falls outside the input.
bool SourceCoord(const ResizeAttrs& a, const AxisSpec& s, int64_t x, double* c) {
  double xd = static_cast<double>(x), in = static_cast<double>(s.in);
  double out_w = s.scale * in;  // the reference uses the unrounded width
  const std::string& m = a.coord;
  if (m == "align_corners") {
    *c = out_w == 1 ? 0.0 : xd * (in - 1) / (out_w - 1);
  } else if (m == "asymmetric") {
    *c = xd / s.scale;
  } else if (m == "tf_crop_and_resize") {
    *c = out_w == 1 ? (s.roi_hi - s.roi_lo) * (in - 1) / 2
                    : xd * (s.roi_hi - s.roi_lo) * (in - 1) / (out_w - 1);
    *c += s.roi_lo * (in - 1);
    return *c >= 0 && *c <= in - 1;
  } else if (m == "pytorch_half_pixel") {
    *c = out_w == 1 ? -0.5 : (xd + 0.5) / s.scale - 0.5;
  } else if (m == "tf_half_pixel_for_nn") {
    *c = (xd + 0.5) / s.scale;
  } else {  // half_pixel
    *c = (xd + 0.5) / s.scale - 0.5;
  }
  return true;
}

int64_t NearestIndex(const ResizeAttrs& a, const AxisSpec& s, double c) {
  double f = std::floor(c);
  if (c == f) return static_cast<int64_t>(c);
  double r = c - f;
  const std::string& m = a.nearest;
  if (m == "simple") return static_cast<int64_t>(s.scale < 1 ? std::ceil(c) : f);
  if (m == "floor") return static_cast<int64_t>(f);
  if (m == "ceil") return static_cast<int64_t>(f) + 1;
  if (m == "round_prefer_ceil") return static_cast<int64_t>(r < 0.5 ? f : f + 1);
  return static_cast<int64_t>(r <= 0.5 ? f : f + 1);  // round_prefer_floor
}

// Interpolation coefficients for the neighbours base-(n/2-1) .. base+n/2.
std::vector<double> Coeffs(const ResizeAttrs& a, double r) {
  if (a.mode == "linear") return {1 - r, r};
  double A = a.cubic_a;
  auto far = [&](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };
  auto near = [&](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };
  return {far(r + 1), near(r), near(1 - r), far(2 - r)};
}

Tensor Iota1(const OpContext& ctx, const std::vector<int64_t>& v) {
  return HostTensor::Vector(v).ToTensor(ctx.engine(), ctx.device()).Reshape(
      {static_cast<int64_t>(v.size())});
}

// Resizes one axis of x.
absl::StatusOr<Tensor> ResizeAxis(const OpContext& ctx, const Tensor& x, int64_t axis,
                                  const ResizeAttrs& a, const AxisSpec& s) {
  int64_t rank = x.ndim();
  std::vector<bool> outside(s.out, false);
  bool any_outside = false;
  Tensor r;
  if (a.mode == "nearest") {
    std::vector<int64_t> idx(s.out);
    bool identity = s.out == s.in;
    for (int64_t o = 0; o < s.out; ++o) {
      double c;
      outside[o] = !SourceCoord(a, s, o, &c);
      any_outside |= outside[o];
      idx[o] = std::clamp<int64_t>(NearestIndex(a, s, c), 0, s.in - 1);
      identity &= idx[o] == o;
    }
    if (identity && !any_outside) return x;
    int64_t k = s.in > 0 ? s.out / s.in : 0;
    bool repeat = k > 0 && s.out == k * s.in;
    for (int64_t o = 0; repeat && o < s.out; ++o) repeat = idx[o] == o / k;
    if (repeat) {  // integer upsampling: zero-copy expand
      Shape big = x.shape();
      big.insert(big.begin() + axis + 1, k);
      Shape out = x.shape();
      out[axis] = s.out;
      r = x.Unsqueeze(axis + 1).Expand(big).Reshape(out);
    } else {
      r = x.IndexSelect(axis, Iota1(ctx, idx));
    }
  } else {
    // Each output mixes n neighbours (2 linear, 4 cubic): n indexed loads,
    // each scaled by its per-output coefficient -- O(output x n).
    const int64_t n = a.mode == "linear" ? 2 : 4;
    if (s.out > kMaxResizeAxis / n)
      return Unsupported(absl::StrCat("output of ", s.out, " along one axis is too large (more than ",
                                      kMaxResizeAxis / n, " for ", a.mode, ")"));
    std::vector<std::vector<int64_t>> idx(n, std::vector<int64_t>(s.out));
    std::vector<std::vector<double>> coef(n, std::vector<double>(s.out));
    bool identity = s.out == s.in;
    for (int64_t o = 0; o < s.out; ++o) {
      double c;
      outside[o] = !SourceCoord(a, s, o, &c);
      any_outside |= outside[o];
      double f = std::floor(c);
      int64_t base = static_cast<int64_t>(f);
      double ratio = c - f;
      if (ratio == 0) base -= 1, ratio = 1;
      std::vector<double> co = Coeffs(a, ratio);
      int64_t first = base - (n / 2 - 1);
      if (a.exclude_outside) {
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          if (first + j < 0 || first + j >= s.in) co[j] = 0;
          sum += co[j];
        }
        for (double& v : co) v = sum != 0 ? v / sum : 0;
      }
      for (int64_t j = 0; j < n; ++j) {
        idx[j][o] = std::clamp<int64_t>(first + j, 0, s.in - 1);
        coef[j][o] = co[j];
        identity &= co[j] == 0 || (co[j] == 1 && idx[j][o] == o);
      }
    }
    if (identity && !any_outside) return x;
    Shape cs(rank, 1);
    cs[axis] = s.out;
    for (int64_t j = 0; j < n; ++j) {
      HostTensor ch = HostTensor::FromDoubles(coef[j], cs, x.dtype());
      Tensor ct = Tensor::FromData(ctx.engine(), ch.data.data(), ch.data.size(), cs, x.dtype(),
                                   ctx.device());
      Tensor term = x.IndexSelect(axis, Iota1(ctx, idx[j])) * ct;
      r = j == 0 ? term : r + term;
    }
  }
  if (any_outside) {
    std::vector<int64_t> mask(outside.begin(), outside.end());
    Shape ms(rank, 1);
    ms[axis] = s.out;
    Tensor m = Iota1(ctx, mask).Reshape(ms).Cast(dtypes::kBool);
    r = Tensor::Where(m, r.Scalar(a.extrapolation), r);
  }
  return r;
}

absl::Status ResizeOp(OpContext& ctx, bool upsample) {
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  int64_t rank = x.ndim();
  ResizeAttrs a;
  a.mode = ctx.Str("mode", "nearest");
  if (a.mode == "bilinear" || a.mode == "trilinear") a.mode = "linear";
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic")
    return Invalid(absl::StrCat("unknown mode '", a.mode, "'"));
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  bool legacy = upsample || ctx.opset() < 11;
  if (legacy) {
    a.coord = "asymmetric";
    a.nearest = "simple";
    if (upsample && ctx.opset() < 9) {
      RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
      for (float f : ctx.Floats("scales")) scales.push_back(f);
    } else {
      RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
      ASSIGN_OR_RETURN(scales, ctx.StaticDoubles(1));
    }
  } else {
    RETURN_IF_ERROR(ctx.CheckInputs(1, 4));
    a.coord = ctx.Str("coordinate_transformation_mode", "half_pixel");
    a.nearest = ctx.Str("nearest_mode", "round_prefer_floor");
    a.cubic_a = ctx.Float("cubic_coeff_a", -0.75f);
    a.exclude_outside = ctx.Int("exclude_outside", 0) != 0;
    a.extrapolation = ctx.Float("extrapolation_value", 0.0f);
    if (ctx.Int("antialias", 0) != 0) return Unsupported("antialias is not supported");
    if (ctx.HasAttr("axes")) return Unsupported("the axes attribute is not supported");
    if (ctx.Str("keep_aspect_ratio_policy", "stretch") != "stretch")
      return Unsupported("keep_aspect_ratio_policy other than 'stretch' is not supported");
    if (ctx.Has(1)) {
      ASSIGN_OR_RETURN(roi, ctx.StaticDoubles(1));
    }
    if (ctx.Has(2)) {
      ASSIGN_OR_RETURN(scales, ctx.StaticDoubles(2));
    }
    if (ctx.Has(3)) {
      ASSIGN_OR_RETURN(sizes, ctx.StaticInts(3));
    }
  }
  if (!sizes.empty()) {
    if (static_cast<int64_t>(sizes.size()) != rank) return Invalid("sizes must have one value per axis");
  } else if (static_cast<int64_t>(scales.size()) != rank) {
    return Invalid("scales (or sizes) must have one value per axis");
  }
  if (a.coord == "tf_crop_and_resize" && static_cast<int64_t>(roi.size()) != 2 * rank)
    return Invalid("tf_crop_and_resize needs roi with 2 values per axis");
  Tensor r = x;
  DType t = x.dtype();
  bool interp = a.mode != "nearest";
  if (interp && t != dtypes::kFloat64) r = r.Cast(dtypes::kFloat32);
  for (int64_t axis = rank - 1; axis >= 0; --axis) {
    AxisSpec s;
    s.in = x.dim(static_cast<int>(axis));
    if (!sizes.empty()) {
      s.out = sizes[axis];
      s.scale = s.in > 0 ? static_cast<double>(s.out) / static_cast<double>(s.in) : 1;
    } else {
      s.scale = scales[axis];
      if (!(s.scale > 0) || !std::isfinite(s.scale))
        return Invalid("scales must be positive and finite");
      double out = std::floor(s.scale * static_cast<double>(s.in));
      s.out = out > static_cast<double>(kMaxResizeAxis) ? kMaxResizeAxis + 1
                                                         : static_cast<int64_t>(out);
    }
    if (s.out < 0 || (s.in == 0 && s.out != 0))
      return Invalid(absl::StrCat("bad output size ", s.out, " along axis ", axis));
    if (s.out > kMaxResizeAxis)
      return absl::ResourceExhaustedError(absl::StrCat(
          "the output size along axis ", axis, " is too large (more than ", kMaxResizeAxis, ")"));
    if (!roi.empty() && static_cast<int64_t>(roi.size()) == 2 * rank) {
      s.roi_lo = roi[axis];
      s.roi_hi = roi[axis + rank];
    }
    if (s.out == 0) {
      Shape z = r.shape();
      z[axis] = 0;
      r = Tensor::Zeros(ctx.engine(), z, r.dtype(), ctx.device());
      continue;
    }
    ASSIGN_OR_RETURN(r, ResizeAxis(ctx, r, axis, a, s));
  }
  ctx.Set(0, r.Cast(t));
  return absl::OkStatus();
}

}  // namespace

void RegisterResizeOps(OpRegistry* r) {
  r->Register("Resize", [](OpContext& ctx) { return ResizeOp(ctx, false); });
  r->Register("Upsample", [](OpContext& ctx) { return ResizeOp(ctx, true); });
}

}  // namespace kiln

// Signal processing: DFT and STFT (as matrix products with cos / sin
// tables built on the host), window functions and MelWeightMatrix.
#include <cmath>

#include "engine/onnx/ops_common.h"
#include "engine/onnx/tensor_proto.h"

namespace kiln {
namespace {

constexpr double kPi = 3.14159265358979323846;

absl::StatusOr<DType> OutputType(const OpContext& ctx) {
  std::optional<DType> t = DTypeFromOnnx(static_cast<int>(ctx.Int("output_datatype", 1)));
  if (!t) return Unsupported("unsupported output_datatype");
  return *t;
}

absl::StatusOr<int64_t> ScalarInt(const OpContext& ctx, int i) {
  ASSIGN_OR_RETURN(HostTensor h, ctx.Static(i));
  if (h.numel() != 1) return Invalid(absl::StrCat("input ", i, " must be a scalar"));
  return h.GetInt(0);
}

// Generalized cosine window: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N).
absl::Status WindowOp(OpContext& ctx, double a0, double a1, double a2) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(int64_t size, ScalarInt(ctx, 0));
  ASSIGN_OR_RETURN(DType t, OutputType(ctx));
  if (size < 0 || size > (int64_t{1} << 24)) return Invalid("bad window size");
  double n_den = ctx.Int("periodic", 1) ? static_cast<double>(size) : static_cast<double>(size - 1);
  std::vector<double> w(size);
  for (int64_t n = 0; n < size; ++n) {
    double x = 2 * kPi * static_cast<double>(n) / n_den;
    w[n] = a0 - a1 * std::cos(x) + a2 * std::cos(2 * x);
  }
  ctx.SetHost(0, HostTensor::FromDoubles(w, {size}, t));
  return absl::OkStatus();
}

absl::Status MelWeightMatrixOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(5, 5));
  ASSIGN_OR_RETURN(int64_t bins, ScalarInt(ctx, 0));
  ASSIGN_OR_RETURN(int64_t dft_length, ScalarInt(ctx, 1));
  ASSIGN_OR_RETURN(int64_t rate, ScalarInt(ctx, 2));
  ASSIGN_OR_RETURN(std::vector<double> lo, ctx.StaticDoubles(3));
  ASSIGN_OR_RETURN(std::vector<double> hi, ctx.StaticDoubles(4));
  ASSIGN_OR_RETURN(DType t, OutputType(ctx));
  if (bins <= 0 || dft_length <= 0 || rate <= 0 || lo.size() != 1 || hi.size() != 1 ||
      bins > (1 << 16) || dft_length > (1 << 24))
    return Invalid("bad MelWeightMatrix arguments");
  int64_t spec_bins = dft_length / 2 + 1;
  RETURN_IF_ERROR(
      CheckedNumel({spec_bins, bins}, kMaxHostElements, "the MelWeightMatrix").status());
  auto mel = [](double f) { return 2595 * std::log10(1 + f / 700); };
  double lo_mel = mel(lo[0]), hi_mel = mel(hi[0]);
  double step = (hi_mel - lo_mel) / static_cast<double>(bins + 2);
  std::vector<int64_t> edge(bins + 2);
  for (int64_t i = 0; i < bins + 2; ++i) {
    double hz = 700 * (std::pow(10, (static_cast<double>(i) * step + lo_mel) / 2595) - 1);
    edge[i] = static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz /
                                              static_cast<double>(rate)));
  }
  std::vector<double> out(spec_bins * bins, 0.0);
  auto at = [&](int64_t j, int64_t i) -> double* {
    return j >= 0 && j < spec_bins ? &out[j * bins + i] : nullptr;
  };
  for (int64_t i = 0; i < bins; ++i) {
    int64_t left = edge[i], center = edge[i + 1], right = edge[i + 2];
    if (center == left) {
      if (double* p = at(center, i)) *p = 1;
    } else {
      for (int64_t j = left; j <= center; ++j)
        if (double* p = at(j, i))
          *p = static_cast<double>(j - left) / static_cast<double>(center - left);
    }
    for (int64_t j = center; j < right; ++j)
      if (double* p = at(j, i))
        *p = static_cast<double>(right - j) / static_cast<double>(right - center);
  }
  ctx.SetValue(0, OnnxValue::FromHost(HostTensor::FromDoubles(out, {spec_bins, bins}, t)));
  return absl::OkStatus();
}

// DFT of the last axis of (re, im) (im may be null): length-n signals,
// `bins` output frequencies.
std::pair<Tensor, Tensor> Dft(const OpContext& ctx, const Tensor& re, const Tensor* im, int64_t n,
                              int64_t bins, bool inverse) {
  std::vector<double> c(n * bins), s(n * bins);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < bins; ++k) {
      double a = 2 * kPi * static_cast<double>((i * k) % n) / static_cast<double>(n);
      c[i * bins + k] = std::cos(a);
      s[i * bins + k] = std::sin(a);
    }
  DType t = re.dtype();
  auto up = [&](const std::vector<double>& v) {
    HostTensor h = HostTensor::FromDoubles(v, {n, bins}, t);
    return Tensor::FromData(ctx.engine(), h.data.data(), h.data.size(), {n, bins}, t,
                            ctx.device());
  };
  Tensor cm = up(c), sm = up(s);
  Tensor out_re, out_im;
  if (!inverse) {
    out_re = re.Matmul(cm);
    out_im = -re.Matmul(sm);
    if (im) out_re = out_re + im->Matmul(sm), out_im = out_im + im->Matmul(cm);
  } else {
    out_re = re.Matmul(cm);
    out_im = re.Matmul(sm);
    if (im) out_re = out_re - im->Matmul(sm), out_im = out_im + im->Matmul(cm);
    out_re = out_re / static_cast<double>(n);
    out_im = out_im / static_cast<double>(n);
  }
  return {out_re, out_im};
}

absl::Status DftOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  if (x.ndim() < 3 || (x.dim(-1) != 1 && x.dim(-1) != 2))
    return Invalid("input must be (batch, signal..., 1 or 2)");
  int64_t axis = ctx.Int("axis", 1);
  if (axis < 0) axis += x.ndim();
  if (axis < 1 || axis >= x.ndim() - 1) return Invalid("axis must be a signal axis");
  bool inverse = ctx.Int("inverse", 0) != 0, onesided = ctx.Int("onesided", 0) != 0;
  int64_t len = x.dim(static_cast<int>(axis)), n = len;
  if (ctx.Has(1)) {
    ASSIGN_OR_RETURN(n, ScalarInt(ctx, 1));
    if (n <= 0) return Invalid("dft_length must be positive");
  }
  bool complex = x.dim(-1) == 2;
  // Signal axis last, the complex axis dropped.
  auto part = [&](int64_t j) {
    std::vector<Tensor::Slice> sl(x.ndim());
    sl[x.ndim() - 1] = Tensor::Slice{j, j + 1, 1};
    Tensor p = x.Slices(sl).Squeeze({x.ndim() - 1}).Transpose(axis, -1);
    Pads pads(p.ndim(), {0, 0});
    pads.back() = {0, n - len};  // zero-pads or truncates
    return p.Pad(pads);
  };
  Tensor re = part(0);
  std::optional<Tensor> im;
  if (complex) im = part(1);
  int64_t bins = onesided ? n / 2 + 1 : n;
  RETURN_IF_ERROR(CheckedNumel({n, bins}, kMaxHostElements, "the DFT tables").status());
  auto [yr, yi] = Dft(ctx, re, im ? &*im : nullptr, n, bins, inverse);
  Tensor y = Tensor::Stack({yr.Transpose(axis, -1), yi.Transpose(axis, -1)}, -1);
  ctx.Set(0, y);
  return absl::OkStatus();
}

absl::Status StftOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 4));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  if (x.ndim() != 3 || (x.dim(-1) != 1 && x.dim(-1) != 2))
    return Invalid("signal must be (batch, length, 1 or 2)");
  ASSIGN_OR_RETURN(int64_t step, ScalarInt(ctx, 1));
  std::optional<Tensor> window;
  int64_t frame = -1;
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(window, ctx.In(2));
    frame = window->numel();
  }
  if (ctx.Has(3)) {
    ASSIGN_OR_RETURN(frame, ScalarInt(ctx, 3));
  }
  if (frame <= 0 || step <= 0 || frame > x.dim(1))
    return Invalid("frame_length / frame_step do not fit the signal");
  if (window && window->numel() != frame) return Invalid("window length != frame_length");
  bool onesided = ctx.Int("onesided", 1) != 0;
  auto frames = [&](int64_t j) {
    Tensor p = x.Slices({{}, {}, Tensor::Slice{j, j + 1, 1}}).Reshape({x.dim(0), x.dim(1)});
    Tensor f = p.Pool({frame}, {step}, {1}, {{0, 0}});  // (batch, frames, frame)
    return window ? f * window->Cast(f.dtype()) : f;
  };
  Tensor re = frames(0);
  std::optional<Tensor> im;
  if (x.dim(-1) == 2) im = frames(1);
  int64_t bins = onesided ? frame / 2 + 1 : frame;
  RETURN_IF_ERROR(CheckedNumel({frame, bins}, kMaxHostElements, "the STFT tables").status());
  auto [yr, yi] = Dft(ctx, re, im ? &*im : nullptr, frame, bins, false);
  ctx.Set(0, Tensor::Stack({yr, yi}, -1));
  return absl::OkStatus();
}

}  // namespace

void RegisterSignalOps(OpRegistry* r) {
  r->Register("HannWindow", [](OpContext& ctx) { return WindowOp(ctx, 0.5, 0.5, 0); });
  r->Register("HammingWindow",
              [](OpContext& ctx) { return WindowOp(ctx, 25.0 / 46, 21.0 / 46, 0); });
  r->Register("BlackmanWindow", [](OpContext& ctx) { return WindowOp(ctx, 0.42, 0.5, 0.08); });
  r->Register("MelWeightMatrix", MelWeightMatrixOp);
  r->Register("DFT", DftOp);
  r->Register("STFT", StftOp);
}

}  // namespace kiln

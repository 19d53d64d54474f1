// Linear algebra, convolution and pooling: MatMul, Gemm, Conv,
// ConvTranspose, MaxPool, AveragePool, LpPool, Global*Pool.
#include <cmath>
#include <optional>

#include "engine/onnx/channel_blocks.h"
#include "engine/onnx/derived_weights.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/ops_common.h"

namespace kiln {
namespace {

// The model's derived weights where the node's weight (input `input`) may
// be derived from: on the CPU (the only device the derived layouts were
// measured on) and when it is the model's own constant. Null otherwise.
DerivedWeights* CpuDerivedWeights(OpContext& ctx, int input = 1) {
  DerivedWeights* derived = ctx.builder()->derived();
  if (derived == nullptr || ctx.device() != "CPU" ||
      !derived->IsConstant(ctx.node().input(input), &ctx.Raw(input)))
    return nullptr;
  return derived;
}

}  // namespace

std::optional<Tensor> WeightPanels(OpContext& ctx, int64_t m, const Tensor& b, bool transposed,
                                   const std::string& part, int input) {
  DerivedWeights* derived = CpuDerivedWeights(ctx, input);
  if (derived == nullptr || b.ndim() != 2 || b.dtype() != dtypes::kFloat32) return std::nullopt;
  const int64_t k = b.shape()[transposed ? 1 : 0], n = b.shape()[transposed ? 0 : 1];
  if (k >= kMatmulSplitKMin || !Tensor::PanelsPay(m, k, n, transposed)) return std::nullopt;
  absl::StatusOr<Tensor> p = derived->Get(
      ctx.node().input(input),
      absl::StrCat(part, transposed ? "/panels_t/" : "/panels/", Tensor::kPanel),
      [&] { return b.PanelWeights(Tensor::kPanel, transposed); });
  if (!p.ok()) return std::nullopt;
  return *p;
}

std::optional<Tensor> PanelMatmul(OpContext& ctx, const Tensor& a, const Tensor& b,
                                  bool transposed, const std::string& part) {
  if (a.ndim() < 1 || b.ndim() != 2 || a.dtype() != dtypes::kFloat32) return std::nullopt;
  const int64_t k = b.shape()[transposed ? 1 : 0], n = b.shape()[transposed ? 0 : 1];
  if (a.shape().back() != k) return std::nullopt;
  std::optional<Tensor> p = WeightPanels(ctx, a.numel() / k, b, transposed, part);
  if (!p) return std::nullopt;
  return a.MatmulPanels(*p, n);
}

namespace {

absl::Status MatMulOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  ASSIGN_OR_RETURN(Tensor a, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor b, ctx.In(1));
  DType t = a.dtype();
  bool half = t == dtypes::kFloat16 || t == dtypes::kBFloat16;
  if (half) {
    a = a.Cast(dtypes::kFloat32);
    b = b.Cast(dtypes::kFloat32);
  }
  std::optional<Tensor> panels = PanelMatmul(ctx, a, b, false);
  // Q K^T: on the CPU, K^T copied into rows first (measured there only).
  if (!panels && ctx.device() == "CPU" && a.ndim() >= 2 &&
      Tensor::TransposedCopyPays(a.shape()[a.ndim() - 2], b))
    b = b.Contiguous();
  Tensor y = panels ? *panels : a.Matmul(b);
  ctx.Set(0, half ? y.Cast(t) : y);
  return absl::OkStatus();
}

absl::Status GemmOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 3));
  ASSIGN_OR_RETURN(Tensor a, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor b, ctx.In(1));
  if (a.ndim() != 2 || b.ndim() != 2) return Invalid("A and B must be 2-D");
  (void)ctx.Int("broadcast", 1);  // opset < 7: C broadcasts either way
  if (ctx.Int("transA", 0)) a = a.Transpose();
  const bool trans_b = ctx.Int("transB", 0) != 0;
  std::optional<Tensor> panels = PanelMatmul(ctx, a, b, trans_b);
  if (trans_b) b = b.Transpose();
  double alpha = ctx.Float("alpha", 1.0f), beta = ctx.Float("beta", 1.0f);
  Tensor y = panels ? *panels : a.Matmul(b);
  if (alpha != 1.0) y = y * alpha;
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(Tensor c, ctx.In(2));
    if (beta != 1.0) c = c * beta;
    y = y + c.Cast(y.dtype());
  }
  ctx.Set(0, y);
  return absl::OkStatus();
}

// Per-spatial-dim convolution / pooling geometry from the attributes.
struct Geometry {
  std::vector<int64_t> kernel, stride, dilation;
  Pads pads;
};

// Resolves auto_pad / pads for an input of spatial shape `in`.
absl::StatusOr<Geometry> GetGeometry(const OpContext& ctx, const Shape& in,
                                     std::vector<int64_t> kernel) {
  size_t nd = in.size();
  Geometry g;
  g.kernel = std::move(kernel);
  g.stride = ctx.Ints("strides");
  g.dilation = ctx.Ints("dilations");
  if (g.stride.empty()) g.stride.assign(nd, 1);
  if (g.dilation.empty()) g.dilation.assign(nd, 1);
  if (g.kernel.size() != nd || g.stride.size() != nd || g.dilation.size() != nd)
    return Invalid("kernel_shape / strides / dilations do not match the spatial rank");
  for (size_t i = 0; i < nd; ++i) {
    int64_t span;
    if (g.kernel[i] < 1 || g.stride[i] < 1 || g.dilation[i] < 1)
      return Invalid(absl::StrCat("kernel_shape, strides and dilations must be positive (axis ",
                                  i, ": ", g.kernel[i], ", ", g.stride[i], ", ", g.dilation[i],
                                  ")"));
    if (__builtin_mul_overflow(g.kernel[i] - 1, g.dilation[i], &span) ||
        span > kMaxTensorShapeElements || g.stride[i] > kMaxTensorShapeElements)
      return absl::ResourceExhaustedError(
          absl::StrCat("the window along axis ", i, " is too large"));
  }
  std::string auto_pad = ctx.Str("auto_pad", "NOTSET");
  std::vector<int64_t> pads = ctx.Ints("pads");
  if (auto_pad == "NOTSET" || auto_pad.empty()) {
    if (pads.empty()) pads.assign(2 * nd, 0);
    if (pads.size() != 2 * nd) return Invalid("pads must have 2 values per spatial dim");
    for (int64_t p : pads)
      if (p > kMaxTensorShapeElements || p < -kMaxTensorShapeElements)
        return absl::ResourceExhaustedError(absl::StrCat("pads of ", p, " are too large"));
    for (size_t i = 0; i < nd; ++i) g.pads.push_back({pads[i], pads[i + nd]});
  } else if (auto_pad == "VALID") {
    g.pads.assign(nd, {0, 0});
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < nd; ++i) {
      int64_t out = (in[i] + g.stride[i] - 1) / g.stride[i];
      int64_t span = (g.kernel[i] - 1) * g.dilation[i] + 1;
      int64_t total = std::max<int64_t>((out - 1) * g.stride[i] + span - in[i], 0);
      int64_t small = total / 2, big = total - small;
      g.pads.push_back(auto_pad == "SAME_UPPER" ? std::make_pair(small, big)
                                                : std::make_pair(big, small));
    }
  } else {
    return Invalid(absl::StrCat("unknown auto_pad '", auto_pad, "'"));
  }
  return g;
}

Shape Spatial(const Tensor& x) { return Shape(x.shape().begin() + 2, x.shape().end()); }

// A 3x3 convolution as Winograd F(2 x 2, 3 x 3) (tensor_winograd.cc) where
// Tensor::WinogradPays says so, on the CPU (the only device it was
// measured on), when the weight is the model's own constant: its transform
// is then computed once (DerivedWeights) instead of in every run. Nothing
// otherwise, or when the transform fails: the caller convolves directly.
std::optional<Tensor> WinogradConv(OpContext& ctx, const Tensor& x, const Tensor& w,
                                   const Tensor* bias, const Tensor::ConvOptions& o) {
  DerivedWeights* derived = CpuDerivedWeights(ctx);
  if (derived == nullptr) return std::nullopt;
  if (!Tensor::WinogradPays(x.shape(), w.shape(), o)) return std::nullopt;
  absl::StatusOr<Tensor> u =
      derived->Get(ctx.node().input(1), absl::StrCat("/winograd/", w.dtype().Name()),
                   [&] { return w.WinogradWeights(); });
  if (!u.ok()) return std::nullopt;
  Tensor y = x.ConvWinograd(*u, o.padding);
  if (!bias) return y;
  return y + bias->Cast(y.dtype()).Reshape({1, bias->numel(), 1, 1});
}

// Conv of `x` by the model constant `w` laid out once on the CPU
// (DerivedWeights, under `tag`) as w.Permute(order), contiguous, and read
// through the inverse view in the usual (Cout, Cin, *k) order. nullopt when
// the layout cannot be derived (the caller convolves plainly).
std::optional<Tensor> ConvOfLaidOutWeight(OpContext& ctx, const Tensor& x, const Tensor& w,
                                          const Tensor* bias, const Tensor::ConvOptions& o,
                                          const std::vector<int64_t>& order,
                                          const std::string& tag) {
  DerivedWeights* derived = CpuDerivedWeights(ctx);
  if (derived == nullptr) return std::nullopt;
  std::vector<int64_t> back(order.size());
  for (size_t i = 0; i < order.size(); ++i) back[order[i]] = static_cast<int64_t>(i);
  absl::StatusOr<Tensor> laid_out =
      derived->Get(ctx.node().input(1), absl::StrCat("/", tag, "/", w.dtype().Name()),
                   [&] { return w.Permute(order).Contiguous(); });
  if (!laid_out.ok()) return std::nullopt;
  return x.Conv(laid_out->Permute(back), bias, o);
}

// A convolution most of whose tap products read padding (a dilated one on a
// small map: Tensor::PaddingTapFraction), on the CPU, when the weight is the
// model's own constant: the weight is laid out once (DerivedWeights) with
// the taps outermost, (*k, Cout, Cin), and passed to Conv as a view in the
// usual order. Conv then keeps a subset of the taps (the live ones, or each
// region's), and reads each kept tap's weights with Cin contiguous, where in
// the model's layout the subset's loads stride over the other taps, a cache
// line per one or two floats (DeepLabV3's 960 -> 256 convolutions left with
// their centre tap ran at 82 GFLOP/s, a plain 1x1 one at 178).
std::optional<Tensor> TapsOutermostConv(OpContext& ctx, const Tensor& x, const Tensor& w,
                                        const Tensor* bias, const Tensor::ConvOptions& o) {
  if (CpuDerivedWeights(ctx) == nullptr || w.ndim() < 3 ||
      Tensor::PaddingTapFraction(x.shape(), w.shape(), o) < 0.5)
    return std::nullopt;
  std::vector<int64_t> order;  // (*k, Cout, Cin)
  for (int64_t i = 2; i < w.ndim(); ++i) order.push_back(i);
  order.push_back(0);
  order.push_back(1);
  return ConvOfLaidOutWeight(ctx, x, w, bias, o, order, "taps_outermost");
}

// A stride-2 convolution over a few input channels (an image stem: 7x7
// over RGB), on the CPU, when the weight is the model's own
// constant: the weight is laid out once (DerivedWeights) with the output
// channels innermost, (Cin, *k, Cout), and passed to Conv as a view in the
// usual order. Each tap's weights for consecutive output channels are then
// one vector, and the CPU codegen puts the output channels in the lanes
// (kernel_cpu.cc step 1) with the input broadcast, where vectors along the
// output row read their stride-2 input as two loads and a shuffle per tap.
// Only stride 2 (the windows the codegen reads with shuffles; a patchify
// convolution, stride = kernel, is a matmul and keeps its layout: ViT's
// 32x32 one ran 0.71 -> 1.09 ms with the weights laid out this way) and
// 64+ products per output (the codegen's kMinReduce: each output vector is
// stored lane by lane).
std::optional<Tensor> ChannelsInnermostConv(OpContext& ctx, const Tensor& x, const Tensor& w,
                                            const Tensor* bias, const Tensor::ConvOptions& o) {
  constexpr int64_t kMaxChannels = 4, kMinProducts = 64;
  if (w.ndim() < 3 || o.groups != 1 || w.shape()[1] > kMaxChannels ||
      o.stride.size() + 2 != static_cast<size_t>(w.ndim()))
    return std::nullopt;
  int64_t products = w.shape()[1];
  for (size_t i = 0; i < o.stride.size(); ++i) {
    if (o.stride[i] != 2 || (!o.dilation.empty() && o.dilation[i] != 1)) return std::nullopt;
    products *= w.shape()[2 + i];
  }
  if (products < kMinProducts) return std::nullopt;
  std::vector<int64_t> order = {1};  // (Cin, *k, Cout)
  for (int64_t i = 2; i < w.ndim(); ++i) order.push_back(i);
  order.push_back(0);
  return ConvOfLaidOutWeight(ctx, x, w, bias, o, order, "channels_innermost");
}

// A 2-D convolution by the model's constant float32 weight, on the CPU, in
// channel blocks (channel_blocks.h): a 1x1, depthwise or dense one (direct
// or Winograd) when its input is blocked already; a 1x1 one when a chain
// starts here (the rule below), its input then copied into blocks; an image
// stem whose readers keep the blocks. The weight is laid out once
// (DerivedWeights). The output value is blocked.
std::optional<OnnxValue> ChannelBlockedConv(OpContext& ctx, const Tensor& x, const Tensor& w,
                                            const Tensor* bias, const Tensor::ConvOptions& o) {
  constexpr int64_t kB = Tensor::kChannelBlock;
  DerivedWeights* derived = CpuDerivedWeights(ctx);
  if (derived == nullptr || x.ndim() != 4 || w.ndim() != 4 || x.dtype() != dtypes::kFloat32 ||
      w.dtype() != dtypes::kFloat32)
    return std::nullopt;
  const int64_t cin = x.shape()[1], cout = w.shape()[0];
  const bool pointwise = o.groups == 1 && w.shape()[1] == cin && w.shape()[2] == 1 &&
                         w.shape()[3] == 1 && o.padding == Pads(2, {0, 0}) &&
                         o.stride[0] == o.stride[1];
  const bool depthwise = o.groups == cin && cout == cin && w.shape()[1] == 1;
  const bool dense = o.groups == 1 && w.shape()[1] == cin && !pointwise;
  const std::optional<Tensor>& in = ctx.Raw(0).blocked;
  const Scope* scope = ctx.builder()->current_scope();
  auto continues = [&] {
    return scope != nullptr && ChainContinues(ctx.node().output(0), *scope, cout);
  };
  // An image stem (a few input channels, any window) whose readers keep the
  // blocks writes its output in blocks straight away: the input broadcast,
  // 16 output channels per vector, no copy into blocks after it.
  constexpr int64_t kStemChannels = 4;
  const bool stem = !in && !pointwise && !depthwise && o.groups == 1 && cin <= kStemChannels &&
                    w.shape()[1] == cin;
  if (stem && !continues()) return std::nullopt;
  // A dense convolution of a blocked input (3x3, strided, 1x7, ...)
  // continues the chain, as Winograd where that pays; not when most of its
  // taps read padding (DeepLabV3's dilations of 12-36 on a 40 x 40 map,
  // 3x slower in blocks): Conv drops those taps.
  const bool dense_in = in && dense && Tensor::PaddingTapFraction(x.shape(), w.shape(), o) < 0.5;
  const bool winograd = dense_in && Tensor::WinogradPays(x.shape(), w.shape(), o);
  if (!stem && !(pointwise || depthwise || dense_in)) return std::nullopt;
  if (!stem && !in) {
    // A chain starts at a 1x1 convolution when copying its input into
    // blocks pays: on a map whose NCHW kernel wastes lanes, the convolution
    // alone pays for both copies (its input and its output: 128+ products
    // per copied element; 192 <-> 1152 channels gained 10% so, 96 <-> 576
    // lost to its copies), or its readers keep the blocks (no copy out) and
    // it has 128+ products per copied input element; on any map, its
    // readers keep the blocks and it expands the channels (the copied input
    // is at most its output: MobileNet's expansions feeding depthwise
    // ones). (DenseNet-121's 1x1 convolutions, read by a BatchNormalization
    // and each copying its whole concatenated input, made the model 1.55x
    // slower when they started chains.)
    if (!pointwise || !BlockablePointwise(x.shape(), w.shape(), o)) return std::nullopt;
    const bool chain = continues();
    const bool small = WastesLanes(x.shape());
    if (!(small && (cin * cout >= 128 * (cin + cout) || (chain && cout >= 128))) &&
        !(chain && cout >= cin))
      return std::nullopt;
  }
  // Channels padded to whole blocks may not inflate the weight past 4x (a
  // few channels: the lanes would mostly multiply zeros, and a hostile
  // model's (1, 1, k, k) weight would grow 256x).
  const auto round_up = [](int64_t c) { return (c + kB - 1) / kB * kB; };
  const double laid_out = static_cast<double>(round_up(cout)) *
                          static_cast<double>(depthwise || stem ? w.shape()[1] : round_up(cin)) *
                          static_cast<double>(w.shape()[2] * w.shape()[3]);
  if (laid_out > 4.0 * static_cast<double>(std::max<int64_t>(w.numel(), 1))) return std::nullopt;
  const char* layout = stem              ? "/stem_blocked/"
                       : winograd        ? "/winograd_blocked/"
                       : dense           ? "/dense_blocked/"
                                         : "/channel_blocked/";
  absl::StatusOr<Tensor> wb =
      derived->Get(ctx.node().input(1), absl::StrCat(layout, w.dtype().Name()), [&] {
        return stem       ? w.StemBlockedWeights()
               : winograd ? w.WinogradBlockedWeights()
               : dense    ? w.DenseBlockedWeights()
                          : w.ChannelBlockedWeights();
      });
  if (!wb.ok()) return std::nullopt;
  Tensor y;
  if (stem) {
    y = x.ConvIntoBlocks(*wb, o.stride, o.dilation, o.padding);
  } else if (winograd) {
    y = in->ConvWinogradBlocked(*wb, o.padding);
  } else if (dense) {
    y = in->ConvBlocked(*wb, o.stride, o.dilation, o.padding);
  } else {
    const Tensor xb = in ? *in : CopyIntoBlocks(x);
    y = pointwise ? xb.PointwiseBlocked(*wb, o.stride[0])
                  : xb.DepthwiseBlocked(*wb, o.stride, o.dilation, o.padding);
  }
  if (bias) y = y + PerChannelInBlocks(bias->Cast(y.dtype()), 0);  // 0 like the weights
  if (!y.ok()) return std::nullopt;
  return BlockedValue(y, cout);
}

absl::Status ConvOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 3));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor w, ctx.In(1));
  if (x.ndim() < 3 || w.ndim() != x.ndim()) return Invalid("input and weight ranks differ");
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  if (ctx.HasAttr("kernel_shape") && ctx.Ints("kernel_shape") != kernel)
    return Invalid("kernel_shape does not match the weight");
  ASSIGN_OR_RETURN(Geometry g, GetGeometry(ctx, Spatial(x), kernel));
  Tensor::ConvOptions o;
  o.stride = g.stride;
  o.dilation = g.dilation;
  o.padding = g.pads;
  o.groups = ctx.Int("group", 1);
  std::optional<Tensor> bias;
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(bias, ctx.In(2));
  }
  DType t = x.dtype();
  bool half = t == dtypes::kFloat16 || t == dtypes::kBFloat16;
  if (half) {
    x = x.Cast(dtypes::kFloat32);
    w = w.Cast(dtypes::kFloat32);
    if (bias) bias = bias->Cast(dtypes::kFloat32);
  }
  const Tensor* b = bias ? &*bias : nullptr;
  if (!half) {
    if (std::optional<OnnxValue> v = ChannelBlockedConv(ctx, x, w, b, o)) {
      ctx.SetValue(0, std::move(*v));
      return absl::OkStatus();
    }
  }
  std::optional<Tensor> y = WinogradConv(ctx, x, w, b, o);
  if (!y) y = TapsOutermostConv(ctx, x, w, b, o);
  if (!y) y = ChannelsInnermostConv(ctx, x, w, b, o);
  if (!y) y = x.Conv(w, b, o);
  ctx.Set(0, half ? y->Cast(t) : *y);
  return absl::OkStatus();
}

absl::Status ConvTransposeOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 3));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor w, ctx.In(1));
  if (x.ndim() < 3 || w.ndim() != x.ndim()) return Invalid("input and weight ranks differ");
  size_t nd = x.ndim() - 2;
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  if (ctx.HasAttr("kernel_shape") && ctx.Ints("kernel_shape") != kernel)
    return Invalid("kernel_shape does not match the weight");
  std::vector<int64_t> stride = ctx.Ints("strides"), dil = ctx.Ints("dilations");
  std::vector<int64_t> opad = ctx.Ints("output_padding"), out_shape = ctx.Ints("output_shape");
  std::vector<int64_t> pads = ctx.Ints("pads");
  if (stride.empty()) stride.assign(nd, 1);
  if (dil.empty()) dil.assign(nd, 1);
  if (opad.empty()) opad.assign(nd, 0);
  if (stride.size() != nd || dil.size() != nd || opad.size() != nd)
    return Invalid("strides / dilations / output_padding do not match the spatial rank");
  std::string auto_pad = ctx.Str("auto_pad", "NOTSET");
  Shape in = Spatial(x);
  Pads p(nd, {0, 0});
  if (out_shape.size() > nd) out_shape.erase(out_shape.begin(), out_shape.end() - nd);
  if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (!out_shape.empty() && out_shape.size() != nd)
      return Invalid("output_shape does not match the spatial rank");
    for (size_t i = 0; i < nd; ++i) {
      int64_t want = out_shape.empty() ? in[i] * stride[i] : out_shape[i];
      int64_t total = stride[i] * (in[i] - 1) + opad[i] + (kernel[i] - 1) * dil[i] + 1 - want;
      if (total < 0) {  // a larger output than the natural one: extra output padding
        opad[i] -= total;
        total = 0;
      }
      int64_t half = total / 2;
      p[i] = auto_pad == "SAME_LOWER" ? std::make_pair(total - half, half)
                                      : std::make_pair(half, total - half);
    }
  } else if (auto_pad == "NOTSET" || auto_pad.empty() || auto_pad == "VALID") {
    if (!pads.empty() && auto_pad != "VALID") {
      if (pads.size() != 2 * nd) return Invalid("pads must have 2 values per spatial dim");
      for (size_t i = 0; i < nd; ++i) p[i] = {pads[i], pads[i + nd]};
    }
  } else {
    return Invalid(absl::StrCat("unknown auto_pad '", auto_pad, "'"));
  }
  Tensor::ConvOptions o;
  o.stride = stride;
  o.dilation = dil;
  o.padding = p;
  o.groups = ctx.Int("group", 1);
  std::optional<Tensor> bias;
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(bias, ctx.In(2));
  }
  ctx.Set(0, x.ConvTranspose(w, bias ? &*bias : nullptr, o, opad));
  return absl::OkStatus();
}

enum class PoolKind { kMax, kAvg, kLp };

// The Indices output of MaxPool: flat indices (row-major, or column-major
// over the spatial dims with storage_order 1) of each window's first max.
absl::StatusOr<Tensor> MaxPoolIndices(const OpContext& ctx, const Tensor& x, const Geometry& g,
                                      bool col_major) {
  size_t nd = g.kernel.size();
  double lowest = x.dtype().IsFloat() ? -INFINITY : DTypeMin(x.dtype());
  Tensor win = x.Pool(g.kernel, g.stride, g.dilation, g.pads, lowest);  // (N, C, *out, *k)
  RETURN_IF_ERROR(win.status());
  Shape out(win.shape().begin(), win.shape().begin() + 2 + nd);
  Shape flat = out;
  flat.push_back(kiln::Prod(g.kernel));
  Tensor k = win.Reshape(flat).Argmax(-1);  // window-local index, (N, C, *out)
  int64_t rank = static_cast<int64_t>(out.size());
  auto iota = [&](int64_t n, int64_t axis) {
    Shape s(rank, 1);
    s[axis] = n;
    return Tensor::Arange(ctx.engine(), 0, static_cast<double>(n), 1, dtypes::kInt64, ctx.device())
        .Reshape(s);
  };
  // Position along each spatial dim, then the flat index.
  std::vector<Tensor> pos(nd);
  int64_t kstride = kiln::Prod(g.kernel);
  for (size_t i = 0; i < nd; ++i) {
    kstride /= g.kernel[i];
    Tensor ki = (k / static_cast<double>(kstride)).Mod(k.Scalar(static_cast<double>(g.kernel[i])));
    pos[i] = iota(out[2 + i], 2 + i) * static_cast<double>(g.stride[i]) -
             static_cast<double>(g.pads[i].first) + ki * static_cast<double>(g.dilation[i]);
  }
  Tensor idx = iota(x.dim(0), 0) * static_cast<double>(x.dim(1)) + iota(x.dim(1), 1);
  std::vector<size_t> order(nd);
  for (size_t i = 0; i < nd; ++i) order[i] = col_major ? nd - 1 - i : i;
  for (size_t i : order) idx = idx * static_cast<double>(x.dim(static_cast<int>(2 + i))) + pos[i];
  return idx;
}

absl::Status PoolOp(OpContext& ctx, PoolKind kind) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  if (x.ndim() < 3) return Invalid("input must be (N, C, *spatial)");
  std::vector<int64_t> kernel = ctx.Ints("kernel_shape");
  if (kernel.size() != static_cast<size_t>(x.ndim() - 2))
    return Invalid("kernel_shape does not match the spatial rank");
  ASSIGN_OR_RETURN(Geometry g, GetGeometry(ctx, Spatial(x), kernel));
  if (!ctx.HasAttr("strides")) g.stride.assign(kernel.size(), 1);
  Tensor::PoolOptions o;
  o.kernel = g.kernel;
  o.stride = g.stride;
  o.dilation = g.dilation;
  o.padding = g.pads;
  o.ceil_mode = ctx.Int("ceil_mode", 0) != 0;
  o.count_include_pad = ctx.Int("count_include_pad", 0) != 0;
  DType t = x.dtype();
  bool half = t == dtypes::kFloat16 || t == dtypes::kBFloat16;
  if (half) x = x.Cast(dtypes::kFloat32);
  // In channel blocks: the same pool with a third window dim of one
  // element over the block (each tap a whole vector), blocked output.
  const std::optional<Tensor>& in = ctx.Raw(0).blocked;
  if (in && !half && kind != PoolKind::kLp && !(kind == PoolKind::kMax && ctx.Wants(1)) &&
      o.kernel.size() == 2 && o.stride.size() == 2 && o.dilation.size() == 2 &&
      o.padding.size() == 2) {
    Tensor::PoolOptions ob = o;
    ob.kernel.push_back(1);
    ob.stride.push_back(1);
    ob.dilation.push_back(1);
    ob.padding.push_back({0, 0});
    Tensor yb = kind == PoolKind::kMax ? in->MaxPool(ob) : in->AvgPool(ob);
    if (yb.ok()) {
      ctx.SetValue(0, BlockedValue(yb, x.shape()[1]));
      return absl::OkStatus();
    }
  }
  Tensor y;
  if (kind == PoolKind::kMax) {
    y = x.MaxPool(o);
    if (ctx.Wants(1)) {
      if (o.ceil_mode) return Unsupported("the Indices output with ceil_mode is not supported");
      ASSIGN_OR_RETURN(Tensor idx, MaxPoolIndices(ctx, x, g, ctx.Int("storage_order", 0) != 0));
      ctx.Set(1, idx);
    }
  } else if (kind == PoolKind::kAvg) {
    y = x.AvgPool(o);
  } else {
    double p = static_cast<double>(ctx.Int("p", 2));
    std::vector<int64_t> axes;
    for (size_t i = 0; i < kernel.size(); ++i) axes.push_back(-1 - static_cast<int64_t>(i));
    Tensor win = x.Abs().Pow(x.Scalar(p)).Pool(g.kernel, g.stride, g.dilation, g.pads);
    y = win.Sum(axes).Pow(x.Scalar(1.0 / p));
  }
  ctx.Set(0, half ? y.Cast(t) : y);
  return absl::OkStatus();
}

absl::Status GlobalPoolOp(OpContext& ctx, PoolKind kind) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  if (x.ndim() < 3) return Invalid("input must be (N, C, *spatial)");
  // In channel blocks: the max or mean of each block's lanes, which is
  // already (N, C, 1, 1) in memory (channel_blocks.h).
  const std::optional<Tensor>& in = ctx.Raw(0).blocked;
  const bool blocked = in && x.ndim() == 4;
  if (kind == PoolKind::kMax) {
    if (blocked) ctx.SetValue(0, BlockedValue(in->Max({2, 3}, true), x.shape()[1]));
    else ctx.Set(0, x.GlobalMaxPool());
  } else if (kind == PoolKind::kAvg) {
    if (blocked) ctx.SetValue(0, BlockedValue(in->Mean({2, 3}, true), x.shape()[1]));
    else ctx.Set(0, x.GlobalAvgPool());
  } else {
    double p = static_cast<double>(ctx.Int("p", 2));
    std::vector<int64_t> axes;
    for (int64_t i = 2; i < x.ndim(); ++i) axes.push_back(i);
    ctx.Set(0, x.Abs().Pow(x.Scalar(p)).Sum(axes, true).Pow(x.Scalar(1.0 / p)));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterNnOps(OpRegistry* r) {
  r->Register("MatMul", MatMulOp);
  r->Register("Gemm", GemmOp);
  r->Register("Conv", ConvOp);
  r->Register("ConvTranspose", ConvTransposeOp);
  r->Register("MaxPool", [](OpContext& ctx) { return PoolOp(ctx, PoolKind::kMax); });
  r->Register("AveragePool", [](OpContext& ctx) { return PoolOp(ctx, PoolKind::kAvg); });
  r->Register("LpPool", [](OpContext& ctx) { return PoolOp(ctx, PoolKind::kLp); });
  r->Register("GlobalMaxPool", [](OpContext& ctx) { return GlobalPoolOp(ctx, PoolKind::kMax); });
  r->Register("GlobalAveragePool",
              [](OpContext& ctx) { return GlobalPoolOp(ctx, PoolKind::kAvg); });
  r->Register("GlobalLpPool", [](OpContext& ctx) { return GlobalPoolOp(ctx, PoolKind::kLp); });
}

}  // namespace kiln

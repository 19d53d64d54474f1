// Convolution and transposed convolution, built on Pool (tensor_nn.cc): a
// window view (direct) or a copy of the windows (im2col), an elementwise
// multiply and one reduce.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"
#include "engine/tensor/tensor.h"
#include "engine/tensor/tensor_internal.h"

namespace kiln {

namespace {

// Drops the kernel taps that read only padding (Tensor::DeadTaps) from the
// convolution of x by w.
void CropDeadTaps(Tensor* x, Tensor* w, std::vector<int64_t>* kernel,
                  const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
                  Pads* padding) {
  Tensor::ConvOptions o;
  o.stride = stride;
  o.dilation = dilation;
  o.padding = *padding;
  std::optional<Tensor::LiveTaps> live = Tensor::DeadTaps(x->shape(), w->shape(), o);
  if (!live) return;
  *w = w->Shrink(live->weight);
  *x = x->Shrink(live->input);
  *kernel = live->kernel;
  *padding = live->padding;
}

// One spatial dim's output split where the set of live taps changes: per
// segment [begin, end) of outputs, the taps [lo, hi] that read the input for
// all of them (the others read only padding there; lo > hi: none). Nothing
// for more than kMaxTapOutputs outputs (one step per output).
struct TapSegment {
  int64_t begin, end, lo, hi;
};
constexpr int64_t kMaxTapOutputs = int64_t{1} << 20;

std::optional<std::vector<TapSegment>> TapSegments(int64_t in, int64_t k, int64_t s, int64_t d,
                                                   int64_t p0, int64_t out) {
  if (out > kMaxTapOutputs || s < 1 || d < 1 || k < 1) return std::nullopt;
  std::vector<TapSegment> segs;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * s - p0;  // input position of tap 0
    const int64_t lo = start >= 0 ? 0 : (-start + d - 1) / d;
    const int64_t hi = start > in - 1 ? -1 : std::min(k - 1, (in - 1 - start) / d);
    if (!segs.empty() && segs.back().lo == lo && segs.back().hi == hi) {
      segs.back().end = o + 1;
    } else {
      segs.push_back({o, o + 1, lo, hi});
    }
  }
  return segs;
}

// A convolution most of whose tap products read padding (a dilated one
// whose rate is large for its map: DeepLabV3's rate-12 3x3 on a 16 x 16 map
// reads the input with a quarter of its taps) is split into output regions
// of constant live taps -- the centre with one tap, the edges with two, the
// corners with four -- each its own convolution of the input it reads,
// concatenated: 4x fewer multiplies there. Only where the live products
// are at most half, and a region has at least one live tap (a region of
// none would be the bias alone); at most 3 segments a dim.
std::optional<Tensor> ConvRegions(const Tensor& x, const Tensor& w, const Tensor* bias,
                                  const std::vector<int64_t>& kernel,
                                  const std::vector<int64_t>& stride,
                                  const std::vector<int64_t>& dilation, const Pads& padding,
                                  const Tensor::ConvOptions& o) {
  const size_t nd = kernel.size();
  std::vector<std::vector<TapSegment>> segs;
  double live = 1;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t in = x.shape()[2 + i], k = kernel[i], s = stride[i], d = dilation[i];
    const auto [p0, p1] = padding[i];
    const int64_t span = in + p0 + p1 - d * (k - 1) - 1;
    if (span < 0 || p0 < 0 || p1 < 0) return std::nullopt;  // Pool reports it
    const int64_t out = span / s + 1;
    std::optional<std::vector<TapSegment>> dim = TapSegments(in, k, s, d, p0, out);
    if (!dim || dim->size() > 3) return std::nullopt;
    segs.push_back(std::move(*dim));
    double taps = 0;
    for (const TapSegment& g : segs.back()) {
      if (g.lo > g.hi) return std::nullopt;
      taps += static_cast<double>(g.end - g.begin) * static_cast<double>(g.hi - g.lo + 1);
    }
    live *= taps / (static_cast<double>(out) * static_cast<double>(k));
  }
  if (live > 0.5) return std::nullopt;
  // The regions in row-major order of their segments, joined back dim by
  // dim from the last.
  std::function<Tensor(size_t, Pads, Pads)> build = [&](size_t i, Pads xb, Pads wb) -> Tensor {
    if (i == nd) {
      Tensor::ConvOptions ro = o;
      ro.stride = stride;
      ro.dilation = dilation;
      ro.padding = Pads(nd, {0, 0});
      return x.Shrink(xb).Conv(w.Shrink(wb), bias, ro);
    }
    std::vector<Tensor> parts;
    for (const TapSegment& g : segs[i]) {
      Pads xs = xb, ws = wb;
      const int64_t first = g.begin * stride[i] - padding[i].first;
      xs.push_back({first + g.lo * dilation[i],
                    first + (g.end - 1 - g.begin) * stride[i] + g.hi * dilation[i] + 1});
      ws.push_back({g.lo, g.hi + 1});
      parts.push_back(build(i + 1, xs, ws));
    }
    return parts.size() == 1 ? parts[0] : Tensor::Cat(parts, static_cast<int64_t>(2 + i));
  };
  return build(0, {{0, x.shape()[0]}, {0, x.shape()[1]}}, {{0, w.shape()[0]}, {0, w.shape()[1]}});
}

// Whether a convolution copies its windows out first (im2col) instead of
// reading them in place (direct). Direct convolution vectorizes along an
// output row: a short row (a 7- or 14-wide map) leaves vectors part empty
// and each broadcast weight feeds one or two vectors. The copied windows
// make the output pixels one contiguous axis (49, 196) instead. Chosen when
// the output row is short, the copy stays small (it is read once per tile
// of output channels) and there is something to gain: grouped convolutions
// (depthwise: nothing to reuse) and 1x1 stride-1 convolutions (already a
// matmul) stay direct. The thresholds are in output elements and bytes, not
// in a device's vector width: the tensor layer does not know the device.
bool Im2Col(const Shape& x, int64_t cout, const std::vector<int64_t>& kernel,
            const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
            const Pads& padding, int64_t groups, int itemsize) {
  // Measured on the zoo (1 thread, interleaved runs): rows up to 16 gave
  // resnet50 1.5x, wide_resnet 1.5x, densenet 1.15x; up to 32 added
  // Inception v3's 17- and 28-wide maps (1.25x) and RetinaNet (1.4x); up to
  // 64 pays only with many output channels (below).
  constexpr int64_t max_row = 32;
  const size_t nd = kernel.size();
  if (groups != 1 || nd == 0) return false;
  bool trivial = true;
  // Sizes in double: a hostile model's dims must not overflow here (Pool
  // checks them exactly).
  double bytes = static_cast<double>(x[1]) * itemsize;
  int64_t row = 0;
  for (size_t i = 0; i < nd; ++i) {
    trivial &= kernel[i] == 1 && stride[i] == 1;
    const double in = static_cast<double>(x[2 + i]) + padding[i].first + padding[i].second;
    const double span = static_cast<double>(dilation[i]) * (kernel[i] - 1) + 1;
    if (in < span) return false;  // Pool reports it
    row = static_cast<int64_t>((in - span) / stride[i]) + 1;
    bytes *= static_cast<double>(row) * kernel[i];
  }
  // Per image (the images are walked one after the other): 16 MiB. 4 MiB
  // left the 28-wide 3x3 convolutions of 256 channels and more direct at
  // ~105 GFLOP/s; 16 MiB made wide_resnet14_2 1.14x and fcn_resnet50 1.1x
  // faster and changed no other model beyond noise (interleaved runs, 1
  // thread).
  // Rows up to 64 when at least 128 output channels share the copy
  // (RetinaNet's 40-wide head convolutions of 256 and 819 channels: the
  // model 1.6x faster); with fewer (DenseNet's 56-wide 3x3 convolutions of
  // 32 channels) the copy costs more than it gains (1.3x slower).
  const int64_t rows_upto = cout >= 128 ? 2 * max_row : max_row;
  return !trivial && row <= rows_upto && bytes <= double{16 << 20};
}

// How many parts a convolution copied as windows (im2col, a matmul over
// K = Cin * taps) splits its reduce into. A register tile walks the whole
// reduce once per tile of output channels, over K x a tile of pixels of the
// copied windows: past L2 that slice is re-read from L3 for every channel
// tile (wide_resnet14_2's 1024-channel 3x3 convolution on a 7 x 7 map:
// K = 9216, 1.2 MB a tile of 32 pixels, 106 GFLOP/s). Parts of at most
// kMaxPartK (~200 KB a tile) keep it in L2; their partial sums, (parts)
// times the output, are a kernel of their own, summed by a second with the
// epilogue fused (SplitReduceConv). The split is a divisor of Cin (each part
// whole channels' windows); none when no divisor gives parts of at least
// kMinPartK, whose partial sums would cost more than they save. Measured
// (1 thread, interleaved runs): wide_resnet14_2 0.90x, r3d_18 0.89x,
// ResNet-18 0.92x, ResNet-50 0.95x (batch 8 0.89x), fcn_resnet50 0.96x;
// parts of up to 2304 (~300 KB) measured the same, up to 4608 (~600 KB)
// gained nothing. Like Im2Col, the limits are element counts: the tensor
// layer does not know the device.
int64_t ReduceParts(int64_t cin, int64_t taps) {
  constexpr int64_t kMaxPartK = 1536, kMinPartK = 384;
  if (cin * taps <= kMaxPartK) return 1;
  for (int64_t p = 2; cin / p * taps >= kMinPartK; ++p)
    if (cin % p == 0 && cin / p * taps <= kMaxPartK) return p;
  return 1;
}

// The convolution's matmul over the copied windows `win` (N, Cin, *out, *k)
// and the weight w (Cout, Cin, *k), ungrouped, with its reduce split into
// `parts` ranges of Cin: (N, P, Cout, *out) partial sums with the parts the
// outermost axis -- each part's slice of the windows stays in cache while
// every output channel tile reads it, and the loop split across threads
// gives each thread its own parts -- then summed over P: (N, 1, Cout, *out).
Tensor SplitReduceConv(const Tensor& win, const Tensor& w, int64_t parts, const Shape& out,
                       const std::vector<int64_t>& kernel) {
  const int64_t nd = kernel.size(), n = win.shape()[0], cout = w.shape()[0];
  const int64_t cp = w.shape()[1] / parts;
  // x: (N, P, 1, C', *out, *k)
  Shape xs = {n, parts, 1, cp};
  xs.insert(xs.end(), out.begin(), out.end());
  xs.insert(xs.end(), kernel.begin(), kernel.end());
  // w: (Cout, P, C', *k) -> (P, Cout, C', *k) -> (1, P, Cout, C', 1.., *k)
  Shape wsplit = {cout, parts, cp};
  wsplit.insert(wsplit.end(), kernel.begin(), kernel.end());
  std::vector<int64_t> order = {1, 0, 2};
  for (int64_t i = 0; i < nd; ++i) order.push_back(3 + i);
  Shape ws = {1, parts, cout, cp};
  ws.insert(ws.end(), nd, 1);
  ws.insert(ws.end(), kernel.begin(), kernel.end());
  std::vector<int64_t> axes = {3};
  for (int64_t i = 0; i < nd; ++i) axes.push_back(4 + nd + i);
  Tensor partial = (win.Reshape(xs) * w.Reshape(wsplit).Permute(order).Reshape(ws)).Sum(axes);
  return partial.Sum({1}, /*keepdim=*/true);  // (N, 1, Cout, *out)
}

}  // namespace

double Tensor::PaddingTapFraction(const Shape& x, const Shape& w, const ConvOptions& o) {
  if (x.size() < 3 || w.size() != x.size()) return 0;
  const size_t nd = x.size() - 2;
  std::vector<int64_t> stride = OrDefault(o.stride, nd, 1);
  std::vector<int64_t> dilation = OrDefault(o.dilation, nd, 1);
  Pads padding = o.padding.empty() ? Pads(nd, {0, 0}) : o.padding;
  if (stride.size() != nd || dilation.size() != nd || padding.size() != nd) return 0;
  double live = 1;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t in = x[2 + i], k = w[2 + i], s = stride[i], d = dilation[i];
    const auto [p0, p1] = padding[i];
    if (s < 1 || d < 1 || k < 1 || p0 < 0 || p1 < 0) return 0;
    const int64_t span = in + p0 + p1 - d * (k - 1) - 1;
    if (span < 0) return 0;
    const int64_t out = span / s + 1;
    std::optional<std::vector<TapSegment>> segs = TapSegments(in, k, s, d, p0, out);
    if (!segs) return 0;
    double taps = 0;
    for (const TapSegment& g : *segs)
      taps += static_cast<double>(g.end - g.begin) * static_cast<double>(std::max<int64_t>(g.hi - g.lo + 1, 0));
    live *= taps / (static_cast<double>(out) * static_cast<double>(k));
  }
  return 1 - live;
}

// Taps that read only padding for every output (a dilated convolution on a
// small map: rate 24 or 36 on a 16x16 map leaves only the centre tap, a 1x1
// convolution). The taps kept are a contiguous range [lo, hi] per dim; the
// padding shrinks by what the dropped taps covered, and where it would turn
// negative the input is cropped instead. Exact: every output reads the same
// input elements with the same weights.
std::optional<Tensor::LiveTaps> Tensor::DeadTaps(const Shape& x, const Shape& w,
                                                 const ConvOptions& o) {
  if (x.size() < 3 || w.size() != x.size()) return std::nullopt;
  const size_t nd = x.size() - 2;
  std::vector<int64_t> stride = OrDefault(o.stride, nd, 1);
  std::vector<int64_t> dilation = OrDefault(o.dilation, nd, 1);
  Pads padding = o.padding.empty() ? Pads(nd, {0, 0}) : o.padding;
  if (stride.size() != nd || dilation.size() != nd || padding.size() != nd) return std::nullopt;
  LiveTaps live;
  live.weight = {{0, w[0]}, {0, w[1]}};
  live.input = {{0, x[0]}, {0, x[1]}};
  live.kernel.assign(w.begin() + 2, w.end());
  live.padding = padding;
  bool crop = false;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t in = x[2 + i], k = w[2 + i], s = stride[i], d = dilation[i];
    auto [p0, p1] = padding[i];
    live.weight.push_back({0, k});
    live.input.push_back({0, in});
    if (s < 1 || d < 1 || k < 1) continue;  // Conv reports it
    const int64_t span = in + p0 + p1 - d * (k - 1) - 1;
    if (span < 0 || p0 < 0 || p1 < 0) continue;  // Pool reports it
    const int64_t last = span / s * s;  // padded position of the last output's window start
    int64_t lo = 0, hi = k - 1;
    while (lo <= hi && last + lo * d < p0) ++lo;    // tap lo reads below the input everywhere
    while (hi >= lo && hi * d - p0 > in - 1) --hi;  // tap hi reads past it everywhere
    if (lo > hi || (lo == 0 && hi == k - 1)) continue;
    crop = true;
    live.weight.back() = {lo, hi + 1};
    live.kernel[i] = hi - lo + 1;
    int64_t q0 = p0 - lo * d, q1 = p1 - (k - 1 - hi) * d;
    if (q0 < 0) live.input.back().first = -q0, q0 = 0;
    if (q1 < 0) live.input.back().second = in + q1, q1 = 0;
    live.padding[i] = {q0, q1};
  }
  if (!crop) return std::nullopt;
  return live;
}

Tensor Tensor::Conv(const Tensor& w_in, const Tensor* bias, const ConvOptions& o) const {
  if (!ok()) return *this;
  if (!w_in.ok()) return w_in;
  if (bias && !bias->ok()) return *bias;
  if (ndim() < 3 || w_in.ndim() != ndim())
    return Fail(*this, absl::StrCat("conv: input ", ShapeStr(shape()), " and weight ",
                                    ShapeStr(w_in.shape()),
                                    " must be (N,C,*spatial) and (Cout,Cin/groups,*kernel)"));
  const int64_t nd = ndim() - 2;
  const int64_t n = shape()[0], cin = shape()[1], cout = w_in.shape()[0], g = o.groups;
  if (g < 1 || cin % g != 0 || cout % g != 0 || w_in.shape()[1] != cin / g)
    return Fail(*this, absl::StrCat("conv: input ", ShapeStr(shape()), " and weight ",
                                    ShapeStr(w_in.shape()), " do not match with groups=", g));
  if (bias && bias->numel() != cout)
    return Fail(*this, absl::StrCat("conv: bias ", ShapeStr(bias->shape()), " for ", cout,
                                    " output channels"));
  std::vector<int64_t> kernel(w_in.shape().begin() + 2, w_in.shape().end());
  std::vector<int64_t> stride = OrDefault(o.stride, nd, 1);
  std::vector<int64_t> dilation = OrDefault(o.dilation, nd, 1);
  for (auto s : {CheckOption("conv", "stride", stride, nd, 1),
                 CheckOption("conv", "dilation", dilation, nd, 1)})
    if (!s.ok()) return TensorInternal::ErrorLike(*this, s);
  Pads padding = o.padding.empty() ? Pads(nd, {0, 0}) : o.padding;
  if (static_cast<int64_t>(padding.size()) != nd)
    return Fail(*this,
                absl::StrCat("conv: ", padding.size(), " paddings for ", nd, " spatial dims"));
  DType t = PromoteTypes(dtype(), w_in.dtype());
  Tensor x = Cast(t), w = w_in.Cast(t);
  if (kiln::Prod(kernel) == 0) return Fail(*this, "conv: empty kernel");
  CropDeadTaps(&x, &w, &kernel, stride, dilation, &padding);
  if (std::optional<Tensor> r = ConvRegions(x, w, bias, kernel, stride, dilation, padding, o))
    return *r;
  const bool im2col =
      o.algo == ConvAlgo::kIm2Col ||
      (o.algo == ConvAlgo::kAuto &&
       Im2Col(x.shape(), cout, kernel, stride, dilation, padding, g, t.ItemSize()));
  // (N, Cin, *out, *k)
  Tensor win = x.Pool(kernel, stride, dilation, padding);
  if (!win.ok()) return win;
  Shape out(win.shape().begin() + 2, win.shape().begin() + 2 + nd);
  if (im2col && n > 1) {
    // A batch whose copied windows outgrow the cache runs in slices (the
    // matmul read them back from memory: DenseNet-121's 28-wide layers at
    // batch 8 took 3x the time per image of batch 1).
    const double image_bytes =
        static_cast<double>(kiln::Prod(win.shape()) / n) * static_cast<double>(t.ItemSize());
    const int64_t per = ImagesPerSlice(image_bytes);
    if (n > per) {
      ConvOptions slice = o;
      slice.padding = padding;  // after CropDeadTaps, like w
      slice.algo = ConvAlgo::kIm2Col;
      // Padded once, into one buffer its producer can compute into (Pool
      // copies a padded slice otherwise, through the padding masks).
      Tensor xin = x;
      bool padded = false;
      for (const auto& [b, a] : padding) padded |= b != 0 || a != 0;
      if (padded) {
        Pads full(2, {0, 0});
        full.insert(full.end(), padding.begin(), padding.end());
        xin = x.Pad(full).Contiguous();
        slice.padding = Pads(nd, {0, 0});
      }
      return xin.ChunkBatch(per, [&](const Tensor& xs) { return xs.Conv(w, bias, slice); });
    }
  }
  if (im2col) {
    // The windows copied as (N, Cin, *k, *out), output pixels contiguous:
    // the convolution becomes a matmul over Cin * k whose pixel axes merge
    // into one row (7 x 7 -> 49) that fills vector tiles.
    std::vector<int64_t> to = {0, 1}, back = {0, 1};
    for (int64_t i = 0; i < nd; ++i) to.push_back(2 + nd + i), back.push_back(2 + nd + i);
    for (int64_t i = 0; i < nd; ++i) to.push_back(2 + i), back.push_back(2 + i);
    win = win.Permute(to);
    // A row of the copy (its output pixels) a multiple of 4 KiB long puts
    // every reduce step's loads in one L1 set; a cache line of padding
    // spreads them (r3d-18's 128-channel 3x3x3 layers on 4 x 16 x 16).
    const int64_t pixels = kiln::Prod(out);
    if (pixels > 0 && (pixels * t.ItemSize()) % 4096 == 0) {
      Shape flat(win.shape().begin(), win.shape().begin() + 2 + nd);
      flat.push_back(pixels);
      Pads pad(flat.size(), {0, 0}), unpad = pad;
      pad.back().second = 64 / t.ItemSize();
      unpad.back().second = -pad.back().second;
      const Shape full = win.shape();
      win = win.Reshape(flat).Pad(pad).Contiguous().Pad(unpad).Reshape(full);
    } else {
      win = win.Contiguous();
    }
    win = win.Permute(back);
  }
  // x: (N, G, 1, Cin/G, *out, *k)   w: (1, G, Cout/G, Cin/G, 1.., *k)
  Shape xs = {n, g, 1, cin / g};
  xs.insert(xs.end(), out.begin(), out.end());
  xs.insert(xs.end(), kernel.begin(), kernel.end());
  Shape ws = {1, g, cout / g, cin / g};
  ws.insert(ws.end(), nd, 1);
  ws.insert(ws.end(), kernel.begin(), kernel.end());
  std::vector<int64_t> axes = {3};
  for (int64_t i = 0; i < nd; ++i) axes.push_back(4 + nd + i);
  const int64_t parts = g == 1 && im2col ? ReduceParts(cin, kiln::Prod(kernel)) : 1;
  Tensor r = parts > 1 ? SplitReduceConv(win, w, parts, out, kernel)
                       : (win.Reshape(xs) * w.Reshape(ws)).Sum(axes);  // (N, G, Cout/G, *out)
  Shape rs = {n, cout};
  rs.insert(rs.end(), out.begin(), out.end());
  r = r.Reshape(rs);
  if (!bias) return r;
  Shape bs(rs.size(), 1);
  bs[1] = cout;
  return r + bias->Cast(t).Reshape(bs);
}

namespace {
// Strided transposed convolution without multiplying inserted zeros: Y = x
// contracted with w over Cin/G gives (N, Cout, *k, *spatial); each kernel
// tap's slice of Y is spread to stride-spaced positions (zero insertion by
// pad + reshape), shifted by tap * dilation, cropped by the padding, and the
// taps are summed.
Tensor ScatterConvTranspose(const Tensor& x, const Tensor& w, const Tensor* bias,
                            const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                            const std::vector<int64_t>& dilation, const Pads& padding,
                            const std::vector<int64_t>& opad, int64_t g) {
  const int64_t nd = x.ndim() - 2, n = x.shape()[0], cin = x.shape()[1], cig = cin / g;
  const int64_t cout_g = w.shape()[1], cout = g * cout_g;
  Shape sp(x.shape().begin() + 2, x.shape().end()), out;
  for (int64_t i = 0; i < nd; ++i) {
    int64_t o = stride[i] * (sp[i] - 1) + dilation[i] * (kernel[i] - 1) + 1 + opad[i] -
                padding[i].first - padding[i].second;
    if (o <= 0)
      return Fail(x, absl::StrCat("conv_transpose: input ", ShapeStr(x.shape()), " and weight ",
                                  ShapeStr(w.shape()), " give an empty output"));
    out.push_back(o);
  }
  DType t = PromoteTypes(x.dtype(), w.dtype());
  // x: (N, G, 1, Cin/G, 1.., *sp)   w: (1, G, Cout/G, Cin/G, *k, 1..)
  Shape xs = {n, g, 1, cig};
  xs.insert(xs.end(), nd, 1);
  xs.insert(xs.end(), sp.begin(), sp.end());
  Shape wg = {g, cig, cout_g};
  wg.insert(wg.end(), kernel.begin(), kernel.end());
  std::vector<int64_t> perm = {0, 2, 1};
  for (int64_t i = 0; i < nd; ++i) perm.push_back(3 + i);
  Shape ws = {1, g, cout_g, cig};
  ws.insert(ws.end(), kernel.begin(), kernel.end());
  ws.insert(ws.end(), nd, 1);
  Tensor xw = x.Cast(t).Reshape(xs) * w.Cast(t).Reshape(wg).Permute(perm).Reshape(ws);
  Shape ys = {n, cout};
  ys.insert(ys.end(), kernel.begin(), kernel.end());
  ys.insert(ys.end(), sp.begin(), sp.end());
  Tensor y = xw.Sum({3}).Reshape(ys);  // (N, Cout, *k, *sp)
  bool tiles = true;  // kernel == stride, no padding / dilation: taps tile the output
  for (int64_t i = 0; i < nd; ++i)
    tiles &= kernel[i] == stride[i] && dilation[i] == 1 && padding[i].first == 0 &&
             padding[i].second == 0 && opad[i] == 0;
  if (tiles) {
    // Each output element comes from exactly one tap: interleave the taps
    // with the positions, (N, Cout, *k, *sp) -> (N, Cout, sp1, k1, sp2, k2..),
    // a view instead of a sum of zero-inserted copies.
    std::vector<int64_t> order = {0, 1};
    for (int64_t i = 0; i < nd; ++i) order.insert(order.end(), {2 + nd + i, 2 + i});
    Shape os = {n, cout};
    os.insert(os.end(), out.begin(), out.end());
    Tensor r = y.Permute(order).Reshape(os);
    if (!bias) return r;
    Shape bs(os.size(), 1);
    bs[1] = cout;
    return r + bias->Cast(t).Reshape(bs);
  }
  // Zero insertion of one tap: (N, Cout, L1, 1, L2, 1, ..) padded to
  // (.., L_i, s_i, ..), merged and cut to (L_i - 1) * s_i + 1.
  Shape split = {n, cout}, merged = {n, cout};
  Pads grow = {{0, 0}, {0, 0}}, cut = {{0, n}, {0, cout}};
  for (int64_t i = 0; i < nd; ++i) {
    split.insert(split.end(), {sp[i], 1});
    grow.insert(grow.end(), {{0, 0}, {0, stride[i] - 1}});
    merged.push_back(sp[i] * stride[i]);
    cut.push_back({0, (sp[i] - 1) * stride[i] + 1});
  }
  Tensor acc;
  bool any = false;
  std::vector<int64_t> tap(nd, 0);
  for (int64_t flat = 0; flat < kiln::Prod(kernel); ++flat) {
    for (int64_t i = nd - 1, r = flat; i >= 0; --i) tap[i] = r % kernel[i], r /= kernel[i];
    Pads b = {{0, n}, {0, cout}}, place = {{0, 0}, {0, 0}};
    bool hit = true;
    for (int64_t i = 0; i < nd; ++i) {
      b.push_back({tap[i], tap[i] + 1});
      int64_t up = (sp[i] - 1) * stride[i] + 1;
      int64_t lo = tap[i] * dilation[i] - padding[i].first, hi = out[i] - lo - up;
      hit &= std::max<int64_t>(0, -lo) < up - std::max<int64_t>(0, -hi);
      place.push_back({lo, hi});
    }
    if (!hit) continue;  // this tap lands entirely in the cropped padding
    for (int64_t i = 0; i < nd; ++i) b.push_back({0, sp[i]});
    Tensor spread = y.Shrink(b).Reshape(split).Pad(grow).Reshape(merged).Shrink(cut).Pad(place);
    acc = any ? acc + spread : spread;
    any = true;
  }
  Shape os = {n, cout};
  os.insert(os.end(), out.begin(), out.end());
  if (!any) acc = Tensor::Zeros(x.engine(), os, t, x.device());
  if (!bias) return acc;
  Shape bs(os.size(), 1);
  bs[1] = cout;
  return acc + bias->Cast(t).Reshape(bs);
}
}  // namespace

Tensor Tensor::ConvTranspose(const Tensor& w_in, const Tensor* bias, const ConvOptions& o,
                             const std::vector<int64_t>& output_padding) const {
  if (!ok()) return *this;
  if (!w_in.ok()) return w_in;
  if (ndim() < 3 || w_in.ndim() != ndim())
    return Fail(*this, absl::StrCat("conv_transpose: input ", ShapeStr(shape()), " and weight ",
                                    ShapeStr(w_in.shape()),
                                    " must be (N,C,*spatial) and (Cin,Cout/groups,*kernel)"));
  const int64_t nd = ndim() - 2;
  const int64_t cin = shape()[1], g = o.groups;
  if (g < 1 || cin % g != 0 || w_in.shape()[0] != cin)
    return Fail(*this, absl::StrCat("conv_transpose: input ", ShapeStr(shape()), " and weight ",
                                    ShapeStr(w_in.shape()), " do not match with groups=", g));
  const int64_t cout_g = w_in.shape()[1];
  std::vector<int64_t> kernel(w_in.shape().begin() + 2, w_in.shape().end());
  std::vector<int64_t> stride = OrDefault(o.stride, nd, 1);
  std::vector<int64_t> dilation = OrDefault(o.dilation, nd, 1);
  std::vector<int64_t> opad = OrDefault(output_padding, nd, 0);
  for (auto s : {CheckOption("conv_transpose", "stride", stride, nd, 1),
                 CheckOption("conv_transpose", "dilation", dilation, nd, 1),
                 CheckOption("conv_transpose", "output_padding", opad, nd, 0)})
    if (!s.ok()) return TensorInternal::ErrorLike(*this, s);
  Pads padding = o.padding.empty() ? Pads(nd, {0, 0}) : o.padding;
  if (static_cast<int64_t>(padding.size()) != nd)
    return Fail(*this, absl::StrCat("conv_transpose: ", padding.size(), " paddings for ", nd,
                                    " spatial dims"));
  for (int64_t i = 0; i < nd; ++i) {
    if (shape()[2 + i] == 0) return Fail(*this, "conv_transpose: empty spatial dim");
    // The output size, in checked arithmetic (the options may be hostile).
    int64_t a, b, out;
    if (__builtin_mul_overflow(stride[i], shape()[2 + i] - 1, &a) ||
        __builtin_mul_overflow(dilation[i], kernel[i] - 1, &b) ||
        __builtin_add_overflow(a, b, &out) || __builtin_add_overflow(out, opad[i], &out) ||
        __builtin_add_overflow(out, 1, &out) ||
        __builtin_sub_overflow(out, padding[i].first, &out) ||
        __builtin_sub_overflow(out, padding[i].second, &out) || out > kMaxTensorElements ||
        padding[i].first < -kMaxTensorElements || padding[i].second < -kMaxTensorElements)
      return TensorInternal::ErrorLike(
          *this, absl::ResourceExhaustedError(absl::StrCat(
                     "conv_transpose: input ", ShapeStr(shape()), " with stride ",
                     VecStr(stride), " and padding gives an output that is too large")));
  }
  if (bias && !bias->ok()) return *bias;
  if (bias && bias->numel() != g * cout_g)
    return Fail(*this, absl::StrCat("conv_transpose: bias ", ShapeStr(bias->shape()), " for ",
                                    g * cout_g, " output channels"));
  bool unit_stride = std::all_of(stride.begin(), stride.end(), [](int64_t s) { return s == 1; });
  if (!unit_stride)
    return ScatterConvTranspose(*this, w_in, bias, kernel, stride, dilation, padding, opad, g);
  // Stride 1: a convolution with the flipped, transposed weights (Cout, Cin/G, *k).
  Shape wg = {g, cin / g, cout_g};
  wg.insert(wg.end(), kernel.begin(), kernel.end());
  std::vector<int64_t> perm = {0, 2, 1};
  for (int64_t i = 0; i < nd; ++i) perm.push_back(3 + i);
  Shape wc = {g * cout_g, cin / g};
  wc.insert(wc.end(), kernel.begin(), kernel.end());
  Tensor w = w_in.Reshape(wg).Permute(perm).Reshape(wc).Flip(AxisRange(2, nd));
  ConvOptions co;
  co.dilation = dilation;
  co.groups = g;
  for (int64_t i = 0; i < nd; ++i) {
    int64_t span = dilation[i] * (kernel[i] - 1);
    co.padding.push_back({span - padding[i].first, span - padding[i].second + opad[i]});
  }
  return Conv(w, bias, co);
}

}  // namespace kiln

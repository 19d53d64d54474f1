// Winograd convolution of 3x3, stride-1 2-D windows (Lavin & Gray, "Fast
// Algorithms for Convolutional Neural Networks"): F(2 x 2, 3 x 3) computes a
// 2 x 2 tile of outputs from a 4 x 4 tile of input with 16 multiplies per
// input / output channel pair instead of 36 (2.25x fewer):
//
//   V = Bt d B      (input tiles, per input channel: additions only)
//   U = G g Gt      (weights, per channel pair: WinogradWeights, once)
//   M = sum over Cin of U * V   (16 independent matmuls)
//   Y = At M A      (output tiles, per output channel: additions only)
//
// As tensor ops, five kernels: the padded input (a buffer of its own, see
// ConvWinograd) split into its 2 x 2 phases; the input transform writing
// the 16 transformed planes one after the other (a stack: one loop per
// plane); the matmuls, one reduce kernel shaped like a 1x1 convolution over
// the tiles of the whole batch; and the output transform writing the 4
// output phases; then one copy interleaves them into rows. F(4 x 4, 3 x 3) (4x
// fewer multiplies) was measured slower on every ResNet-18 layer: its
// transforms (484 terms per tile and channel, where F(2 x 2) has 64
// additions) cost more than the matmuls they save. A batch whose
// transformed planes outgrow the cache runs these kernels one slice of
// images at a time (Tensor::ChunkBatch), each slice's planes in cache.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/tensor/tensor.h"
#include "engine/tensor/tensor_internal.h"

namespace kiln {

namespace {

// The transform matrices of F(2 x 2, 3 x 3), row-major: Bt (4 x 4), G
// (4 x 3), At (2 x 4); interpolation points 0, 1, -1 and infinity.
constexpr int kM = 2, kA = kM + 2;
constexpr double kBt[kA * kA] = {1, 0, -1, 0,  //
                                 0, 1, 1, 0,   //
                                 0, -1, 1, 0,  //
                                 0, 1, 0, -1};
constexpr double kG[kA * 3] = {1, 0, 0,         //
                               0.5, 0.5, 0.5,   //
                               0.5, -0.5, 0.5,  //
                               0, 0, 1};
constexpr double kAt[kM * kA] = {1, 1, 1, 0,  //
                                 0, 1, -1, -1};

// The transformed input and the matmuls' output of one image: 16 planes
// each of (Cin + Cout) x tiles floats.
double WinogradBytesPerImage(int64_t cin, int64_t cout, int64_t tiles) {
  return 16.0 * static_cast<double>(cin + cout) * static_cast<double>(tiles) * 4;
}

// c * t, with the multiply left out for 1 and -1 (the caller adds or
// subtracts).
Tensor Term(const Tensor& t, double c) { return c == 1 || c == -1 ? t : t * c; }

// out[i][j] = sum over k, l of mat[i][k] * in[k][l] * mat[j][l] for a
// (rows x cols) `mat` and a cols x cols grid `in` (row-major), zero
// coefficients skipped.
std::vector<Tensor> Transform2D(const std::vector<Tensor>& in, int cols, const double* mat,
                                int rows) {
  std::vector<Tensor> out;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < rows; ++j) {
      Tensor acc;
      bool any = false;
      for (int k = 0; k < cols; ++k)
        for (int l = 0; l < cols; ++l) {
          const double c = mat[i * cols + k] * mat[j * cols + l];
          if (c == 0) continue;
          Tensor t = Term(in[k * cols + l], c);
          acc = any ? (c == -1 ? acc - t : acc + t) : (c == -1 ? t * -1.0 : t);
          any = true;
        }
      out.push_back(acc);
    }
  return out;
}

// ConvWinograd on the padded input xp (N, Cin, 2 (TH + 1), 2 (TW + 1)),
// contiguous, of an oh x ow output.
Tensor PaddedWinograd(const Tensor& xp, const Tensor& u, int64_t oh, int64_t ow) {
  const int64_t m = kM, a = kA;
  const int64_t n = xp.shape()[0], cin = xp.shape()[1], cout = u.shape()[1];
  const int64_t ph = xp.shape()[2] / m, pw = xp.shape()[3] / m, th = ph - 1, tw = pw - 1;
  // The padded input split into its 2 x 2 phases, (2, 2, C, N, TH+1, TW+1):
  // phase (p, q) holds rows p, p+2, ... and columns q, q+2, ... Tap (k, l)
  // of every tile is then a unit-stride view of phase (k % 2, l % 2) shifted
  // by (k / 2, l / 2), so the transform reads whole vectors where the tiles
  // themselves would need gathers of every other element. (Measured on
  // ResNet-18's 56-wide layer: the transform read the tiles in 0.74-1.6 ms,
  // the split and the transform take 0.24 ms.)
  Tensor xph = xp.Reshape({n, cin, ph, m, pw, m})
                   .Permute({3, 5, 1, 0, 2, 4})
                   .Contiguous();
  std::vector<Tensor> d;
  for (int64_t k = 0; k < a; ++k)
    for (int64_t l = 0; l < a; ++l)
      d.push_back(xph.Shrink({{k % m, k % m + 1},
                              {l % m, l % m + 1},
                              {0, cin},
                              {0, n},
                              {k / m, k / m + th},
                              {l / m, l / m + tw}})
                      .Reshape({cin, n, th, tw}));
  // The tiles of all images are one axis of the matmuls (N * T): each
  // transformed weight is reused by every tile of the batch.
  const int64_t nt = n * th * tw;
  Tensor v = Tensor::Stack(Transform2D(d, a, kBt, a), 0).Contiguous();  // (a*a, Cin, N, TH, TW)
  Tensor mm = (v.Reshape({a * a, 1, cin, nt}) * u.Reshape({a * a, cout, cin, 1}))
                  .Sum({2});  // (a*a, Cout, N * T)
  std::vector<Tensor> planes;
  for (int64_t p = 0; p < a * a; ++p)
    planes.push_back(mm.Shrink({{p, p + 1}, {0, cout}, {0, nt}}).Reshape({cout, n, th, tw}));
  Tensor y = Tensor::Stack(Transform2D(planes, a, kAt, m), 0).Contiguous();  // (4, Cout, N, TH, TW)
  // (o1, o2, Cout, N, TH, TW) -> (N, Cout, TH, o1, TW, o2) -> rows.
  y = y.Reshape({m, m, cout, n, th, tw})
          .Permute({3, 2, 4, 0, 5, 1})
          .Reshape({n, cout, th * m, tw * m})
          .Shrink({{0, n}, {0, cout}, {0, oh}, {0, ow}});
  // Copied out in rows: every reader of the output through the interleaving
  // view would gather (DenseNet reads each convolution's output in every
  // later layer of its block: batch 8 at 1 thread 578 -> 475 ms of kernels);
  // the copy costs no measurable time at batch 1.
  return y.Contiguous();
}

// PaddedWinograd in channel blocks: xp (N, CB, 2 (TH + 1), 2 (TW + 1), 16)
// contiguous, u (16, COB, CB, ci, co). Each tap of every tile reads whole
// 16-channel vectors (no phase split), the 16 plane matmuls are blocked 1x1
// convolutions over the tiles, and the output transform writes blocks.
Tensor PaddedWinogradBlocked(const Tensor& xp, const Tensor& u, int64_t oh, int64_t ow) {
  const int64_t m = kM, a = kA, b = Tensor::kChannelBlock;
  const int64_t n = xp.shape()[0], cb = xp.shape()[1], cob = u.shape()[1];
  const int64_t th = xp.shape()[2] / m - 1, tw = xp.shape()[3] / m - 1;
  const int64_t row = xp.shape()[3] * b, plane = xp.shape()[2] * row, nt = n * th * tw;
  std::vector<Tensor> d;  // tap (k, l) of every tile: (CB, N, TH, TW, 16)
  for (int64_t k = 0; k < a; ++k)
    for (int64_t l = 0; l < a; ++l)
      d.push_back(xp.AsStrided({cb, n, th, tw, b}, {plane, cb * plane, m * row, m * b, 1},
                               k * row + l * b));
  Tensor v = Tensor::Stack(Transform2D(d, a, kBt, a), 0).Contiguous();  // (16, CB, N, TH, TW, 16)
  Tensor mm = (v.Reshape({a * a, 1, cb, nt, b, 1}) * u.Reshape({a * a, cob, cb, 1, b, b}))
                  .Sum({2, 4});  // (16, COB, N * T, 16)
  std::vector<Tensor> planes;
  for (int64_t p = 0; p < a * a; ++p)
    planes.push_back(
        mm.Shrink({{p, p + 1}, {0, cob}, {0, nt}, {0, b}}).Reshape({cob, n, th, tw, b}));
  Tensor y = Tensor::Stack(Transform2D(planes, a, kAt, m), 0).Contiguous();  // (4, COB, N, TH, TW, 16)
  // (o1, o2, COB, N, TH, TW, 16) -> (N, COB, TH, o1, TW, o2, 16) -> rows.
  return y.Reshape({m, m, cob, n, th, tw, b})
      .Permute({3, 2, 4, 0, 5, 1, 6})
      .Reshape({n, cob, th * m, tw * m, b})
      .Shrink({{0, n}, {0, cob}, {0, oh}, {0, ow}, {0, b}})
      .Contiguous();
}

// U = G g Gt for each of `pairs` 3x3 weights g (9 values each, in `g`),
// stored plane-major into `u`: (16, pairs). Computed in double, stored as
// T: float32 weights are neither widened nor copied once more (ResNet-18's
// 512 x 512 layers are 4 M outputs; the first call spent 0.1 s in copies).
template <typename T>
void TransformWeights(const T* g, int64_t pairs, T* u) {
  for (int64_t p = 0; p < pairs; ++p) {
    const T* t = g + p * 9;
    double gt[kA * 3];  // G g: (4 x 3)
    for (int i = 0; i < kA; ++i)
      for (int l = 0; l < 3; ++l)
        gt[i * 3 + l] = kG[i * 3] * t[l] + kG[i * 3 + 1] * t[3 + l] + kG[i * 3 + 2] * t[6 + l];
    for (int i = 0; i < kA; ++i)
      for (int j = 0; j < kA; ++j)
        u[static_cast<size_t>((i * kA + j) * pairs + p)] = static_cast<T>(
            gt[i * 3] * kG[j * 3] + gt[i * 3 + 1] * kG[j * 3 + 1] + gt[i * 3 + 2] * kG[j * 3 + 2]);
  }
}

}  // namespace

// On the host: the weight is read back and each channel pair's 3 x 3 taps
// become 4 x 4. As a device kernel (a stack of 16 sums of tap views) it ran
// in a few ms but took 30-60 ms per weight to lower, on every start.
Tensor Tensor::WinogradWeights() const {
  if (!ok()) return *this;
  if (ndim() != 4 || shape()[2] != 3 || shape()[3] != 3)
    return Fail(*this,
                absl::StrCat("winograd: weight ", ShapeStr(shape()), " is not (Cout, Cin, 3, 3)"));
  const int64_t pairs = shape()[0] * shape()[1];
  const Shape us = {kA * kA, shape()[0], shape()[1]};
  // Float32 weights are read as they are (a cast to float64 would be one
  // more kernel to compile per weight shape).
  Tensor w = *this;  // reading realizes it
  if (dtype() == dtypes::kFloat32) {
    Tensor out;
    absl::Status read = w.ReadHost([&](const void* g) {
      out = FromFill(engine(), us, dtype(), device(), [&](void* u) {
        TransformWeights(static_cast<const float*>(g), pairs, static_cast<float*>(u));
      });
    });
    if (!read.ok()) return TensorInternal::ErrorLike(*this, read);
    return out;
  }
  absl::StatusOr<std::vector<double>> g = w.ToDoubles();
  if (!g.ok()) return TensorInternal::ErrorLike(*this, g.status());
  return FromFill(engine(), us, dtypes::kFloat64, device(),
                  [&](void* u) { TransformWeights(g->data(), pairs, static_cast<double*>(u)); })
      .Cast(dtype())
      .Contiguous();
}

Tensor Tensor::ConvWinograd(const Tensor& u, const Pads& padding) const {
  if (!ok()) return *this;
  if (!u.ok()) return u;
  const int64_t m = kM, a = kA;
  if (ndim() != 4 || padding.size() != 2 || u.ndim() != 3 || u.shape()[0] != a * a ||
      u.shape()[2] != shape()[1])
    return Fail(*this, absl::StrCat("winograd: input ", ShapeStr(shape()), " and weights ",
                                    ShapeStr(u.shape()), " are not (N, C, H, W) and (16, K, C)"));
  for (const auto& [p0, p1] : padding)
    if (p0 < 0 || p1 < 0) return Fail(*this, "winograd: negative padding");
  const int64_t cin = shape()[1], cout = u.shape()[1];
  const int64_t oh = shape()[2] + padding[0].first + padding[0].second - 2;
  const int64_t ow = shape()[3] + padding[1].first + padding[1].second - 2;
  if (oh < 1 || ow < 1) return Fail(*this, "winograd: empty output");
  const int64_t th = (oh + m - 1) / m, tw = (ow + m - 1) / m;
  const int64_t ph = th + 1, pw = tw + 1;
  Tensor xp = Pad({{0, 0},
                   {0, 0},
                   {padding[0].first, ph * m - shape()[2] - padding[0].first},
                   {padding[1].first, pw * m - shape()[3] - padding[1].first}});
  // The padded input is a buffer of its own first (computed into by the
  // input's producer where the scheduler can, else an unmasked copy), so
  // the split reads no padding masks: the masked split ran at ~7 GB/s; the
  // copy first took the elementwise kernels of ResNet-18 4.1 -> 3.6 ms and
  // of DenseNet-121 10.1 -> 7.5 ms (1 thread, batch 1).
  xp = xp.Contiguous();
  // A batch whose transformed planes outgrow the cache runs in slices of
  // the padded buffer (padded once, so its producer still computes into it).
  const int64_t per = ImagesPerSlice(WinogradBytesPerImage(cin, cout, th * tw));
  return xp.ChunkBatch(per, [&](const Tensor& xs) { return PaddedWinograd(xs, u, oh, ow); });
}

Tensor Tensor::ConvWinogradBlocked(const Tensor& ub, const Pads& padding) const {
  if (!ok()) return *this;
  if (!ub.ok()) return ub;
  const int64_t m = kM, a = kA, b = kChannelBlock;
  if (ndim() != 5 || shape()[4] != b || padding.size() != 2 || ub.ndim() != 5 ||
      ub.shape()[0] != a * a || ub.shape()[2] != shape()[1] || ub.shape()[3] != b ||
      ub.shape()[4] != b)
    return Fail(*this, absl::StrCat("winograd: input ", ShapeStr(shape()), " and weights ",
                                    ShapeStr(ub.shape()),
                                    " are not (N, CB, H, W, 16) and (16, COB, CB, 16, 16)"));
  for (const auto& [p0, p1] : padding)
    if (p0 < 0 || p1 < 0) return Fail(*this, "winograd: negative padding");
  const int64_t oh = shape()[2] + padding[0].first + padding[0].second - 2;
  const int64_t ow = shape()[3] + padding[1].first + padding[1].second - 2;
  if (oh < 1 || ow < 1) return Fail(*this, "winograd: empty output");
  const int64_t th = (oh + m - 1) / m, tw = (ow + m - 1) / m;
  // Padded in blocks into a buffer of its own, like ConvWinograd's.
  Tensor xp = Pad({{0, 0},
                   {0, 0},
                   {padding[0].first, (th + 1) * m - shape()[2] - padding[0].first},
                   {padding[1].first, (tw + 1) * m - shape()[3] - padding[1].first},
                   {0, 0}})
                  .Contiguous();
  const int64_t per =
      ImagesPerSlice(WinogradBytesPerImage(shape()[1] * b, ub.shape()[1] * b, th * tw));
  return xp.ChunkBatch(per, [&](const Tensor& xs) { return PaddedWinogradBlocked(xs, ub, oh, ow); });
}

// Where the matmuls are large enough to pay for the two
// transforms (about 8 MB of traffic per 64 channels of a 56 x 56 map). On
// ResNet-18 (1 thread, AVX-512) the 56- and 28-wide layers take about 0.6x
// and 0.5x of their direct / im2col time, the 14-wide ones 0.75x, and the
// 7-wide ones (16 tiles: each transformed weight, 16/9 the size of the
// weight, used 16 times) 1.5x: hence a floor on the tiles.
bool Tensor::WinogradPays(const Shape& x, const Shape& w, const ConvOptions& o) {
  constexpr int64_t kMinChannels = 32, kMinTiles = 32;
  constexpr double kMaxUnbalancedBytes = 8 << 20;
  if (x.size() != 4 || w.size() != 4 || w[2] != 3 || w[3] != 3 || o.groups != 1 || w[1] != x[1])
    return false;
  for (const std::vector<int64_t>* v : {&o.stride, &o.dilation})
    for (int64_t s : *v)
      if (s != 1) return false;
  if (o.padding.size() != 2) return false;
  int64_t tiles = 1, row = 0;  // tiles of one image; per tile row
  for (int i = 0; i < 2; ++i) {
    auto [p0, p1] = o.padding[i];
    if (p0 < 0 || p0 > 2 || p1 < 0 || p1 > 2) return false;
    const int64_t out = x[2 + i] + p0 + p1 - 2;
    if (out < 1) return false;
    tiles *= (out + 1) / 2;
    row = (out + 1) / 2;
  }
  const int64_t cin = x[1], cout = w[0];
  // A batch runs in slices of the images whose planes fit kBatchSliceBytes
  // (ConvWinograd): the matmuls see the tiles of one slice.
  const double image_bytes = WinogradBytesPerImage(cin, cout, tiles);
  const int64_t images = std::min<int64_t>(std::max<int64_t>(x[0], 1), ImagesPerSlice(image_bytes));
  tiles *= images;
  if (cin < kMinChannels || cout < kMinChannels || tiles < kMinTiles) return false;
  // The transformed input and the matmuls' output, 16 planes each, are
  // 4x the input and the output: kept only where the multiplies saved per
  // byte moved (cin * cout / (cin + cout)) are many, or else where they stay
  // in cache and the transforms' rows fill vectors (8+ tiles). DenseNet's
  // 128 -> 32 channels (25.6) paid at batch 1 (56- and 28-wide maps: 7.7
  // and 1.9 MiB), but not on its 14-wide maps (7 tiles a row: the input
  // transform at 20 GFLOP/s).
  const double bytes = image_bytes * static_cast<double>(images);
  return cin * cout >= 32 * (cin + cout) || (bytes <= kMaxUnbalancedBytes && row >= 8);
}

}  // namespace kiln

// Pool / Conv / ConvTranspose / MaxPool / AvgPool / global pools / Resize,
// checked on CPU and INTERP against naive C++ references (ONNX semantics).
#include <algorithm>
#include <cmath>
#include <functional>

#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

// Deterministic values in [-2, 2) on a 1/8 grid (sums of products stay exact).
std::vector<float> Fill(int64_t n, int seed) {
  std::vector<float> v(n);
  uint32_t s = 2654435761u * static_cast<uint32_t>(seed + 1);
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>((s >> 16) % 32) / 8.0f - 2.0f;
  }
  return v;
}

std::vector<double> D(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Calls f(idx) for every multi-index of `shape` in row-major order.
void ForEach(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& f) {
  if (Prod(shape) == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  while (true) {
    f(idx);
    int d = static_cast<int>(shape.size()) - 1;
    while (d >= 0 && ++idx[d] == shape[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

int64_t Ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t r = 0;
  for (size_t i = 0; i < shape.size(); ++i) r = r * shape[i] + idx[i];
  return r;
}

struct ConvCase {
  Shape x, w;  // (N, Cin, *sp), (Cout, Cin/g, *k)
  std::vector<int64_t> stride, dilation;
  Pads pads;
  int64_t groups = 1;
  bool bias = false;
};

// Naive N-D convolution (cross-correlation, ONNX Conv).
std::vector<double> RefConv(const ConvCase& c, const std::vector<float>& x,
                            const std::vector<float>& w, const std::vector<float>& b,
                            Shape* out_shape) {
  size_t nd = c.x.size() - 2;
  int64_t cout = c.w[0], cig = c.w[1], cog = cout / c.groups;
  Shape out = {c.x[0], cout};
  for (size_t i = 0; i < nd; ++i) {
    int64_t span = c.dilation[i] * (c.w[2 + i] - 1) + 1;
    out.push_back((c.x[2 + i] + c.pads[i].first + c.pads[i].second - span) / c.stride[i] + 1);
  }
  *out_shape = out;
  std::vector<double> r(Prod(out), 0);
  Shape ks(c.w.begin() + 2, c.w.end());
  ForEach(out, [&](const std::vector<int64_t>& o) {
    int64_t g = o[1] / cog;
    double acc = c.bias ? b[o[1]] : 0;
    for (int64_t ci = 0; ci < cig; ++ci) {
      ForEach(ks, [&](const std::vector<int64_t>& k) {
        std::vector<int64_t> xi = {o[0], g * cig + ci};
        for (size_t i = 0; i < nd; ++i) {
          int64_t p = o[2 + i] * c.stride[i] - c.pads[i].first + k[i] * c.dilation[i];
          if (p < 0 || p >= c.x[2 + i]) return;
          xi.push_back(p);
        }
        std::vector<int64_t> wi = {o[1], ci};
        wi.insert(wi.end(), k.begin(), k.end());
        acc += static_cast<double>(x[Ravel(xi, c.x)]) * w[Ravel(wi, c.w)];
      });
    }
    r[Ravel(o, out)] = acc;
  });
  return r;
}

class NnTest : public DeviceTest {
 protected:


  Tensor T(const std::vector<float>& v, Shape s) { return Tensor::FromFloats(e, v, s, dev); }

  void CheckConv(const ConvCase& c) {
    std::vector<float> x = Fill(Prod(c.x), 1), w = Fill(Prod(c.w), 2), b = Fill(c.w[0], 3);
    Shape want_shape;
    std::vector<double> want = RefConv(c, x, w, b, &want_shape);
    Tensor bias = T(b, {c.w[0]});
    // Every case both ways: windows read in place, and copied out (im2col).
    for (Tensor::ConvAlgo algo : {Tensor::ConvAlgo::kDirect, Tensor::ConvAlgo::kIm2Col}) {
      SCOPED_TRACE(algo == Tensor::ConvAlgo::kDirect ? "direct" : "im2col");
      Tensor::ConvOptions o{c.stride, c.dilation, c.pads, c.groups, algo};
      Tensor r = T(x, c.x).Conv(T(w, c.w), c.bias ? &bias : nullptr, o);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r.shape(), want_shape);
      Check(r, want);
    }
  }
};

TEST_P(NnTest, PoolWindows) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i);
  Tensor x = T(v, {1, 4, 4});
  Tensor w = x.Pool({2, 2}, {1, 1}, {1, 1}, {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w.shape(), (Shape{1, 3, 3, 2, 2}));
  std::vector<double> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) want.push_back((i + a) * 4 + j + b);
  Check(w, want);
  // Stride 2, dilation 2, asymmetric padding with a pad value: 1-D windows.
  Tensor p = T({1, 2, 3, 4, 5}, {5}).Pool({2}, {2}, {2}, {{1, 2}}, 9);
  ASSERT_TRUE(p.ok()) << p.status();
  // padded: 9 1 2 3 4 5 9 9 -> windows start 0,2,4: (9,2) (2,4) (4,9)
  EXPECT_EQ(p.shape(), (Shape{3, 2}));
  Check(p, {9, 2, 2, 4, 4, 9});
  // Non-contiguous input (transposed).
  Tensor t = x.Reshape({4, 4}).Transpose().Pool({3}, {}, {}, {});
  Check((t.Sum({-1})), {0 + 4 + 8, 4 + 8 + 12, 1 + 5 + 9, 5 + 9 + 13, 2 + 6 + 10, 6 + 10 + 14,
                        3 + 7 + 11, 7 + 11 + 15});
}

TEST_P(NnTest, PoolErrors) {
  Tensor x = T({1, 2, 3}, {3});
  Tensor big = x.Pool({4}, {1}, {1}, {});
  EXPECT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("larger"), std::string::npos) << big.status();
  EXPECT_FALSE(x.Pool({1, 1}, {}, {}, {}).ok());
  EXPECT_FALSE(x.Pool({0}, {}, {}, {}).ok());
  EXPECT_FALSE(x.Pool({2}, {0}, {}, {}).ok());
}

TEST_P(NnTest, Conv2dStrideDilationPaddingBias) {
  CheckConv({{2, 3, 5, 6}, {4, 3, 3, 2}, {2, 1}, {1, 2}, {{1, 0}, {2, 1}}, 1, true});
  CheckConv({{1, 1, 4, 4}, {1, 1, 1, 1}, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}, 1, false});
  CheckConv({{1, 2, 7, 5}, {3, 2, 3, 3}, {3, 2}, {1, 1}, {{1, 1}, {1, 1}}, 1, true});
}

// Taps that read only padding for every output are dropped (CropDeadTaps):
// the result is the same convolution.
TEST_P(NnTest, ConvDilatedPastTheInput) {
  // Rate 6 on a 4x4 map, padding 6: only the centre tap reads the input.
  CheckConv({{1, 3, 4, 4}, {2, 3, 3, 3}, {1, 1}, {6, 6}, {{6, 6}, {6, 6}}, 1, true});
  // Rate 3 on 5 rows: the outer taps read some rows; asymmetric padding,
  // stride 2, and a width where the first tap never reads (the padding of
  // the kept taps turns negative, so the input is cropped).
  CheckConv({{1, 2, 5, 3}, {2, 2, 3, 3}, {2, 1}, {3, 4}, {{3, 2}, {8, 0}}, 1, false});
  CheckConv({{2, 2, 3, 7}, {4, 1, 3, 2}, {1, 2}, {5, 9}, {{5, 5}, {9, 0}}, 2, true});
  CheckConv({{1, 1, 6}, {1, 1, 4}, {1}, {4}, {{9, 3}}, 1, false});
  // One output whose first tap is padding: the kept tap's padding would be
  // -5, so the input loses its first 5 elements instead.
  CheckConv({{1, 2, 6}, {3, 2, 2}, {1}, {10}, {{5, 0}}, 1, true});
  CheckConv({{1, 2, 6, 6}, {3, 2, 2, 2}, {1, 1}, {10, 10}, {{5, 0}, {0, 5}}, 1, true});
}

// Rate 5 on an 8 x 8 map, padding 5: per dim the outputs 0-2 read with taps
// 1-2, 3-4 with tap 1, 5-7 with taps 0-1 -- 14 of 24 tap products live, 34%
// of the 2-D ones. The output is split into 9 regions of constant live taps
// (each its own convolution): the same values with a third of the
// multiplies. Rate 3 (56% live) stays one convolution.
TEST_P(NnTest, ConvSplitsRegionsOfLiveTaps) {
  auto fraction = [](int64_t rate) {
    Tensor::ConvOptions o{{1, 1}, {rate, rate}, {{rate, rate}, {rate, rate}}, 1};
    return Tensor::PaddingTapFraction({1, 8, 8, 8}, {4, 8, 3, 3}, o);
  };
  EXPECT_NEAR(fraction(5), 1 - (14.0 / 24) * (14.0 / 24), 1e-12);
  EXPECT_NEAR(fraction(3), 1 - (18.0 / 24) * (18.0 / 24), 1e-12);
  EXPECT_EQ(Tensor::PaddingTapFraction({1, 8, 8, 8}, {4, 8, 3, 3}, {}), 0.0) << "no padding";
  // A map too long to walk output by output (a hostile shape) is not judged.
  Tensor::ConvOptions wide{{1}, {1 << 20}, {{1 << 20, 1 << 20}}, 1};
  EXPECT_EQ(Tensor::PaddingTapFraction({1, 1, int64_t{1} << 40}, {1, 1, 3}, wide), 0.0);
  for (int64_t rate : {5, 3}) {
    SCOPED_TRACE(rate);
    ConvCase c{{1, 8, 8, 8}, {4, 8, 3, 3}, {1, 1}, {rate, rate}, {{rate, rate}, {rate, rate}}, 1,
               true};
    CheckConv(c);
    Tensor x = T(Fill(Prod(c.x), 1), c.x), w = T(Fill(Prod(c.w), 2), c.w);
    ASSERT_TRUE(Tensor::RealizeAll({&x, &w}).ok());
    Tensor r = x.Conv(w, nullptr, {c.stride, c.dilation, c.pads, 1});
    const double before = e->stats().flops_run, full = 2.0 * 4 * 8 * 64 * 9;
    ASSERT_TRUE(r.Realize().ok());
    const double flops = e->stats().flops_run - before;
    if (rate == 5) {  // (the estimate counts the regions' window copies too)
      EXPECT_LT(flops, 0.6 * full);
    } else {
      EXPECT_GE(flops, full);
    }
  }
}

TEST_P(NnTest, ConvGroupsAndDepthwise) {
  CheckConv({{1, 4, 5, 5}, {6, 2, 3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}, 2, true});
  CheckConv({{2, 3, 6, 5}, {3, 1, 3, 3}, {2, 2}, {1, 1}, {{1, 1}, {0, 1}}, 3, false});
  // Depthwise with channel multiplier 2.
  CheckConv({{1, 2, 5, 4}, {4, 1, 2, 2}, {1, 1}, {2, 1}, {{0, 0}, {0, 0}}, 2, true});
}

TEST_P(NnTest, Conv1dAnd3d) {
  CheckConv({{2, 3, 9}, {2, 3, 3}, {2}, {2}, {{2, 1}}, 1, true});
  CheckConv(
      {{1, 2, 3, 4, 3}, {2, 1, 2, 2, 2}, {1, 2, 1}, {1, 1, 1}, {{0, 1}, {1, 0}, {0, 0}}, 2, true});
}

TEST_P(NnTest, ConvDefaultsAndBiasFusion) {
  Tensor x = T(Fill(2 * 8 * 8, 5), {1, 2, 8, 8});
  Tensor w = T(Fill(3 * 2 * 9, 6), {3, 2, 3, 3});
  Tensor b = T({1, 2, 3}, {3});
  ASSERT_TRUE(x.Realize().ok());
  ASSERT_TRUE(w.Realize().ok());
  ASSERT_TRUE(b.Realize().ok());
  ConvCase c{{1, 2, 8, 8}, {3, 2, 3, 3}, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}, 1, true};
  Shape s;
  std::vector<double> want = RefConv(c, Fill(128, 5), Fill(54, 6), {1, 2, 3}, &s);
  // Direct: conv + bias is one kernel; im2col: the window copy, then the
  // matmul with the bias fused.
  for (auto [algo, kernels] : {std::pair{Tensor::ConvAlgo::kDirect, 1u},
                               std::pair{Tensor::ConvAlgo::kIm2Col, 2u}}) {
    Tensor::ConvOptions o;
    o.algo = algo;
    Tensor r = x.Conv(w, &b, o);
    EXPECT_EQ(r.shape(), (Shape{1, 3, 6, 6}));
    uint64_t before = e->stats().kernels_run;
    ASSERT_TRUE(r.Realize().ok());
    EXPECT_EQ(e->stats().kernels_run - before, kernels) << "conv + bias fused";
    Check(r, want);
  }
}

// The automatic choice: short output rows of a dense convolution copy their
// windows (one more kernel); long rows, grouped convolutions and 1x1
// stride-1 convolutions read them in place.
TEST_P(NnTest, ConvChoosesIm2ColFromTheShape) {
  struct Case {
    Shape x, w;
    int64_t groups, stride;
    uint64_t kernels;
  } cases[] = {
      {{1, 4, 9, 9}, {8, 4, 3, 3}, 1, 1, 2},       // 7-wide rows: im2col
      {{1, 4, 9, 66}, {8, 4, 3, 3}, 1, 1, 1},      // 64-wide rows: direct
      {{1, 4, 9, 9}, {8, 1, 3, 3}, 4, 1, 1},       // depthwise: direct
      {{1, 4, 7, 7}, {8, 4, 1, 1}, 1, 1, 1},       // 1x1: already a matmul
      {{1, 4, 14, 14}, {8, 4, 1, 1}, 1, 2, 2},     // 1x1 stride 2: im2col
      {{1, 64, 40, 30}, {2, 64, 3, 3}, 1, 1, 2},   // a 2.3 MiB copy: im2col
      {{1, 128, 40, 30}, {2, 128, 3, 3}, 1, 1, 2},  // a 4.7 MiB copy: im2col
      {{1, 512, 40, 30}, {2, 512, 3, 3}, 1, 1, 1},  // an 18.7 MiB copy: direct
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::PrintToString(c.x) + " * " + testing::PrintToString(c.w));
    std::vector<float> xv = Fill(Prod(c.x), 1), wv = Fill(Prod(c.w), 2);
    Tensor x = T(xv, c.x), w = T(wv, c.w);
    ASSERT_TRUE(x.Realize().ok());
    ASSERT_TRUE(w.Realize().ok());
    Tensor::ConvOptions o;
    o.groups = c.groups;
    o.stride = {c.stride, c.stride};
    Tensor r = x.Conv(w, nullptr, o);
    uint64_t before = e->stats().kernels_run;
    ASSERT_TRUE(r.Realize().ok()) << r.status();
    EXPECT_EQ(e->stats().kernels_run - before, c.kernels);
    ConvCase ref{c.x, c.w, {c.stride, c.stride}, {1, 1}, {{0, 0}, {0, 0}}, c.groups, false};
    Shape s;
    Check(r, RefConv(ref, xv, wv, {}, &s));
  }
}

// A long reduce over copied windows (K = Cin * taps past 1536) is split into
// parts of whole channels: the window copy, the parts' partial sums, their
// sum with the bias. No divisor of Cin giving parts of 384+ (a prime Cin):
// one matmul. A batch whose windows outgrow 8 MiB runs in slices.
TEST_P(NnTest, ConvSplitsALongReduce) {
  struct Case {
    Shape x, w;
    uint64_t kernels;
  } cases[] = {
      {{1, 256, 9, 9}, {16, 256, 3, 3}, 3},  // K = 2304: 2 parts of 128 channels
      {{2, 96, 6, 6, 6}, {4, 96, 3, 3, 3}, 3},  // K = 2592: 3-D, 2 images, 2 parts
      {{1, 128, 9, 9}, {16, 128, 3, 3}, 2},  // K = 1152: one matmul
      {{1, 173, 9, 9}, {16, 173, 3, 3}, 2},  // K = 1557, Cin prime: one matmul
      // 4.5 MiB of windows an image: slices of one image (Tensor::ChunkBatch),
      // each its window copy and its matmul computed into its part.
      {{2, 128, 34, 34}, {16, 128, 3, 3}, 4},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::PrintToString(c.x) + " * " + testing::PrintToString(c.w));
    const size_t nd = c.x.size() - 2;
    std::vector<float> xv = Fill(Prod(c.x), 1), wv = Fill(Prod(c.w), 2), bv = Fill(c.w[0], 3);
    Tensor x = T(xv, c.x), w = T(wv, c.w), b = T(bv, {c.w[0]});
    ASSERT_TRUE(x.Realize().ok());
    ASSERT_TRUE(w.Realize().ok());
    ASSERT_TRUE(b.Realize().ok());
    Tensor r = x.Conv(w, &b, {});
    uint64_t before = e->stats().kernels_run;
    ASSERT_TRUE(r.Realize().ok()) << r.status();
    EXPECT_EQ(e->stats().kernels_run - before, c.kernels);
    ConvCase ref{c.x, c.w, std::vector<int64_t>(nd, 1), std::vector<int64_t>(nd, 1),
                 Pads(nd, {0, 0}), 1, true};
    Shape s;
    std::vector<double> want = RefConv(ref, xv, wv, bv, &s);
    EXPECT_EQ(r.shape(), s);
    Check(r, want);
  }
}

TEST_P(NnTest, ConvHalfAndEmptyBatch) {
  ConvCase c{{1, 2, 5, 6}, {3, 2, 3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}, 1, true};
  std::vector<float> x = Fill(60, 1), w = Fill(54, 2), b = Fill(3, 3);
  Shape s;
  std::vector<double> want = RefConv(c, x, w, b, &s);
  for (DType dt : {dtypes::kFloat16, dtypes::kBFloat16}) {
    Tensor bias = T(b, {3}).Cast(dt);
    Tensor r = T(x, c.x).Cast(dt).Conv(T(w, c.w).Cast(dt), &bias, {{}, {}, c.pads, 1});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r.dtype(), dt);
    Check(r, want, 0.05, 0.01);
  }
  Tensor empty = T({}, {0, 2, 5, 6});
  Tensor r = empty.Conv(T(w, c.w), nullptr, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r.shape(), (Shape{0, 3, 3, 4}));
  EXPECT_TRUE(Values(r).empty());
  Tensor m = empty.MaxPool({{2, 2}, {}, {}, {}, false, false});
  EXPECT_EQ(m.shape(), (Shape{0, 2, 2, 3}));
  EXPECT_TRUE(Values(m).empty());
  EXPECT_EQ(empty.AvgPool({{2, 2}, {}, {}, {}, false, false}).shape(), (Shape{0, 2, 2, 3}));
}

TEST_P(NnTest, ConvErrors) {
  Tensor x = T(Fill(2 * 4 * 4, 1), {1, 2, 4, 4});
  Tensor bad = x.Conv(T(Fill(3 * 3 * 4, 1), {1, 3, 3, 4}), nullptr, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(1,2,4,4)"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("(1,3,3,4)"), std::string::npos) << bad.status();
  Tensor w = T(Fill(18, 1), {1, 2, 3, 3});
  EXPECT_FALSE(x.Conv(w, nullptr, {{1}, {}, {}, 1}).ok());               // stride rank
  EXPECT_FALSE(x.Conv(w, nullptr, {{}, {}, {}, 2}).ok());                // groups
  EXPECT_FALSE(x.Conv(T(Fill(50, 1), {1, 2, 5, 5}), nullptr, {}).ok());  // kernel too big
  Tensor b2 = T({1, 2}, {2});
  EXPECT_FALSE(x.Conv(w, &b2, {}).ok());
  EXPECT_FALSE(T({1, 2}, {2}).Conv(w, nullptr, {}).ok());
}

// Naive ONNX ConvTranspose: scatter every input element through the kernel.
std::vector<double> RefConvT(const ConvCase& c, const std::vector<int64_t>& opad,
                             const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& b, Shape* out_shape) {
  size_t nd = c.x.size() - 2;
  int64_t cig = c.x[1] / c.groups, cog = c.w[1];
  Shape out = {c.x[0], cog * c.groups};
  for (size_t i = 0; i < nd; ++i)
    out.push_back(c.stride[i] * (c.x[2 + i] - 1) + opad[i] + c.dilation[i] * (c.w[2 + i] - 1) + 1 -
                  c.pads[i].first - c.pads[i].second);
  *out_shape = out;
  std::vector<double> r(Prod(out), 0);
  if (c.bias) ForEach(out, [&](const std::vector<int64_t>& o) { r[Ravel(o, out)] = b[o[1]]; });
  Shape ks(c.w.begin() + 2, c.w.end());
  ForEach(c.x, [&](const std::vector<int64_t>& xi) {
    int64_t g = xi[1] / cig;
    for (int64_t co = 0; co < cog; ++co)
      ForEach(ks, [&](const std::vector<int64_t>& k) {
        std::vector<int64_t> oi = {xi[0], g * cog + co};
        for (size_t i = 0; i < nd; ++i) {
          int64_t p = xi[2 + i] * c.stride[i] + k[i] * c.dilation[i] - c.pads[i].first;
          if (p < 0 || p >= out[2 + i]) return;
          oi.push_back(p);
        }
        std::vector<int64_t> wi = {xi[1], co};
        wi.insert(wi.end(), k.begin(), k.end());
        r[Ravel(oi, out)] += static_cast<double>(x[Ravel(xi, c.x)]) * w[Ravel(wi, c.w)];
      });
  });
  return r;
}

TEST_P(NnTest, ConvTranspose) {
  struct Case {
    ConvCase c;
    std::vector<int64_t> opad;
  };
  std::vector<Case> cases = {
      {{{1, 2, 3, 3}, {2, 3, 3, 3}, {2, 2}, {1, 1}, {{1, 1}, {1, 1}}, 1, true}, {1, 1}},
      {{{2, 1, 2, 3}, {1, 2, 2, 3}, {1, 3}, {1, 1}, {{0, 0}, {2, 0}}, 1, false}, {0, 2}},
      {{{1, 4, 3, 2}, {4, 1, 3, 2}, {2, 1}, {2, 1}, {{0, 1}, {0, 0}}, 2, true}, {0, 0}},
      {{{1, 2, 4}, {2, 2, 3}, {3}, {2}, {{1, 3}}, 2, true}, {1}},
      {{{1, 1, 3}, {1, 1, 2}, {4}, {1}, {{0, 0}}, 1, true}, {1}},  // gaps between taps
      {{{1, 1, 2}, {1, 1, 2}, {2}, {1}, {{3, 0}}, 1, true}, {0}},  // a tap fully cropped
      {{{1, 2, 3, 3}, {2, 1, 3, 3}, {1, 1}, {1, 1}, {{1, 2}, {0, 1}}, 1, false}, {0, 0}},
      {{{1, 2, 2, 2, 2}, {2, 1, 2, 2, 2}, {2, 1, 2}, {1, 1, 1}, {{0, 1}, {0, 0}, {1, 0}}, 2, true},
       {1, 0, 0}},
      // kernel == stride, no padding: taps tile the output (interleaved view)
      {{{1, 3, 4, 5}, {3, 2, 2, 2}, {2, 2}, {1, 1}, {{0, 0}, {0, 0}}, 1, true}, {0, 0}},
      {{{2, 4, 3, 3}, {4, 1, 3, 2}, {3, 2}, {1, 1}, {{0, 0}, {0, 0}}, 2, false}, {0, 0}},
      {{{1, 2, 5}, {2, 3, 4}, {4}, {1}, {{0, 0}}, 1, true}, {0}},
  };
  for (const Case& k : cases) {
    const ConvCase& c = k.c;
    std::vector<float> x = Fill(Prod(c.x), 7), w = Fill(Prod(c.w), 8);
    std::vector<float> b = Fill(c.w[1] * c.groups, 9);
    Shape want_shape;
    std::vector<double> want = RefConvT(c, k.opad, x, w, b, &want_shape);
    Tensor bias = T(b, {c.w[1] * c.groups});
    Tensor r = T(x, c.x).ConvTranspose(T(w, c.w), c.bias ? &bias : nullptr,
                                       {c.stride, c.dilation, c.pads, c.groups}, k.opad);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r.shape(), want_shape);
    Check(r, want);
  }
  Tensor x = T(Fill(8, 1), {1, 2, 2, 2});
  EXPECT_FALSE(x.ConvTranspose(T(Fill(12, 1), {3, 1, 2, 2}), nullptr, {}).ok());
}

// Naive ONNX MaxPool / AvgPool over the trailing dims of x.
std::vector<double> RefPool(bool max, const Shape& xs, const std::vector<float>& x,
                            const Tensor::PoolOptions& o, Shape* out_shape) {
  size_t nk = o.kernel.size(), lead = xs.size() - nk;
  std::vector<int64_t> s = o.stride.empty() ? o.kernel : o.stride;
  std::vector<int64_t> d = o.dilation.empty() ? std::vector<int64_t>(nk, 1) : o.dilation;
  Pads p = o.padding.empty() ? Pads(nk, {0, 0}) : o.padding;
  Shape out(xs.begin(), xs.begin() + lead);
  for (size_t i = 0; i < nk; ++i) {
    int64_t in = xs[lead + i], span = d[i] * (o.kernel[i] - 1) + 1;
    int64_t num = in + p[i].first + p[i].second - span;
    int64_t n = o.ceil_mode ? (num + s[i] - 1) / s[i] + 1 : num / s[i] + 1;
    if (o.ceil_mode && (n - 1) * s[i] >= in + p[i].first) --n;
    out.push_back(n);
  }
  *out_shape = out;
  std::vector<double> r;
  ForEach(out, [&](const std::vector<int64_t>& oi) {
    double acc = max ? -INFINITY : 0;
    int64_t count = 0;
    ForEach(Shape(o.kernel.begin(), o.kernel.end()), [&](const std::vector<int64_t>& k) {
      std::vector<int64_t> xi(oi.begin(), oi.begin() + lead);
      bool inside = true, in_pad = true;
      for (size_t i = 0; i < nk; ++i) {
        int64_t q = oi[lead + i] * s[i] - p[i].first + k[i] * d[i];
        inside &= q >= 0 && q < xs[lead + i];
        in_pad &= q >= -p[i].first && q < xs[lead + i] + p[i].second;
        xi.push_back(q);
      }
      if (inside || (o.count_include_pad && in_pad)) ++count;
      if (!inside) return;
      double v = x[Ravel(xi, xs)];
      acc = max ? std::max(acc, v) : acc + v;
    });
    r.push_back(max ? acc : acc / std::max<int64_t>(count, 1));
  });
  return r;
}

TEST_P(NnTest, MaxAndAvgPool) {
  struct Case {
    Shape xs;
    Tensor::PoolOptions o;
  };
  std::vector<Case> cases = {
      {{1, 1, 5, 5}, {{2, 2}, {}, {}, {}, false, false}},
      {{1, 1, 5, 5}, {{2, 2}, {}, {}, {}, true, false}},
      {{2, 1, 5, 6}, {{3, 3}, {2, 2}, {}, {{1, 1}, {1, 0}}, false, false}},
      {{2, 1, 5, 6}, {{3, 3}, {2, 2}, {}, {{1, 1}, {1, 0}}, true, true}},
      {{1, 2, 6, 7}, {{2, 3}, {2, 2}, {}, {{1, 0}, {0, 1}}, true, false}},
      {{1, 1, 7, 6}, {{2, 2}, {1, 2}, {2, 2}, {{1, 1}, {0, 0}}, false, true}},
      {{1, 1, 8}, {{3}, {3}, {}, {{1, 1}}, true, false}},  // last window in pad only: dropped
      {{3, 10}, {{4}, {3}, {}, {{2, 2}}, true, true}},
  };
  for (const Case& c : cases) {
    std::vector<float> x = Fill(Prod(c.xs), 11);
    for (float& v : x) v -= 3;  // all negative: padding must never win a max
    for (bool max : {true, false}) {
      Shape want_shape;
      std::vector<double> want = RefPool(max, c.xs, x, c.o, &want_shape);
      Tensor r = max ? T(x, c.xs).MaxPool(c.o) : T(x, c.xs).AvgPool(c.o);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r.shape(), want_shape) << (max ? "max" : "avg");
      Check(r, want);
    }
  }
}

TEST_P(NnTest, PoolDtypesAndErrors) {
  Tensor xi =
      Tensor::FromVector<int32_t>(e, {-5, -3, -9, -1, -7, -2}, {1, 1, 6}, dtypes::kInt32, dev);
  Tensor m = xi.MaxPool({{2}, {2}, {}, {{1, 0}}, true, false});
  EXPECT_EQ(m.dtype(), dtypes::kInt32);
  Check(m, {-5, -3, -1, -2});
  Tensor h = T({1, 2, 3, 4}, {1, 1, 4}).Cast(dtypes::kFloat16);
  Tensor a = h.AvgPool({{2}, {}, {}, {}, false, false});
  EXPECT_EQ(a.dtype(), dtypes::kFloat16);
  Check(a, {1.5, 3.5});
  EXPECT_FALSE(h.MaxPool({{5}, {}, {}, {}, false, false}).ok());
  EXPECT_FALSE(h.AvgPool({{2}, {}, {}, {{-1, 0}}, false, false}).ok());
  EXPECT_FALSE(h.AvgPool({{}, {}, {}, {}, false, false}).ok());
}

TEST_P(NnTest, GlobalPools) {
  std::vector<float> v = Fill(2 * 3 * 5, 4);
  Tensor x = T(v, {2, 3, 5, 1});
  Tensor avg = x.GlobalAvgPool(), mx = x.GlobalMaxPool();
  EXPECT_EQ(avg.shape(), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(mx.shape(), (Shape{2, 3, 1, 1}));
  std::vector<double> wa, wm;
  for (int c = 0; c < 6; ++c) {
    double s = 0, m = -INFINITY;
    for (int i = 0; i < 5; ++i) s += v[c * 5 + i], m = std::max<double>(m, v[c * 5 + i]);
    wa.push_back(s / 5);
    wm.push_back(m);
  }
  Check(avg, wa);
  Check(mx, wm);
  EXPECT_EQ(T({1, 2}, {1, 2}).GlobalAvgPool().shape(), (Shape{1, 2}));
  EXPECT_FALSE(T({1}, {1}).GlobalMaxPool().ok());
}

// ONNX Resize reference for one axis, applied axis by axis.
std::vector<double> RefResize(const Shape& xs, std::vector<double> x, const Shape& sizes,
                              Tensor::ResizeMode mode, Tensor::CoordMode cm,
                              Tensor::NearestMode nm) {
  Shape cur = xs;
  for (size_t ax = 0; ax < xs.size(); ++ax) {
    int64_t in = cur[ax], out = sizes[ax];
    if (in == out) continue;
    Shape next = cur;
    next[ax] = out;
    std::vector<double> y(Prod(next));
    double scale = static_cast<double>(out) / in;
    ForEach(next, [&](const std::vector<int64_t>& oi) {
      double o = static_cast<double>(oi[ax]), c = 0;
      switch (cm) {
        case Tensor::CoordMode::kHalfPixel:
          c = (o + 0.5) / scale - 0.5;
          break;
        case Tensor::CoordMode::kPytorchHalfPixel:
          c = out > 1 ? (o + 0.5) / scale - 0.5 : -0.5;
          break;
        case Tensor::CoordMode::kAlignCorners:
          c = out == 1 ? 0 : o * (in - 1) / (out - 1);
          break;
        case Tensor::CoordMode::kAsymmetric:
          c = o / scale;
          break;
      }
      auto at = [&](int64_t i) {
        std::vector<int64_t> xi = oi;
        xi[ax] = std::clamp<int64_t>(i, 0, in - 1);
        return x[Ravel(xi, cur)];
      };
      double v;
      if (mode == Tensor::ResizeMode::kNearest) {
        double f = std::floor(c);
        int64_t i =
            nm == Tensor::NearestMode::kFloor  ? static_cast<int64_t>(f)
            : nm == Tensor::NearestMode::kCeil ? static_cast<int64_t>(std::ceil(c))
            : c - f == 0.5
                ? static_cast<int64_t>(nm == Tensor::NearestMode::kRoundPreferCeil ? f + 1 : f)
                : static_cast<int64_t>(std::round(c));
        v = at(i);
      } else {
        double f = std::floor(c), r = c - f;
        v = at(static_cast<int64_t>(f)) * (1 - r) + at(static_cast<int64_t>(f) + 1) * r;
      }
      y[Ravel(oi, next)] = v;
    });
    x = std::move(y);
    cur = next;
  }
  return x;
}

TEST_P(NnTest, ResizeKnownValues) {
  Tensor x = T({1, 2, 3, 4}, {1, 1, 2, 2});
  using M = Tensor::ResizeMode;
  using C = Tensor::CoordMode;
  // PyTorch bilinear, align_corners=False (half_pixel).
  Check((x.Resize({1, 1, 4, 4}, M::kLinear)),
        {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  Check((x.Resize({1, 1, 3, 3}, M::kLinear, C::kAlignCorners)), {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  // ONNX resize_upsample_sizes_nearest: 2x2 -> 7x8.
  Tensor n = x.Resize({1, 1, 7, 8}, M::kNearest);
  std::vector<double> want;
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 8; ++j) want.push_back((i < 4 ? 1 : 3) + (j < 4 ? 0 : 1));
  Check(n, want);
  Tensor f = T({1, 2}, {2}).Resize({4}, M::kNearest, C::kAsymmetric, Tensor::NearestMode::kFloor);
  Check(f, {1, 1, 2, 2});
}

TEST_P(NnTest, ResizeMatchesReference) {
  using M = Tensor::ResizeMode;
  using C = Tensor::CoordMode;
  using N = Tensor::NearestMode;
  Shape xs = {1, 2, 3, 5};
  std::vector<float> v = Fill(Prod(xs), 12);
  for (Shape sizes : {Shape{1, 2, 7, 2}, Shape{1, 2, 1, 9}, Shape{1, 2, 6, 5}}) {
    for (C cm : {C::kHalfPixel, C::kAsymmetric, C::kAlignCorners, C::kPytorchHalfPixel}) {
      Tensor lin = T(v, xs).Resize(sizes, M::kLinear, cm);
      ASSERT_TRUE(lin.ok()) << lin.status();
      EXPECT_EQ(lin.shape(), sizes);
      Check(lin, RefResize(xs, D(v), sizes, M::kLinear, cm, N::kFloor));
      for (N nm : {N::kRoundPreferFloor, N::kRoundPreferCeil, N::kFloor, N::kCeil}) {
        Tensor near = T(v, xs).Resize(sizes, M::kNearest, cm, nm);
        Check(near, RefResize(xs, D(v), sizes, M::kNearest, cm, nm));
      }
    }
  }
}

TEST_P(NnTest, ResizeDtypesAndErrors) {
  Tensor u = Tensor::FromVector<uint8_t>(e, {10, 20, 30}, {3}, dtypes::kUInt8, dev);
  Tensor n = u.Resize({6}, Tensor::ResizeMode::kNearest);
  EXPECT_EQ(n.dtype(), dtypes::kUInt8);
  Check(n, {10, 10, 20, 20, 30, 30});
  Tensor l = u.Resize({5}, Tensor::ResizeMode::kLinear, Tensor::CoordMode::kAlignCorners);
  EXPECT_EQ(l.dtype(), dtypes::kUInt8);
  Check(l, {10, 15, 20, 25, 30});
  // Infinities do not leak into neighbours (no 0 * inf).
  Tensor inf = T({1, INFINITY, 3}, {3}).Resize({6}, Tensor::ResizeMode::kNearest);
  Check(inf, {1, 1, INFINITY, INFINITY, 3, 3});
  EXPECT_EQ(T({1, 2}, {2}).Resize({0}, Tensor::ResizeMode::kLinear).numel(), 0);
  EXPECT_FALSE(T({1, 2}, {2}).Resize({2, 2}, Tensor::ResizeMode::kLinear).ok());
  EXPECT_FALSE(T({1, 2}, {2}).Resize({-1}, Tensor::ResizeMode::kLinear).ok());
}

INSTANTIATE_TEST_SUITE_P(Devices, NnTest, ::testing::ValuesIn(TestDevices()), DeviceParamName);

}  // namespace
}  // namespace kiln

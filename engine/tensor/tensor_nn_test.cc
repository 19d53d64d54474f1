// Conv / ConvTranspose, checked on CPU, INTERP and the GPU devices present against naive C++
// references (ONNX semantics). Pools and Resize: tensor_pool_test.cc.
#include <algorithm>
#include <cmath>
#include <functional>

#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

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
  ForEachIndex(out, [&](const std::vector<int64_t>& o) {
    int64_t g = o[1] / cog;
    double acc = c.bias ? b[o[1]] : 0;
    for (int64_t ci = 0; ci < cig; ++ci) {
      ForEachIndex(ks, [&](const std::vector<int64_t>& k) {
        std::vector<int64_t> xi = {o[0], g * cig + ci};
        for (size_t i = 0; i < nd; ++i) {
          int64_t p = o[2 + i] * c.stride[i] - c.pads[i].first + k[i] * c.dilation[i];
          if (p < 0 || p >= c.x[2 + i]) return;
          xi.push_back(p);
        }
        std::vector<int64_t> wi = {o[1], ci};
        wi.insert(wi.end(), k.begin(), k.end());
        acc += static_cast<double>(x[RavelIndex(xi, c.x)]) * w[RavelIndex(wi, c.w)];
      });
    }
    r[RavelIndex(o, out)] = acc;
  });
  return r;
}

class NnTest : public DeviceTest {
 protected:


  Tensor T(const std::vector<float>& v, Shape s) { return Tensor::FromFloats(e, v, s, dev); }

  void CheckConv(const ConvCase& c) {
    std::vector<float> x = GridValues(Prod(c.x), 1), w = GridValues(Prod(c.w), 2), b = GridValues(c.w[0], 3);
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

TEST_P(NnTest, Conv2dStrideDilationPaddingBias) {
  CheckConv({{2, 3, 5, 6}, {4, 3, 3, 2}, {2, 1}, {1, 2}, {{1, 0}, {2, 1}}, 1, true});
  CheckConv({{1, 1, 4, 4}, {1, 1, 1, 1}, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}, 1, false});
  CheckConv({{1, 2, 7, 5}, {3, 2, 3, 3}, {3, 2}, {1, 1}, {{1, 1}, {1, 1}}, 1, true});
}

// Copied windows whose rows (the output pixels) are a multiple of 4 KiB
// are stored with a cache line of padding after each row: the same
// convolution (a 3x3x3 one on 4 x 16 x 16, a 3x3 one on 32 x 32).
TEST_P(NnTest, ConvWindowsCopiedInPaddedRows) {
  CheckConv({{2, 2, 4, 16, 16}, {3, 2, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {{1, 1}, {1, 1}, {1, 1}}, 1,
             true});
  CheckConv({{1, 2, 32, 32}, {3, 2, 3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}, 1, false});
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
    Tensor x = T(GridValues(Prod(c.x), 1), c.x), w = T(GridValues(Prod(c.w), 2), c.w);
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
  Tensor x = T(GridValues(2 * 8 * 8, 5), {1, 2, 8, 8});
  Tensor w = T(GridValues(3 * 2 * 9, 6), {3, 2, 3, 3});
  Tensor b = T({1, 2, 3}, {3});
  ASSERT_TRUE(x.Realize().ok());
  ASSERT_TRUE(w.Realize().ok());
  ASSERT_TRUE(b.Realize().ok());
  ConvCase c{{1, 2, 8, 8}, {3, 2, 3, 3}, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}, 1, true};
  Shape s;
  std::vector<double> want = RefConv(c, GridValues(128, 5), GridValues(54, 6), {1, 2, 3}, &s);
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
    std::vector<float> xv = GridValues(Prod(c.x), 1), wv = GridValues(Prod(c.w), 2);
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
    std::vector<float> xv = GridValues(Prod(c.x), 1), wv = GridValues(Prod(c.w), 2), bv = GridValues(c.w[0], 3);
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
  std::vector<float> x = GridValues(60, 1), w = GridValues(54, 2), b = GridValues(3, 3);
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
  Tensor x = T(GridValues(2 * 4 * 4, 1), {1, 2, 4, 4});
  Tensor bad = x.Conv(T(GridValues(3 * 3 * 4, 1), {1, 3, 3, 4}), nullptr, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(1,2,4,4)"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("(1,3,3,4)"), std::string::npos) << bad.status();
  Tensor w = T(GridValues(18, 1), {1, 2, 3, 3});
  EXPECT_FALSE(x.Conv(w, nullptr, {{1}, {}, {}, 1}).ok());               // stride rank
  EXPECT_FALSE(x.Conv(w, nullptr, {{}, {}, {}, 2}).ok());                // groups
  EXPECT_FALSE(x.Conv(T(GridValues(50, 1), {1, 2, 5, 5}), nullptr, {}).ok());  // kernel too big
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
  if (c.bias) ForEachIndex(out, [&](const std::vector<int64_t>& o) { r[RavelIndex(o, out)] = b[o[1]]; });
  Shape ks(c.w.begin() + 2, c.w.end());
  ForEachIndex(c.x, [&](const std::vector<int64_t>& xi) {
    int64_t g = xi[1] / cig;
    for (int64_t co = 0; co < cog; ++co)
      ForEachIndex(ks, [&](const std::vector<int64_t>& k) {
        std::vector<int64_t> oi = {xi[0], g * cog + co};
        for (size_t i = 0; i < nd; ++i) {
          int64_t p = xi[2 + i] * c.stride[i] + k[i] * c.dilation[i] - c.pads[i].first;
          if (p < 0 || p >= out[2 + i]) return;
          oi.push_back(p);
        }
        std::vector<int64_t> wi = {xi[1], co};
        wi.insert(wi.end(), k.begin(), k.end());
        r[RavelIndex(oi, out)] += static_cast<double>(x[RavelIndex(xi, c.x)]) * w[RavelIndex(wi, c.w)];
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
    std::vector<float> x = GridValues(Prod(c.x), 7), w = GridValues(Prod(c.w), 8);
    std::vector<float> b = GridValues(c.w[1] * c.groups, 9);
    Shape want_shape;
    std::vector<double> want = RefConvT(c, k.opad, x, w, b, &want_shape);
    Tensor bias = T(b, {c.w[1] * c.groups});
    Tensor r = T(x, c.x).ConvTranspose(T(w, c.w), c.bias ? &bias : nullptr,
                                       {c.stride, c.dilation, c.pads, c.groups}, k.opad);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r.shape(), want_shape);
    Check(r, want);
  }
  Tensor x = T(GridValues(8, 1), {1, 2, 2, 2});
  EXPECT_FALSE(x.ConvTranspose(T(GridValues(12, 1), {3, 1, 2, 2}), nullptr, {}).ok());
}

INSTANTIATE_TEST_SUITE_P(Devices, NnTest, ::testing::ValuesIn(TestDevices()), DeviceParamName);

}  // namespace
}  // namespace kiln

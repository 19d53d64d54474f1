// Winograd F(2x2, 3x3) convolution (tensor_winograd.cc) against a naive
// reference on every test device, its kernels, its errors, and the rule
// that chooses it.
#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

// Naive 3x3 stride-1 cross-correlation of (N, C, H, W) with (K, C, 3, 3).
std::vector<double> RefConv3x3(const std::vector<float>& x, const Shape& xs,
                               const std::vector<float>& w, int64_t k, const Pads& p) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  const int64_t oh = h + p[0].first + p[0].second - 2, ow = wd + p[1].first + p[1].second - 2;
  std::vector<double> out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < k; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = 0;
          for (int64_t ci = 0; ci < c; ++ci)
            for (int64_t u = 0; u < 3; ++u)
              for (int64_t v = 0; v < 3; ++v) {
                const int64_t y = i + u - p[0].first, z = j + v - p[1].first;
                if (y < 0 || y >= h || z < 0 || z >= wd) continue;
                acc += x[((b * c + ci) * h + y) * wd + z] * w[((o * c + ci) * 3 + u) * 3 + v];
              }
          out.push_back(acc);
        }
  return out;
}

class WinogradTest : public DeviceTest {
 protected:
  Tensor T(const std::vector<float>& v, Shape s) { return Tensor::FromFloats(e, v, s, dev); }
};

TEST_P(WinogradTest, MatchesTheReference) {
  struct Case {
    Shape x;
    int64_t k;
    Pads pads;
  } cases[] = {
      {{1, 3, 8, 8}, 4, {{1, 1}, {1, 1}}},  // whole tiles
      {{2, 5, 7, 9}, 3, {{1, 1}, {0, 2}}},  // odd outputs: half tiles; asymmetric pads
      {{1, 2, 5, 4}, 6, {{0, 0}, {0, 0}}},  // no padding, 3 x 2 output
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.x[3]);
    std::vector<float> x = Ramp(Prod(c.x), 1), w = Ramp(c.k * c.x[1] * 9, 2);
    Tensor u = T(w, {c.k, c.x[1], 3, 3}).WinogradWeights();
    ASSERT_TRUE(u.ok()) << u.status();
    EXPECT_EQ(u.shape(), (Shape{16, c.k, c.x[1]}));
    Tensor y = T(x, c.x).ConvWinograd(u, c.pads);
    ASSERT_TRUE(y.ok()) << y.status();
    const int64_t oh = c.x[2] + c.pads[0].first + c.pads[0].second - 2;
    const int64_t ow = c.x[3] + c.pads[1].first + c.pads[1].second - 2;
    EXPECT_EQ(y.shape(), (Shape{c.x[0], c.k, oh, ow}));
    Check(y, RefConv3x3(x, c.x, w, c.k, c.pads));
  }
}

// Of a realized input with realized weights: the phase split, the input
// transform, the matmuls, the output transform and the copy into rows; the
// output's consumer (here a ReLU) is one more. Before them the padded input
// gets its own buffer: top and bottom slabs, the column seam and the
// interior (a copy of the realized input; a computed input is computed into
// it).
TEST_P(WinogradTest, FiveKernelsAndTheConsumer) {
  Tensor x = T(Ramp(2 * 4 * 6 * 6, 3), {2, 4, 6, 6});
  Tensor u = T(Ramp(4 * 4 * 9, 4), {4, 4, 3, 3}).WinogradWeights();
  ASSERT_TRUE(x.Realize().ok());
  ASSERT_TRUE(u.Realize().ok());
  Tensor y = x.ConvWinograd(u, {{1, 1}, {1, 1}}).Relu();
  uint64_t before = e->stats().kernels_run;
  ASSERT_TRUE(y.Realize().ok());
  EXPECT_EQ(e->stats().kernels_run - before, 5u + 1u + 4u);
}

// A batch whose transformed planes outgrow kBatchSliceBytes (8 MiB) runs in
// slices of the padded input (here 4.5 MiB an image: slices of one): the
// padded input is still one buffer (3 border kernels, the interior), then
// each image's five kernels (FiveKernelsAndTheConsumer) write its part of
// the output, which the ReLU reads whole; unsliced it would be 4 + 5 + 1.
TEST_P(WinogradTest, SlicesABatchWhosePlanesOutgrowTheCache) {
  const Shape xs = {2, 32, 66, 66};
  const Pads pads = {{1, 1}, {1, 1}};
  std::vector<float> xv = Ramp(Prod(xs), 5), wv = Ramp(32 * 32 * 9, 6);
  Tensor x = T(xv, xs), u = T(wv, {32, 32, 3, 3}).WinogradWeights();
  ASSERT_TRUE(x.Realize().ok());
  ASSERT_TRUE(u.Realize().ok());
  Tensor y = x.ConvWinograd(u, pads);
  Tensor r = y.Relu();
  uint64_t before = e->stats().kernels_run;
  ASSERT_TRUE(r.Realize().ok()) << r.status();
  EXPECT_EQ(e->stats().kernels_run - before, 4u + 2 * 5u + 1u);
  Check(y, RefConv3x3(xv, xs, wv, 32, pads));
}

TEST_P(WinogradTest, BadShapesAreErrors) {
  Tensor w = T(Ramp(2 * 2 * 9, 0), {2, 2, 3, 3});
  EXPECT_FALSE(T(Ramp(8, 0), {2, 2, 2}).WinogradWeights().ok());      // not 4-D
  EXPECT_FALSE(T(Ramp(16, 0), {2, 2, 2, 2}).WinogradWeights().ok());  // 2x2 kernel
  Tensor u = w.WinogradWeights();
  Tensor x = T(Ramp(3 * 16, 0), {1, 3, 4, 4});  // 3 channels, weights for 2
  EXPECT_FALSE(x.ConvWinograd(u, {{1, 1}, {1, 1}}).ok());
  Tensor tiny = T(Ramp(2, 0), {1, 2, 1, 1});  // no output without padding
  Tensor r = tiny.ConvWinograd(u, {{0, 0}, {0, 0}});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("empty output"), std::string::npos) << r.status();
}

INSTANTIATE_TEST_SUITE_P(Devices, WinogradTest, ::testing::ValuesIn(TestDevices()),
                         DeviceParamName);

// The rule: 3x3, stride 1, dilation 1, one group, pads up to 2, at least 32
// input and output channels and 32 tiles of 2 x 2 outputs over the batch,
// and channels balanced enough or the transformed planes small.
TEST(WinogradPaysTest, ShapesThatPay) {
  auto pays = [](Shape x, Shape w, std::vector<int64_t> stride = {},
                 std::vector<int64_t> dilation = {}, int64_t groups = 1, int64_t pad = 1) {
    Tensor::ConvOptions o;
    o.stride = stride;
    o.dilation = dilation;
    o.groups = groups;
    o.padding = {{pad, pad}, {pad, pad}};
    return Tensor::WinogradPays(x, w, o);
  };
  EXPECT_TRUE(pays({1, 64, 56, 56}, {64, 64, 3, 3}));
  EXPECT_TRUE(pays({1, 256, 14, 14}, {256, 256, 3, 3}));
  EXPECT_FALSE(pays({1, 512, 7, 7}, {512, 512, 3, 3}));  // 16 tiles
  EXPECT_TRUE(pays({2, 512, 7, 7}, {512, 512, 3, 3}));   // 32 tiles
  EXPECT_FALSE(pays({1, 16, 56, 56}, {64, 16, 3, 3}));   // 16 input channels
  EXPECT_FALSE(pays({1, 64, 56, 56}, {16, 64, 3, 3}));   // 16 output channels
  EXPECT_FALSE(pays({1, 64, 56, 56}, {64, 64, 1, 1}));   // 1x1
  EXPECT_FALSE(pays({1, 64, 56, 56}, {64, 64, 3, 3}, {2, 2}));
  EXPECT_FALSE(pays({1, 64, 56, 56}, {64, 64, 3, 3}, {}, {2, 2}));
  EXPECT_FALSE(pays({1, 64, 56, 56}, {64, 32, 3, 3}, {}, {}, 2));
  EXPECT_FALSE(pays({1, 64, 56, 56}, {64, 64, 3, 3}, {}, {}, 1, 3));  // pads 3
  EXPECT_FALSE(pays({1, 64, 56}, {64, 64, 3}));                       // 1-D
  EXPECT_FALSE(pays({1, 64, 56, 56}, {64, 32, 3, 3}));                // channels differ
  // Unbalanced channels (128 -> 32: 25.6 multiplies saved per byte moved)
  // only while the transformed planes stay small and their rows fill vectors.
  EXPECT_TRUE(pays({1, 128, 56, 56}, {32, 128, 3, 3}));   // 7.7 MiB, 28 tiles a row
  EXPECT_TRUE(pays({8, 128, 56, 56}, {32, 128, 3, 3}));   // slices of 1 image (7.7 MiB)
  EXPECT_FALSE(pays({1, 128, 14, 14}, {32, 128, 3, 3}));  // 7 tiles a row
  EXPECT_TRUE(pays({8, 64, 56, 56}, {64, 64, 3, 3}));     // balanced: any size
}

}  // namespace
}  // namespace kiln

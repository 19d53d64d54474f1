// Channel blocks (tensor_blocked.cc): the views to and from blocks, the
// weight layouts, and the blocked 1x1, depthwise and dense convolutions and
// pools against Tensor::Conv / the pools of the same NCHW values on every
// test device.
#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

class ChannelBlocksTest : public DeviceTest {
 protected:
  Tensor T(const std::vector<float>& v, Shape s) { return Tensor::FromFloats(e, v, s, dev); }
};

TEST_P(ChannelBlocksTest, ViewsRoundTrip) {
  const Shape s = {2, 32, 3, 5};
  std::vector<float> v = Ramp(Prod(s), 1);
  Tensor b = T(v, s).ToChannelBlocks();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b.shape(), (Shape{2, 2, 3, 5, 16}));
  // Element (n, c, h, w) sits at block c / 16, lane c % 16.
  Tensor lane = b.Shrink({{1, 2}, {1, 2}, {2, 3}, {4, 5}, {3, 4}});
  Check(lane, {v[((1 * 32 + 19) * 3 + 2) * 5 + 4]});
  Check(b.Contiguous().FromChannelBlocks(), Doubles(v));
  EXPECT_FALSE(T(Ramp(24, 0), {1, 24, 1, 1}).ToChannelBlocks().ok());  // 24 channels
  EXPECT_FALSE(T(Ramp(24, 0), {1, 24}).Reshape({1, 2, 12}).FromChannelBlocks().ok());
}

TEST_P(ChannelBlocksTest, PointwiseMatchesConv) {
  struct Case {
    Shape x;
    int64_t cout, stride;
  } cases[] = {{{1, 32, 7, 7}, 48, 1},
               {{2, 16, 5, 6}, 32, 1},
               {{1, 32, 7, 9}, 16, 2},
               {{1, 16, 17, 17}, 32, 1}};  // 289 pixels: a padded tile on the CPU
  for (const Case& c : cases) {
    SCOPED_TRACE(c.stride);
    Tensor x = T(GridValues(Prod(c.x), 1), c.x);
    Tensor w = T(GridValues(c.cout * c.x[1], 2), {c.cout, c.x[1], 1, 1});
    Tensor wb = w.ChannelBlockedWeights();
    ASSERT_TRUE(wb.ok()) << wb.status();
    EXPECT_EQ(wb.shape(), (Shape{c.cout / 16, c.x[1] / 16, 16, 16}));
    Tensor::ConvOptions o;
    o.stride = {c.stride, c.stride};
    Tensor want = x.Conv(w, nullptr, o);
    Tensor got = x.ToChannelBlocks().Contiguous().PointwiseBlocked(wb, c.stride);
    ASSERT_TRUE(got.ok()) << got.status();
    Check(got.FromChannelBlocks(), Values(want), 1e-4, 1e-4);
  }
}

TEST_P(ChannelBlocksTest, DepthwiseMatchesConv) {
  struct Case {
    Shape x;
    int64_t k, stride, dilation;
    Pads pads;
  } cases[] = {{{1, 32, 7, 7}, 3, 1, 1, {{1, 1}, {1, 1}}},
               {{2, 16, 9, 8}, 3, 2, 1, {{1, 1}, {1, 1}}},
               {{1, 16, 11, 10}, 5, 2, 1, {{2, 2}, {1, 2}}},
               {{1, 16, 8, 8}, 3, 1, 2, {{2, 2}, {2, 2}}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.k * 10 + c.stride);
    const int64_t ch = c.x[1];
    Tensor x = T(GridValues(Prod(c.x), 3), c.x);
    Tensor w = T(GridValues(ch * c.k * c.k, 4), {ch, 1, c.k, c.k});
    Tensor wd = w.ChannelBlockedWeights();
    ASSERT_TRUE(wd.ok()) << wd.status();
    EXPECT_EQ(wd.shape(), (Shape{ch / 16, c.k, c.k, 16}));
    Tensor::ConvOptions o;
    o.stride = {c.stride, c.stride};
    o.dilation = {c.dilation, c.dilation};
    o.padding = c.pads;
    o.groups = ch;
    Tensor want = x.Conv(w, nullptr, o);
    Tensor got = x.ToChannelBlocks().DepthwiseBlocked(wd, o.stride, o.dilation, o.padding);
    ASSERT_TRUE(got.ok()) << got.status();
    Check(got.FromChannelBlocks(), Values(want), 1e-4, 1e-4);
  }
}

// Channels short of whole blocks (24 in, 40 out): zero weights round them
// up; the input's padded channels (here garbage) add nothing, and the
// padded output channels are 0.
TEST_P(ChannelBlocksTest, PartialBlocksArePaddedWithZeroWeights) {
  const Shape xs = {1, 24, 5, 7};
  std::vector<float> xv = GridValues(Prod(xs), 5), wv = GridValues(40 * 24, 6);
  Tensor x = T(xv, xs), w = T(wv, {40, 24, 1, 1});
  Tensor wb = w.ChannelBlockedWeights();
  ASSERT_TRUE(wb.ok()) << wb.status();
  EXPECT_EQ(wb.shape(), (Shape{3, 2, 16, 16}));
  Tensor xp = x.Pad({{0, 0}, {0, 8}, {0, 0}, {0, 0}}, 7.0);  // garbage in channels 24-31
  Tensor y = xp.ToChannelBlocks().Contiguous().PointwiseBlocked(wb, 1).FromChannelBlocks();
  Check(y.Shrink({{0, 1}, {0, 40}, {0, 5}, {0, 7}}), Values(x.Conv(w, nullptr, {})));
  Check(y.Shrink({{0, 1}, {40, 48}, {0, 5}, {0, 7}}), std::vector<double>(8 * 35, 0.0));
  Tensor wd = T(GridValues(24 * 9, 7), {24, 1, 3, 3}).ChannelBlockedWeights();
  ASSERT_TRUE(wd.ok()) << wd.status();
  EXPECT_EQ(wd.shape(), (Shape{2, 3, 3, 16}));
}

// An image stem into blocks: the NCHW input's windows broadcast against
// 16 output channels per vector; 40 output channels pad the third block
// with zero weights.
TEST_P(ChannelBlocksTest, StemIntoBlocksMatchesConv) {
  struct Case {
    int64_t k, stride, cout;
  } cases[] = {{3, 2, 40}, {7, 2, 32}, {3, 1, 16}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.k * 10 + c.stride);
    const Shape xs = {2, 3, 13, 11};
    Tensor x = T(GridValues(Prod(xs), 8), xs);
    Tensor w = T(GridValues(c.cout * 3 * c.k * c.k, 9), {c.cout, 3, c.k, c.k});
    Tensor wb = w.StemBlockedWeights();
    ASSERT_TRUE(wb.ok()) << wb.status();
    EXPECT_EQ(wb.shape(), (Shape{(c.cout + 15) / 16, 3, c.k, c.k, 16}));
    Tensor::ConvOptions o;
    o.stride = {c.stride, c.stride};
    o.dilation = {1, 1};
    o.padding = {{c.k / 2, c.k / 2}, {c.k / 2, c.k / 2}};
    Tensor got = x.ConvIntoBlocks(wb, o.stride, o.dilation, o.padding).FromChannelBlocks();
    ASSERT_TRUE(got.ok()) << got.status();
    const Shape& gs = got.shape();
    Check(got.Shrink({{0, gs[0]}, {0, c.cout}, {0, gs[2]}, {0, gs[3]}}), Values(x.Conv(w, nullptr, o)),
          1e-4, 1e-4);
  }
  EXPECT_FALSE(T(Ramp(8, 0), {2, 4}).StemBlockedWeights().ok());                  // not 4-D
  Tensor wb = T(Ramp(16 * 2 * 9, 0), {16, 2, 3, 3}).StemBlockedWeights();
  EXPECT_FALSE(T(Ramp(3 * 16, 0), {1, 3, 4, 4}).ConvIntoBlocks(wb, {1, 1}, {1, 1}, {}).ok());
}

// Dense convolutions of blocked inputs, direct (any window, stride,
// dilation, padding) and Winograd F(2 x 2, 3 x 3) (stride 1), with partial
// blocks (24 in, 40 out: the input's padded lanes hold garbage that the
// zero weights cancel), against Conv of the NCHW values.
TEST_P(ChannelBlocksTest, DenseMatchesConv) {
  struct Case {
    Shape x;
    int64_t cout, kh, kw, stride, dilation;
    Pads pads;
    bool winograd;
  } cases[] = {{{1, 32, 7, 7}, 32, 3, 3, 1, 1, {{1, 1}, {1, 1}}, false},
               {{2, 16, 9, 8}, 32, 3, 3, 2, 1, {{1, 1}, {1, 1}}, false},
               {{1, 32, 6, 9}, 16, 1, 7, 1, 1, {{0, 0}, {3, 3}}, false},
               {{1, 16, 3, 17}, 32, 1, 7, 1, 1, {{0, 0}, {3, 3}}, false},  // rows of 17: padded
               {{1, 16, 8, 8}, 16, 3, 3, 1, 2, {{2, 2}, {2, 2}}, false},
               {{1, 24, 6, 7}, 40, 3, 3, 1, 1, {{1, 1}, {1, 1}}, false},
               {{1, 32, 7, 7}, 32, 3, 3, 1, 1, {{1, 1}, {1, 1}}, true},
               {{2, 16, 9, 10}, 48, 3, 3, 1, 1, {{1, 0}, {0, 2}}, true},
               {{1, 24, 6, 7}, 40, 3, 3, 1, 1, {{1, 1}, {1, 1}}, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.kh << "x" << c.kw << " s" << c.stride << " d" << c.dilation
                                    << " " << c.x[1] << "->" << c.cout
                                    << (c.winograd ? " winograd" : ""));
    const int64_t cin = c.x[1], padded = (cin + 15) / 16 * 16;
    Tensor x = T(GridValues(Prod(c.x), 3), c.x);
    Tensor w = T(GridValues(c.cout * cin * c.kh * c.kw, 4), {c.cout, cin, c.kh, c.kw});
    Tensor::ConvOptions o;
    o.stride = {c.stride, c.stride};
    o.dilation = {c.dilation, c.dilation};
    o.padding = c.pads;
    Tensor xb = x.Pad({{0, 0}, {0, padded - cin}, {0, 0}, {0, 0}}, 7.0).ToChannelBlocks().Contiguous();
    Tensor wb = c.winograd ? w.WinogradBlockedWeights() : w.DenseBlockedWeights();
    ASSERT_TRUE(wb.ok()) << wb.status();
    const int64_t cob = (c.cout + 15) / 16, cb = padded / 16;
    const Shape want = c.winograd ? Shape{16, cob, cb, 16, 16} : Shape{cob, cb, c.kh, c.kw, 16, 16};
    EXPECT_EQ(wb.shape(), want);
    Tensor got = c.winograd ? xb.ConvWinogradBlocked(wb, o.padding)
                            : xb.ConvBlocked(wb, o.stride, o.dilation, o.padding);
    ASSERT_TRUE(got.ok()) << got.status();
    Tensor y = got.FromChannelBlocks();
    const Shape& ys = y.shape();
    Check(y.Shrink({{0, ys[0]}, {0, c.cout}, {0, ys[2]}, {0, ys[3]}}), Values(x.Conv(w, nullptr, o)),
          1e-4, 1e-4);
    if (c.cout < ys[1])  // the padded output channels are 0
      Check(y.Shrink({{0, ys[0]}, {c.cout, ys[1]}, {0, ys[2]}, {0, ys[3]}}),
            std::vector<double>(ys[0] * (ys[1] - c.cout) * ys[2] * ys[3], 0.0));
  }
}

// A pool of blocks is the NCHW pool with a third window dim of 1 over the
// block (how the ONNX importer pools a chain's blocks).
TEST_P(ChannelBlocksTest, PoolsOfBlocksMatchNchwPools) {
  const Shape xs = {2, 32, 9, 8};
  Tensor x = T(GridValues(Prod(xs), 5), xs);
  Tensor::PoolOptions o;
  o.kernel = {3, 3};
  o.stride = {2, 2};
  o.dilation = {1, 1};
  o.padding = {{1, 1}, {0, 1}};
  o.ceil_mode = true;
  Tensor::PoolOptions ob = o;
  ob.kernel.push_back(1);
  ob.stride.push_back(1);
  ob.dilation.push_back(1);
  ob.padding.push_back({0, 0});
  Tensor xb = x.ToChannelBlocks().Contiguous();
  Check(xb.MaxPool(ob).FromChannelBlocks(), Values(x.MaxPool(o)), 1e-6, 1e-6);
  for (bool include : {false, true}) {
    o.count_include_pad = ob.count_include_pad = include;
    Check(xb.AvgPool(ob).FromChannelBlocks(), Values(x.AvgPool(o)), 1e-5, 1e-5);
  }
}

TEST_P(ChannelBlocksTest, BadShapesAreErrors) {
  EXPECT_FALSE(T(Ramp(16 * 16 * 9, 0), {16, 16, 3, 3}).ChannelBlockedWeights().ok());
  EXPECT_FALSE(T(Ramp(16 * 16, 0), {16, 16}).ChannelBlockedWeights().ok());
  Tensor wb = T(Ramp(32 * 16, 0), {32, 16, 1, 1}).ChannelBlockedWeights();
  Tensor x = T(Ramp(32 * 4, 0), {1, 32, 2, 2}).ToChannelBlocks();  // 2 blocks, weight for 1
  EXPECT_FALSE(x.PointwiseBlocked(wb, 1).ok());
  Tensor wd = T(Ramp(32 * 9, 0), {32, 1, 3, 3}).ChannelBlockedWeights();
  Tensor small = T(Ramp(32 * 4, 0), {1, 32, 2, 2}).ToChannelBlocks();
  EXPECT_FALSE(small.DepthwiseBlocked(wd, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}).ok());  // 3 > 2
  Tensor dense = T(Ramp(32 * 32 * 9, 0), {32, 32, 3, 3}).DenseBlockedWeights();
  EXPECT_FALSE(x.ConvBlocked(dense, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}).ok());  // 3 > 2
  EXPECT_FALSE(x.ConvBlocked(wb, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}).ok());     // a 1x1 layout
  Tensor u = T(Ramp(32 * 32 * 9, 0), {32, 32, 3, 3}).WinogradBlockedWeights();
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_FALSE(x.ConvWinogradBlocked(u, {{-1, 0}, {0, 0}}).ok());               // negative pad
  EXPECT_FALSE(T(Ramp(16 * 9, 0), {16, 1, 3, 3}).Cast(dtypes::kInt32).DenseBlockedWeights().ok());
  EXPECT_FALSE(T(Ramp(16 * 4, 0), {16, 1, 2, 2}).WinogradBlockedWeights().ok());  // 2x2
}

INSTANTIATE_TEST_SUITE_P(Devices, ChannelBlocksTest, ::testing::ValuesIn(TestDevices()),
                         DeviceParamName);

}  // namespace
}  // namespace kiln

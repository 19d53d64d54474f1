// The CPU heuristics' choices for strided windows (kernel_cpu.cc step 1 and
// its alternative) and for channel blocks (steps 1, 3 and 5), checked on the
// kernels' opts, and the stem kernels they make against the interpreter.
#include <algorithm>
#include <string>
#include <vector>

#include "engine/codegen/kernel.h"
#include "engine/schedule/schedule.h"
#include "engine/schedule/schedule_testing.h"
#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

class KernelCpuTest : public ::testing::Test {
 protected:
  Engine* e = TestEngine();
};

constexpr int64_t kCout = 32;

// A stride-2 convolution, pads k / 2, of a (1, 3, 21, 75) map (output rows
// of 38: wider than Tensor::Conv copies windows for) by a k x k weight of
// kCout output channels; `innermost`: the weight stored (3, k, k, Cout) and
// read through a view in the usual order, as the ONNX importer lays out an
// image stem's weight. Random values on `dev`, or with `dev` empty unset
// buffers (for the schedule alone).
Tensor StemConv(Engine* e, const std::string& dev, int64_t k, bool innermost) {
  int seed = 0;
  auto make = [&](Shape s) {
    ++seed;
    return dev.empty() ? Tensor::Empty(e, s, dtypes::kFloat32)
                       : Tensor::Randn(e, s, seed, dtypes::kFloat32, dev).Contiguous();
  };
  Tensor x = make({1, 3, 21, 75});
  Tensor w = innermost ? make({3, k, k, kCout}).Permute({3, 0, 1, 2}) : make({kCout, 3, k, k});
  Tensor b = make({kCout});
  Tensor::ConvOptions o;
  o.stride = {2, 2};
  o.padding = {{k / 2, k / 2}, {k / 2, k / 2}};
  return x.Conv(w, &b, o).Relu();
}

// The opts the heuristics choose for the one reduce kernel of `t`'s
// schedule, with 512-bit vectors and `threads` CPU threads, its axes' sizes
// before and after, and the size of the axis split across the threads.
struct Choice {
  std::vector<Opt> opts;
  std::vector<int64_t> before, after;
  int64_t parallel = 0;
};
Choice Choose(const Tensor& t, int threads = 1) {
  RendererOptions ro;
  ro.vector_bytes = 32;
  ro.wide_vector_bytes = 64;
  ro.vector_registers = 32;
  ro.cpu_threads = threads;
  for (const ScheduleItem& item : Sched({t}).items) {
    auto k = Kernel::Create(item.ast, ro);
    EXPECT_TRUE(k.ok()) << k.status();
    if (!k.ok() || k->reduce() == nullptr) continue;
    Choice c;
    c.before = k->full_shape();
    k->HandCodedOptimizations();
    c.opts = k->applied();
    c.after = k->full_shape();
    if (k->ParallelAxis() >= 0) c.parallel = c.after[k->ParallelAxis()];
    return c;
  }
  ADD_FAILURE() << "no reduce kernel";
  return {};
}

// The size (before the opts) of the axis the heuristics vectorize.
int64_t VectorizedAxisSize(const Tensor& t) {
  const Choice c = Choose(t);
  for (const Opt& o : c.opts)
    if (o.op == OptOp::kUpcast && o.vector) return c.before[o.axis];
  return 0;
}

// A 7x7 stride-2 stem reads its input with two loads and a shuffle per tap
// along the output row; with its weight's output channels innermost it puts
// the channels in the lanes instead (147 products per output amortize the
// stores lane by lane). In the model's layout, or with 27 products (a 3x3
// stem, measured no faster that way), the lanes stay along the row (38
// outputs wide here).
TEST_F(KernelCpuTest, StridedStemTakesItsChannelsInTheLanes) {
  EXPECT_EQ(VectorizedAxisSize(StemConv(e, "", 7, true)), kCout);
  EXPECT_EQ(VectorizedAxisSize(StemConv(e, "", 7, false)), 38);
  EXPECT_EQ(VectorizedAxisSize(StemConv(e, "", 3, true)), 38);
}

// Whatever the lanes, the kernels compute the convolution: on this host's
// vectors, against the interpreter.
TEST_F(KernelCpuTest, StridedStemsMatchTheInterpreter) {
  for (int64_t k : {7, 3})
    for (bool innermost : {true, false}) {
      SCOPED_TRACE(testing::Message() << k << "x" << k << (innermost ? " innermost" : ""));
      ExpectNear(Values(StemConv(e, "CPU", k, innermost).Contiguous()),
                 Values(StemConv(e, "INTERP", k, innermost).Contiguous()), 1e-4, 1e-4);
    }
}

// A blocked kernel's first opts: 16 lanes (a block of output channels),
// then `pixels` of a row, then `blocks` channel blocks.
void ExpectBlockTile(const Choice& c, int64_t pixels, int64_t blocks) {
  ASSERT_GE(c.opts.size(), 3u);
  EXPECT_TRUE(c.opts[0].vector);
  EXPECT_EQ(c.opts[0].amount, 16);
  EXPECT_EQ(c.opts[1].amount, pixels);
  EXPECT_EQ(c.opts[2].amount, blocks);
}

// A 1x1 convolution in channel blocks (tensor_blocked.cc) of a 7 x 7 map,
// 512 -> 2048 channels: the lanes are a block of 16 output channels, the
// tile 7 pixels x 2 blocks (14 of the 16 accumulators), and the blocks run
// outside the pixels (its 4 MB weight read once, not once per row of 7).
TEST_F(KernelCpuTest, BlockedPointwiseTilesPixelsAndTwoBlocks) {
  Tensor x = Tensor::Empty(e, {1, 32, 7, 7, 16}, dtypes::kFloat32);
  Tensor w = Tensor::Empty(e, {128, 32, 16, 16}, dtypes::kFloat32);
  Choice c = Choose(x.PointwiseBlocked(w, 1));
  EXPECT_EQ(c.opts.size(), 3u);
  ExpectBlockTile(c, 7, 2);
  // After the opts: the 64 pairs of blocks before the 7 rows.
  auto at = [&](int64_t n) { return std::find(c.after.begin(), c.after.end(), n) - c.after.begin(); };
  EXPECT_LT(at(64), at(7));
}

// So does a dense 3x3 convolution in blocks: its taps are broadcast
// scalars (not shifted vectors of a sliding window), so it tiles like the
// 1x1 one, 7 pixels x 2 blocks (512 -> 512 on 7 x 7: 1315 -> 1039 us).
TEST_F(KernelCpuTest, BlockedDenseTilesPixelsAndTwoBlocks) {
  Tensor x = Tensor::Empty(e, {1, 32, 7, 7, 16}, dtypes::kFloat32);
  Tensor w = Tensor::Empty(e, {32, 32, 3, 3, 16, 16}, dtypes::kFloat32);
  ExpectBlockTile(Choose(x.ConvBlocked(w, {1, 1}, {1, 1}, {{1, 1}, {1, 1}})), 7, 2);
}

// On a 13 x 13 map (169 pixels: no tile of 2-8 divides them) the blocked
// 1x1 tile is 13 pixels x 1 block (3 blocks x 1 pixel ran at 75 GFLOP/s).
// An odd count of blocks (1000 classes: 63) takes 3 of them by 5 pixels,
// padded to 170 (OddBlockTile; 977 -> 843 us).
TEST_F(KernelCpuTest, BlockedPointwiseOnAnOddMapTilesThirteenPixels) {
  Tensor x = Tensor::Empty(e, {1, 32, 13, 13, 16}, dtypes::kFloat32);
  auto weight = [&](int64_t blocks) {
    return Tensor::Empty(e, {blocks, 32, 16, 16}, dtypes::kFloat32);
  };
  Choice c = Choose(x.PointwiseBlocked(weight(64), 1));
  ASSERT_GE(c.opts.size(), 2u);
  EXPECT_TRUE(c.opts[0].vector);
  EXPECT_EQ(c.opts[1].amount, 13);
  Choice odd = Choose(x.PointwiseBlocked(weight(63), 1));
  ExpectBlockTile(odd, 5, 3);
  EXPECT_NE(std::find(odd.after.begin(), odd.after.end(), 170 / 5), odd.after.end());
}

// On a 17 x 17 map (289 pixels: nothing up to 15 divides them) the pixels
// are padded to 296 for a tile of 8 (1 pixel x 3 blocks ran at 50-80
// GFLOP/s); so is a 1x7 convolution's row of 17, to 18 for a tile of 6.
TEST_F(KernelCpuTest, BlockedRowsNoTileDividesArePadded) {
  Tensor x = Tensor::Empty(e, {1, 48, 17, 17, 16}, dtypes::kFloat32);
  Choice c = Choose(x.PointwiseBlocked(Tensor::Empty(e, {12, 48, 16, 16}, dtypes::kFloat32), 1));
  ASSERT_GE(c.opts.size(), 2u);
  EXPECT_EQ(c.opts[1].amount, 8);
  EXPECT_NE(std::find(c.after.begin(), c.after.end(), 296 / 8), c.after.end());
  Choice row = Choose(x.ConvBlocked(Tensor::Empty(e, {12, 48, 1, 7, 16, 16}, dtypes::kFloat32),
                                    {1, 1}, {1, 1}, {{0, 0}, {3, 3}}));
  ASSERT_GE(row.opts.size(), 2u);
  EXPECT_EQ(row.opts[1].amount, 6);
}

// Two threads split a reduce kernel along an axis they share evenly: a 1x7
// convolution on 17 x 17 into 10 channel blocks, tiled by 2, splits its 17
// rows (9:8), not the 5 pairs of blocks (3:2) that one thread's choice by
// the operand bytes would take.
TEST_F(KernelCpuTest, TwoThreadsSplitAnAxisTheyShareEvenly) {
  Tensor x = Tensor::Empty(e, {1, 48, 17, 17, 16}, dtypes::kFloat32);
  Tensor y = x.ConvBlocked(Tensor::Empty(e, {10, 48, 1, 7, 16, 16}, dtypes::kFloat32), {1, 1},
                           {1, 1}, {{0, 0}, {3, 3}});
  EXPECT_EQ(Choose(y, 1).parallel, 5);
  EXPECT_EQ(Choose(y, 2).parallel, 17);
}

// At batch 3 the images stay the outermost loop (the weight is broadcast
// along them too, but each image's pixels would otherwise be streamed once
// per pair of channel blocks).
TEST_F(KernelCpuTest, BlockedPointwiseWalksEachImageOnce) {
  Tensor x = Tensor::Empty(e, {3, 16, 56, 56, 16}, dtypes::kFloat32);
  Choice c = Choose(x.PointwiseBlocked(Tensor::Empty(e, {16, 16, 16, 16}, dtypes::kFloat32), 1));
  ASSERT_FALSE(c.after.empty());
  EXPECT_EQ(c.after[0], 3);
}

// 50 pixels an image (5 x 10; ViT's 50 tokens) take a tile of 5 at batch
// 1; at batch 8 the 8 images are the tile (8 x 2 blocks: 16 accumulators,
// not 10).
TEST_F(KernelCpuTest, ATileOfImagesWhenThePixelsTakeOnlyFive) {
  Tensor w = Tensor::Empty(e, {8, 4, 16, 16}, dtypes::kFloat32);
  for (int64_t batch : {1, 8}) {
    SCOPED_TRACE(batch);
    Tensor x = Tensor::Empty(e, {batch, 4, 5, 10, 16}, dtypes::kFloat32);
    Choice c = Choose(x.PointwiseBlocked(w, 1));
    ExpectBlockTile(c, batch == 1 ? 5 : 8, 2);
    ASSERT_GE(c.opts.size(), 2u);
    EXPECT_EQ(c.before[c.opts[1].axis], batch == 1 ? 50 : 8);
  }
}

// A depthwise convolution in channel blocks reads every tap's 16 channels
// as one vector, input and weight alike: 16 lanes (8 before).
TEST_F(KernelCpuTest, BlockedDepthwiseTakesWholeBlocks) {
  Tensor x = Tensor::Empty(e, {1, 4, 14, 14, 16}, dtypes::kFloat32);
  Tensor w = Tensor::Empty(e, {4, 3, 3, 16}, dtypes::kFloat32);
  Choice c = Choose(x.DepthwiseBlocked(w, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}));
  ASSERT_FALSE(c.opts.empty());
  EXPECT_TRUE(c.opts[0].vector);
  EXPECT_EQ(c.opts[0].amount, 16);
}

}  // namespace
}  // namespace kiln

// Chains of layers in channel blocks (channel_blocks.h): a small inverted
// residual block with a squeeze-and-excitation scale gives, through blocks,
// what the same model with its weights as inputs (never blocked) gives; and
// the rule that starts a chain.
#include "engine/onnx/channel_blocks.h"

#include "engine/onnx/test_builder.h"

namespace kiln {
namespace {

using namespace onnx_test;  // NOLINT: the test helpers

constexpr int64_t kIn = 32, kMid = 128;

std::vector<float> Ramp(int64_t n, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7 + seed * 13) % 17) / 16 - 0.5f;
  return v;
}

struct Weight {
  std::string name;
  Shape shape;
  int seed;
};
// The weights as initializers (Ramp values), or else as graph inputs.
template <size_t N>
void AddWeights(Builder* b, const Weight (&weights)[N], bool constant) {
  for (const Weight& w : weights) {
    std::vector<float> v = Ramp(Prod(w.shape), w.seed);
    if (constant)
      b->Init(w.name, HostTensor::FromDoubles({v.begin(), v.end()}, w.shape, dtypes::kFloat32));
    else
      b->Input(w.name, TensorProto::FLOAT, w.shape);
  }
}

const Weight kWeights[] = {{"w1", {kMid, kIn, 1, 1}, 1},
                           {"wd", {kMid, 1, 3, 3}, 2},
                           {"w2", {kIn, kMid, 1, 1}, 3}};

// x (N, 32, H, W) -> 1x1 to 64 (bias) -> Clip(0, 6) -> depthwise 3x3 (pads
// 1) -> HardSwish -> * per-channel constant -> * SE scale (the sigmoid of
// its own global average) -> 1x1 to 32 (o) -> + x -> y; also z = Softmax of
// o over the channels (an op outside the chain, reading the NCHW copy) and
// p = GlobalAveragePool(y). The weights are initializers, or
// else inputs. With `outside`, a Softmax also reads the first convolution's
// output.
std::unique_ptr<OnnxModel> BlockModel(bool constant_weights, bool outside = false) {
  Builder b;
  b.Input("x", TensorProto::FLOAT, {-1, kIn, -1, -1}).Output("y").Output("z").Output("p");
  if (outside) b.Output("f");
  AddWeights(&b, kWeights, constant_weights);
  std::vector<float> bias = Ramp(kMid, 4), scale = Ramp(kMid, 5);
  b.Init("b1", HostTensor::FromDoubles({bias.begin(), bias.end()}, {kMid}, dtypes::kFloat32));
  b.Init("s", HostTensor::FromDoubles({scale.begin(), scale.end()}, {kMid, 1, 1}, dtypes::kFloat32));
  b.Init("lo", HostTensor::FromDoubles({0}, {}, dtypes::kFloat32));
  b.Init("hi", HostTensor::FromDoubles({6}, {}, dtypes::kFloat32));
  b.Node("Conv", {"x", "w1", "b1"}, {"e"});
  b.Node("Clip", {"e", "lo", "hi"}, {"r"});
  onnx::NodeProto* dw = b.Node("Conv", {"r", "wd"}, {"d"});
  AttrInts(dw, "pads", {1, 1, 1, 1});
  AttrInt(dw, "group", kMid);
  b.Node("HardSwish", {"d"}, {"h"});
  b.Node("Mul", {"h", "s"}, {"m"});
  b.Node("GlobalAveragePool", {"m"}, {"g"});
  b.Node("Sigmoid", {"g"}, {"q"});
  b.Node("Mul", {"m", "q"}, {"se"});
  b.Node("Conv", {"se", "w2"}, {"o"});
  b.Node("Add", {"o", "x"}, {"y"});
  AttrInt(b.Node("Softmax", {"o"}, {"z"}), "axis", 1);
  b.Node("GlobalAveragePool", {"y"}, {"p"});
  if (outside) AttrInt(b.Node("Softmax", {"e"}, {"f"}), "axis", 1);
  return Load(b);
}

// On a 7 x 7 map the first 1x1 convolution starts a chain (its NCHW kernel
// would fill 49 of 64 lanes; 128 products per copied input element, and its
// readers keep the blocks) through the depthwise one, the elementwise ops,
// the SE scale and the second 1x1 one: three weights laid out once. So on a
// 16 x 16 map (256 pixels, every lane used): the convolution expands the
// channels and its readers keep the blocks. Not when an op outside the
// chain also reads the first convolution's output (32 -> 128 channels do
// not pay for both copies).
TEST(ChannelBlocksTest, AChainGivesWhatThePlainModelGives) {
  auto blocked = BlockModel(true), plain = BlockModel(false);
  ASSERT_TRUE(blocked && plain);
  std::vector<Tensor> weights;
  for (const Weight& w : kWeights) weights.push_back(F(Ramp(Prod(w.shape), w.seed), w.shape));
  struct Case {
    Shape x;
    size_t derived;
    bool outside;
  } cases[] = {{{1, kIn, 7, 7}, 3, false},
               {{2, kIn, 14, 14}, 3, false},
               {{1, kIn, 16, 16}, 3, false},
               {{1, kIn, 7, 7}, 0, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.x[2] << (c.outside ? " outside" : ""));
    auto fresh = BlockModel(true, c.outside);
    if (c.outside) plain = BlockModel(false, true);
    Tensor x = F(Ramp(Prod(c.x), 6), c.x);
    std::vector<Tensor> in = {x};
    in.insert(in.end(), weights.begin(), weights.end());
    for (size_t out = 0; out < (c.outside ? 4u : 3u); ++out) {
      SCOPED_TRACE(out);
      ExpectNear(RunOne(*fresh, {x}, out), RunOne(*plain, in, out), 1e-4, 1e-4);
    }
    EXPECT_EQ(fresh->derived_weights(), c.derived);
  }
  EXPECT_EQ(plain->derived_weights(), 0u);
}

// y = GlobalAveragePool(1x1 to 16 of Clip(depthwise 3x3 of Clip(3x3 stride-2
// stem, 3 -> 24 channels))), the weights initializers or else inputs: the
// stem writes blocks (its readers keep them), so does the rest; three
// weights laid out, the plain model's values.
std::unique_ptr<OnnxModel> StemModel(bool constant_weights) {
  Builder b;
  b.Input("x", TensorProto::FLOAT, {-1, 3, -1, -1}).Output("y");
  const Weight weights[] = {{"ws", {24, 3, 3, 3}, 1}, {"wd", {24, 1, 3, 3}, 2}, {"wp", {16, 24, 1, 1}, 3}};
  AddWeights(&b, weights, constant_weights);
  b.Init("lo", HostTensor::FromDoubles({0}, {}, dtypes::kFloat32));
  b.Init("hi", HostTensor::FromDoubles({6}, {}, dtypes::kFloat32));
  onnx::NodeProto* stem = b.Node("Conv", {"x", "ws"}, {"s"});
  AttrInts(stem, "pads", {1, 1, 1, 1});
  AttrInts(stem, "strides", {2, 2});
  b.Node("Clip", {"s", "lo", "hi"}, {"r"});
  onnx::NodeProto* dw = b.Node("Conv", {"r", "wd"}, {"d"});
  AttrInts(dw, "pads", {1, 1, 1, 1});
  AttrInt(dw, "group", 24);
  b.Node("Clip", {"d", "lo", "hi"}, {"q"});
  b.Node("Conv", {"q", "wp"}, {"p"});
  b.Node("GlobalAveragePool", {"p"}, {"y"});
  return Load(b);
}

TEST(ChannelBlocksTest, AStemWritesBlocks) {
  auto blocked = StemModel(true), plain = StemModel(false);
  ASSERT_TRUE(blocked && plain);
  const Shape xs = {2, 3, 17, 20};
  Tensor x = F(Ramp(Prod(xs), 4), xs);
  std::vector<double> got = RunOne(*blocked, {x});
  EXPECT_EQ(blocked->derived_weights(), 3u);
  ExpectNear(got,
             RunOne(*plain, {x, F(Ramp(24 * 27, 1), {24, 3, 3, 3}), F(Ramp(24 * 9, 2), {24, 1, 3, 3}),
                             F(Ramp(16 * 24, 3), {16, 24, 1, 1})}),
             1e-4, 1e-4);
}

// A residual stage of dense convolutions: y = GlobalAveragePool(AveragePool
// 2x2 of Pad(Relu(3x3 stride-2 to 40 of r))), r = Relu(a + 3x3(Relu(3x3(a)))),
// a = MaxPool 3x3 stride 2 of Relu(7x7 stride-2 stem to 32). The stem
// writes blocks (its readers keep them through the pool), the two 3x3 ones
// run as Winograd in blocks, the strided one directly (40 channels: a
// partial block), the Pad of its spatial dims in blocks; four weights laid
// out, the plain model's values.
std::unique_ptr<OnnxModel> ResidualModel(bool constant_weights) {
  Builder b;
  b.Input("x", TensorProto::FLOAT, {-1, 3, -1, -1}).Output("y");
  const Weight weights[] = {{"ws", {32, 3, 7, 7}, 1},
                            {"w1", {32, 32, 3, 3}, 2},
                            {"w2", {32, 32, 3, 3}, 3},
                            {"w3", {40, 32, 3, 3}, 4}};
  AddWeights(&b, weights, constant_weights);
  auto conv = [&](const std::string& in, const std::string& w, const std::string& out, int64_t k,
                  int64_t stride) {
    onnx::NodeProto* n = b.Node("Conv", {in, w}, {out});
    AttrInts(n, "pads", {k / 2, k / 2, k / 2, k / 2});
    AttrInts(n, "strides", {stride, stride});
  };
  conv("x", "ws", "s", 7, 2);
  b.Node("Relu", {"s"}, {"sr"});
  onnx::NodeProto* pool = b.Node("MaxPool", {"sr"}, {"a"});
  AttrInts(pool, "kernel_shape", {3, 3});
  AttrInts(pool, "strides", {2, 2});
  AttrInts(pool, "pads", {1, 1, 1, 1});
  conv("a", "w1", "c1", 3, 1);
  b.Node("Relu", {"c1"}, {"r1"});
  conv("r1", "w2", "c2", 3, 1);
  b.Node("Add", {"c2", "a"}, {"sum"});
  b.Node("Relu", {"sum"}, {"r"});
  conv("r", "w3", "c3", 3, 2);
  b.Node("Relu", {"c3"}, {"r3"});
  b.Init("pads", HostTensor::FromDoubles({0, 0, 1, 0, 0, 0, 1, 1}, {8}, dtypes::kInt64));
  b.Node("Pad", {"r3", "pads"}, {"r3p"});
  onnx::NodeProto* avg = b.Node("AveragePool", {"r3p"}, {"p"});
  AttrInts(avg, "kernel_shape", {2, 2});
  AttrInts(avg, "strides", {2, 2});
  b.Node("GlobalAveragePool", {"p"}, {"y"});
  return Load(b);
}

TEST(ChannelBlocksTest, DenseConvolutionsAndPoolsContinueTheChain) {
  auto blocked = ResidualModel(true), plain = ResidualModel(false);
  ASSERT_TRUE(blocked && plain);
  const Shape xs = {2, 3, 64, 60};
  Tensor x = F(Ramp(Prod(xs), 5), xs);
  Tensor::ConvOptions o;
  o.padding = {{1, 1}, {1, 1}};
  EXPECT_TRUE(Tensor::WinogradPays({2, 32, 16, 15}, {32, 32, 3, 3}, o));
  std::vector<double> got = RunOne(*blocked, {x});
  EXPECT_EQ(blocked->derived_weights(), 4u);
  ExpectNear(got,
             RunOne(*plain, {x, F(Ramp(32 * 3 * 49, 1), {32, 3, 7, 7}),
                             F(Ramp(32 * 32 * 9, 2), {32, 32, 3, 3}),
                             F(Ramp(32 * 32 * 9, 3), {32, 32, 3, 3}),
                             F(Ramp(40 * 32 * 9, 4), {40, 32, 3, 3})}),
             1e-4, 1e-4);
}

// A dense block: c = Concat(a, 3x3 to 32 of a), a = Relu(1x1 to 64 of x);
// d = 1x1 to 40 of Relu(BatchNormalization(c)); y = GlobalAveragePool of
// Concat(c, d) (ending in a partial block), z = GlobalMaxPool(d). The
// chain starts at the first convolution (every reader within one more
// convolution keeps the blocks) and keeps its blocks through both
// concatenations, the batch norm and the pools; three weights laid out.
std::unique_ptr<OnnxModel> DenseBlockModel(bool constant_weights) {
  Builder b;
  b.Input("x", TensorProto::FLOAT, {-1, 32, -1, -1}).Output("y").Output("z");
  const Weight weights[] = {{"w1", {64, 32, 1, 1}, 1}, {"w2", {32, 64, 3, 3}, 2}, {"w3", {40, 96, 1, 1}, 3}};
  AddWeights(&b, weights, constant_weights);
  for (auto [name, seed] : {std::pair<const char*, int>{"scale", 4}, {"bias", 5}, {"mean", 6}, {"var", 7}}) {
    std::vector<float> v = Ramp(96, seed);
    if (std::string(name) == "var")
      for (float& f : v) f += 1.0f;
    b.Init(name, HostTensor::FromDoubles({v.begin(), v.end()}, {96}, dtypes::kFloat32));
  }
  b.Node("Conv", {"x", "w1"}, {"a0"});
  b.Node("Relu", {"a0"}, {"a"});
  AttrInts(b.Node("Conv", {"a", "w2"}, {"g"}), "pads", {1, 1, 1, 1});
  AttrInt(b.Node("Concat", {"a", "g"}, {"c"}), "axis", 1);
  b.Node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"n"});
  b.Node("Relu", {"n"}, {"r"});
  b.Node("Conv", {"r", "w3"}, {"d"});
  AttrInt(b.Node("Concat", {"c", "d"}, {"e"}), "axis", 1);
  b.Node("GlobalAveragePool", {"e"}, {"y"});
  b.Node("GlobalMaxPool", {"d"}, {"z"});
  return Load(b);
}

TEST(ChannelBlocksTest, ConcatenationsAndBatchNormsKeepTheBlocks) {
  auto blocked = DenseBlockModel(true), plain = DenseBlockModel(false);
  ASSERT_TRUE(blocked && plain);
  const Shape xs = {2, 32, 9, 8};
  Tensor x = F(Ramp(Prod(xs), 6), xs);
  std::vector<Tensor> in = {x, F(Ramp(64 * 32, 1), {64, 32, 1, 1}), F(Ramp(32 * 64 * 9, 2), {32, 64, 3, 3}),
                            F(Ramp(40 * 96, 3), {40, 96, 1, 1})};
  for (size_t out = 0; out < 2; ++out) {
    SCOPED_TRACE(out);
    ExpectNear(RunOne(*blocked, {x}, out), RunOne(*plain, in, out), 1e-4, 1e-4);
  }
  EXPECT_EQ(blocked->derived_weights(), 3u);
}

// Concatenations in blocks: of blocked parts, the last one partial (its
// NCHW copy the concatenation's values); a part not in blocks is copied in
// only when the result's readers keep the blocks; a partial block before
// the last part, or no blocked part, leaves the NCHW concatenation.
TEST(ChannelBlocksTest, ConcatenationsOfBlocks) {
  Tensor a = F(Ramp(32 * 6, 1), {1, 32, 2, 3}), b = F(Ramp(24 * 6, 2), {1, 24, 2, 3});
  OnnxValue va = BlockedValue(CopyIntoBlocks(a), 32), vb = BlockedValue(CopyIntoBlocks(b), 24);
  OnnxValue pa = OnnxValue::FromTensor(a), pb = OnnxValue::FromTensor(b);
  auto yes = [] { return true; };
  auto no = [] { return false; };
  std::optional<OnnxValue> cat = ConcatInBlocks({&va, &vb}, no);
  ASSERT_TRUE(cat && cat->blocked);
  EXPECT_EQ(cat->blocked->shape(), (Shape{1, 4, 2, 3, 16}));
  ExpectNear(Values(*cat->tensor), Values(Tensor::Cat({a, b}, 1)), 1e-6, 1e-6);
  EXPECT_FALSE(ConcatInBlocks({&pa, &vb}, no));
  std::optional<OnnxValue> copied = ConcatInBlocks({&pa, &vb}, yes);
  ASSERT_TRUE(copied && copied->blocked);
  ExpectNear(Values(*copied->tensor), Values(Tensor::Cat({a, b}, 1)), 1e-6, 1e-6);
  EXPECT_FALSE(ConcatInBlocks({&vb, &va}, yes));  // 24 channels before the last part
  EXPECT_FALSE(ConcatInBlocks({&pa, &pb}, yes));  // nothing blocked
}

// A convolution to one channel would multiply zeros in 15 of 16 lanes (its
// weight laid out 16x larger): it reads the chain's NCHW copy instead; one
// weight laid out (the 1x1 one that starts the chain).
TEST(ChannelBlocksTest, AFewChannelsLeaveTheBlocks) {
  auto model = [](bool constant_weights) {
    Builder b;
    b.Input("x", TensorProto::FLOAT, {-1, 32, -1, -1}).Output("y");
    const Weight weights[] = {{"w1", {64, 32, 1, 1}, 1}, {"w2", {1, 64, 3, 3}, 2}};
    AddWeights(&b, weights, constant_weights);
    b.Node("Conv", {"x", "w1"}, {"a0"});
    b.Node("Relu", {"a0"}, {"a"});
    AttrInts(b.Node("Conv", {"a", "w2"}, {"c"}), "pads", {1, 1, 1, 1});
    b.Node("GlobalAveragePool", {"c"}, {"y"});
    return Load(b);
  };
  auto blocked = model(true), plain = model(false);
  ASSERT_TRUE(blocked && plain);
  const Shape xs = {1, 32, 6, 7};
  Tensor x = F(Ramp(Prod(xs), 3), xs);
  ExpectNear(RunOne(*blocked, {x}),
             RunOne(*plain, {x, F(Ramp(64 * 32, 1), {64, 32, 1, 1}), F(Ramp(64 * 9, 2), {1, 64, 3, 3})}),
             1e-4, 1e-4);
  EXPECT_EQ(blocked->derived_weights(), 1u);
}

TEST(ChannelBlocksTest, PointwiseConvolutionsOnMapsThatWasteLanes) {
  Tensor::ConvOptions o;
  o.stride = {1, 1};
  o.dilation = {1, 1};
  o.padding = {{0, 0}, {0, 0}};
  EXPECT_TRUE(BlockablePointwise({1, 256, 14, 14}, {1024, 256, 1, 1}, o));
  EXPECT_FALSE(BlockablePointwise({1, 24, 7, 7}, {144, 24, 1, 1}, o));   // 24 channels
  EXPECT_FALSE(BlockablePointwise({1, 256, 7, 7}, {40, 256, 1, 1}, o));  // 40 channels
  EXPECT_FALSE(BlockablePointwise({1, 64, 7, 7}, {64, 64, 3, 3}, o));    // 3x3
  Tensor::ConvOptions strided = o;
  strided.stride = {2, 2};
  EXPECT_FALSE(BlockablePointwise({1, 256, 14, 14}, {512, 256, 1, 1}, strided));
  Tensor::ConvOptions padded = o;
  padded.padding = {{1, 1}, {1, 1}};
  EXPECT_FALSE(BlockablePointwise({1, 256, 14, 14}, {512, 256, 1, 1}, padded));
  EXPECT_TRUE(WastesLanes({1, 256, 14, 14}));   // 196 pixels in 224 lanes
  EXPECT_TRUE(WastesLanes({8, 512, 7, 7}));     // 49 in 64
  EXPECT_FALSE(WastesLanes({1, 256, 28, 28}));  // 784: none wasted
  EXPECT_FALSE(WastesLanes({1, 512, 13, 13}));  // 13 pixels a row: no tile
}

// Elementwise operands in blocks: a blocked value with the output's
// channels is read in its blocks; a per-channel one (padded with 1 to whole
// blocks) and a blocked value of one channel, broadcast along the channels,
// are reshaped (the latter's padded lanes must not pair with channels
// 1-15). The op on the substitutes gives the NCHW op's values.
TEST(ChannelBlocksTest, OperandsSeenInBlocks) {
  Tensor x = F(Ramp(24 * 9, 1), {1, 24, 3, 3});
  Tensor one = F(Ramp(9, 2), {1, 1, 3, 3});
  Tensor scale = F(Ramp(24, 3), {24, 1, 1});
  OnnxValue vx = BlockedValue(CopyIntoBlocks(x), 24);
  OnnxValue vone = BlockedValue(CopyIntoBlocks(one.Pad({{0, 0}, {0, 15}, {0, 0}, {0, 0}})), 1);
  OnnxValue vscale = OnnxValue::FromTensor(scale);
  EXPECT_EQ(vx.blocked->shape(), (Shape{1, 2, 3, 3, 16}));
  std::vector<OnnxValue> storage;
  std::vector<const OnnxValue*> in;
  int64_t channels = 0;
  ASSERT_TRUE(SubstituteChannelBlocks("Mul", {&vx, &vone, &vscale}, TestEngine(), "CPU",
                                      &storage, &in, &channels));
  EXPECT_EQ(channels, 24);
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(in[0]->tensor->shape(), (Shape{1, 2, 3, 3, 16}));
  EXPECT_EQ(in[1]->tensor->shape(), (Shape{1, 1, 3, 3, 1}));
  EXPECT_EQ(in[2]->tensor->shape(), (Shape{1, 2, 1, 1, 16}));
  Tensor got = *in[0]->tensor * *in[1]->tensor * *in[2]->tensor;
  Tensor nchw = *BlockedValue(got, 24).tensor;
  ExpectNear(Values(nchw), Values(x * one * scale), 1e-6, 1e-6);
  // Nothing blocked: nothing to substitute; a division of partial blocks
  // could divide a padded lane by 0.
  OnnxValue plain = OnnxValue::FromTensor(x);
  EXPECT_FALSE(SubstituteChannelBlocks("Mul", {&plain, &vscale}, TestEngine(), "CPU", &storage,
                                       &in, &channels));
  EXPECT_FALSE(SubstituteChannelBlocks("Div", {&vscale, &vx}, TestEngine(), "CPU", &storage, &in,
                                       &channels));
}

TEST(ChannelBlocksTest, ElementwiseOpsThatTreatEveryElementAlike) {
  for (const char* op : {"Add", "Mul", "Relu", "Clip", "HardSwish", "Sigmoid", "PRelu"})
    EXPECT_TRUE(BlockedElementwise(op)) << op;
  for (const char* op : {"Softmax", "Concat", "Reshape", "BatchNormalization", "MaxPool"})
    EXPECT_FALSE(BlockedElementwise(op)) << op;
}

}  // namespace
}  // namespace kiln

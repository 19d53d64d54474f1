// Weights of the model's own constants laid out once for the CPU kernels
// (DerivedWeights): Winograd, taps outermost, output channels innermost,
// panels; each gives what the weight read as an input gives.
#include "engine/onnx/derived_weights.h"

#include "engine/onnx/test_builder.h"

namespace kiln {
namespace {

using namespace onnx_test;  // NOLINT: the test helpers

constexpr int64_t kC = 32;  // the fewest channels Tensor::WinogradPays takes

std::vector<float> Ramp(int64_t n, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7 + seed * 13) % 17) / 8 - 1;
  return v;
}

// y = Conv(x, w, b), pads 1; w and b initializers, or else inputs.
std::unique_ptr<OnnxModel> ConvModel(bool constant_weight) {
  Builder b;
  b.Input("x", TensorProto::FLOAT, {-1, kC, -1, -1}).Output("y");
  std::vector<float> wv = Ramp(kC * kC * 9, 1);
  if (constant_weight)
    b.Init("w", HostTensor::FromDoubles({wv.begin(), wv.end()}, {kC, kC, 3, 3}, dtypes::kFloat32));
  else
    b.Input("w", TensorProto::FLOAT, {kC, kC, 3, 3});
  std::vector<float> bv = Ramp(kC, 2);
  b.Init("b", HostTensor::FromDoubles({bv.begin(), bv.end()}, {kC}, dtypes::kFloat32));
  AttrInts(b.Node("Conv", {"x", "w", "b"}, {"y"}), "pads", {1, 1, 1, 1});
  return Load(b);
}

TEST(DerivedWeightsTest, WinogradConvolutionOfAConstantWeight) {
  auto wino = ConvModel(true), direct = ConvModel(false);
  ASSERT_TRUE(wino && direct);
  Tensor w = F(Ramp(kC * kC * 9, 1), {kC, kC, 3, 3});
  Engine* e = TestEngine();
  uint64_t kernels[3];
  // 16 x 16 (64 tiles, 8 a row) and an odd 2 x 9 x 17 batch (2 x 5 x 9
  // tiles, the last tile row and column half outside): one transformed
  // weight serves both shapes.
  const Shape shapes[] = {{1, kC, 16, 16}, {2, kC, 9, 17}, {1, kC, 16, 16}};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    Tensor x = F(Ramp(Prod(shapes[i]), 3 + i % 2), shapes[i]);
    ASSERT_TRUE(x.Realize().ok());
    uint64_t before = e->stats().kernels_run;
    std::vector<double> got = RunOne(*wino, {x});
    kernels[i] = e->stats().kernels_run - before;
    EXPECT_EQ(wino->derived_weights(), 1u);
    ExpectNear(got, RunOne(*direct, {x, w}), 1e-4, 1e-4);
  }
  // The transform runs on the host, once: no run has a kernel more than
  // the same shape later.
  EXPECT_EQ(kernels[0], kernels[2]);
  // A weight that is an input is never derived from (it may change per call).
  EXPECT_EQ(direct->derived_weights(), 0u);
}

// Too few tiles (a 4 x 4 map: 4), or rows of fewer than 8 tiles with 32
// channels each side (a 12 x 12 map): direct.
TEST(DerivedWeightsTest, SmallConvolutionsStayDirect) {
  auto wino = ConvModel(true);
  ASSERT_TRUE(wino);
  RunOne(*wino, {F(Ramp(kC * 16, 0), {1, kC, 4, 4})});
  EXPECT_EQ(wino->derived_weights(), 0u);
  RunOne(*wino, {F(Ramp(kC * 144, 0), {1, kC, 12, 12})});
  EXPECT_EQ(wino->derived_weights(), 0u);
  RunOne(*wino, {F(Ramp(kC * 256, 0), {1, kC, 16, 16})});
  EXPECT_EQ(wino->derived_weights(), 1u);
}

// y = Conv(x, w), dilations and pads `rate`, 8 -> 4 channels (too few for
// Winograd); w an initializer or else an input.
std::unique_ptr<OnnxModel> DilatedConvModel(int64_t rate, bool constant_weight) {
  Builder b;
  b.Input("x", TensorProto::FLOAT, {1, 8, -1, -1}).Output("y");
  std::vector<float> wv = Ramp(4 * 8 * 9, 4);
  if (constant_weight)
    b.Init("w", HostTensor::FromDoubles({wv.begin(), wv.end()}, {4, 8, 3, 3}, dtypes::kFloat32));
  else
    b.Input("w", TensorProto::FLOAT, {4, 8, 3, 3});
  onnx::NodeProto* n = b.Node("Conv", {"x", "w"}, {"y"});
  AttrInts(n, "pads", {rate, rate, rate, rate});
  AttrInts(n, "dilations", {rate, rate});
  return Load(b);
}

// A convolution most of whose tap products read padding (rate 5 or 9 on an
// 8 x 8 map: Tensor::PaddingTapFraction 0.66, 0.89) reads its constant
// weight laid out taps outermost, derived once; rate 3 (0.44) reads the
// model's layout. The values are the weight-as-input model's.
TEST(DerivedWeightsTest, MostlyPaddedConvolutionsReadTapsOutermost) {
  const Shape xs = {1, 8, 8, 8};
  Tensor x = F(Ramp(Prod(xs), 5), xs), w = F(Ramp(4 * 8 * 9, 4), {4, 8, 3, 3});
  for (auto [rate, derived] : {std::pair<int64_t, size_t>{5, 1}, {9, 1}, {3, 0}}) {
    SCOPED_TRACE(rate);
    auto constant = DilatedConvModel(rate, true), input = DilatedConvModel(rate, false);
    ASSERT_TRUE(constant && input);
    std::vector<double> got = RunOne(*constant, {x});
    EXPECT_EQ(constant->derived_weights(), derived);
    ExpectNear(got, RunOne(*input, {x, w}), 1e-5, 1e-5);
    EXPECT_EQ(input->derived_weights(), 0u);
  }
}

// y = Conv(x, w), kernel k x k, stride `stride`, pads k / 2, 3 -> 32
// channels (an image stem); w an initializer or else an input.
std::unique_ptr<OnnxModel> StemModel(int64_t k, int64_t stride, bool constant_weight) {
  Builder b;
  b.Input("x", TensorProto::FLOAT, {-1, 3, -1, -1}).Output("y");
  std::vector<float> wv = Ramp(32 * 3 * k * k, 6);
  if (constant_weight)
    b.Init("w", HostTensor::FromDoubles({wv.begin(), wv.end()}, {32, 3, k, k}, dtypes::kFloat32));
  else
    b.Input("w", TensorProto::FLOAT, {32, 3, k, k});
  onnx::NodeProto* n = b.Node("Conv", {"x", "w"}, {"y"});
  AttrInts(n, "pads", {k / 2, k / 2, k / 2, k / 2});
  AttrInts(n, "strides", {stride, stride});
  return Load(b);
}

// A stride-2 convolution over 3 channels with 64+ products per output (a
// 7x7 stem: 147) reads its constant weight laid out output channels
// innermost, derived once, for every input shape; a 3x3 one (27 products)
// and a stride-1 7x7 one read the model's layout. The values are the
// weight-as-input model's.
TEST(DerivedWeightsTest, StemConvolutionsReadOutputChannelsInnermost) {
  struct Case {
    int64_t k, stride;
    size_t derived;
  } cases[] = {{7, 2, 1}, {3, 2, 0}, {7, 1, 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.k << "x" << c.k << " stride " << c.stride);
    auto constant = StemModel(c.k, c.stride, true), input = StemModel(c.k, c.stride, false);
    ASSERT_TRUE(constant && input);
    Tensor w = F(Ramp(32 * 3 * c.k * c.k, 6), {32, 3, c.k, c.k});
    for (const Shape& xs : {Shape{1, 3, 21, 75}, Shape{2, 3, 19, 17}}) {
      Tensor x = F(Ramp(Prod(xs), 7), xs);
      std::vector<double> got = RunOne(*constant, {x});
      EXPECT_EQ(constant->derived_weights(), c.derived);
      ExpectNear(got, RunOne(*input, {x, w}), 1e-4, 1e-4);
    }
    EXPECT_EQ(input->derived_weights(), 0u);
  }
}

// y = Gemm(x, w, c) (transB = trans_b, w stored (N, K) then) or
// y = MatMul(x, w); w an initializer or else an input.
constexpr int64_t kK = 160, kN = 110;  // 70 KiB of weight, 4 panels (the last 14 wide)

std::unique_ptr<OnnxModel> LinearModel(bool gemm, bool trans_b, bool constant_weight) {
  Builder b;
  b.Input("x", TensorProto::FLOAT, gemm ? std::vector<int64_t>{-1, kK} : std::vector<int64_t>{2, -1, kK})
      .Output("y");
  const std::vector<int64_t> ws = trans_b ? std::vector<int64_t>{kN, kK} : std::vector<int64_t>{kK, kN};
  std::vector<float> wv = Ramp(kK * kN, 1);
  if (constant_weight)
    b.Init("w", HostTensor::FromDoubles({wv.begin(), wv.end()}, ws, dtypes::kFloat32));
  else
    b.Input("w", TensorProto::FLOAT, ws);
  if (!gemm) {
    b.Node("MatMul", {"x", "w"}, {"y"});
    return Load(b);
  }
  std::vector<float> cv = Ramp(kN, 2);
  b.Init("c", HostTensor::FromDoubles({cv.begin(), cv.end()}, {kN}, dtypes::kFloat32));
  AttrInt(b.Node("Gemm", {"x", "w", "c"}, {"y"}), "transB", trans_b ? 1 : 0);
  return Load(b);
}

// A matmul by a constant weight several panels wide reads it from panels
// made once (Tensor::PanelWeights), for every input shape, and gives what
// the plain matmul gives.
TEST(DerivedWeightsTest, MatmulsOfAConstantWeightReadPanels) {
  struct Case {
    bool gemm, trans_b;
  } cases[] = {{false, false}, {true, false}, {true, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << (c.gemm ? "Gemm" : "MatMul") << " transB " << c.trans_b);
    auto panels = LinearModel(c.gemm, c.trans_b, true), plain = LinearModel(c.gemm, c.trans_b, false);
    ASSERT_TRUE(panels && plain);
    Tensor w = F(Ramp(kK * kN, 1), c.trans_b ? Shape{kN, kK} : Shape{kK, kN});
    // One row first (two for MatMul's batch of 2): fewer than 4 rows stay
    // a plain matmul by a weight stored (K, N), and read panels of one
    // stored transposed (Tensor::PanelsPay).
    for (int64_t rows : {1, 5, 17}) {
      Shape xs = c.gemm ? Shape{rows, kK} : Shape{2, rows, kK};
      Tensor x = F(Ramp(Prod(xs), 3), xs);
      ExpectNear(RunOne(*panels, {x}), RunOne(*plain, {x, w}), 1e-4, 1e-4);
      EXPECT_EQ(panels->derived_weights(), rows == 1 && !c.trans_b ? 0u : 1u)
          << rows << " rows";
    }
    EXPECT_EQ(plain->derived_weights(), 0u);
  }
}

// y = MatMul(x, Identity(Identity(w))), plus MatMul(x, w) when `direct`:
// exporters write a weight shared by several layers once and Identity
// nodes for the others. The Identity of a constant is that constant to its
// derived weights: panels read through the Identity, one set of them for
// both matmuls; none when w is an input.
std::unique_ptr<OnnxModel> SharedWeightModel(bool constant_weight, bool direct) {
  Builder b;
  b.Input("x", TensorProto::FLOAT, {-1, kK}).Output("y");
  std::vector<float> wv = Ramp(kK * kN, 1);
  if (constant_weight)
    b.Init("w", HostTensor::FromDoubles({wv.begin(), wv.end()}, {kK, kN}, dtypes::kFloat32));
  else
    b.Input("w", TensorProto::FLOAT, {kK, kN});
  b.Node("Identity", {"w"}, {"w1"});
  b.Node("Identity", {"w1"}, {"w2"});
  b.Node("MatMul", {"x", "w2"}, {direct ? "b" : "y"});
  if (direct) {
    b.Node("MatMul", {"x", "w"}, {"a"});
    b.Node("Add", {"a", "b"}, {"y"});
  }
  return Load(b);
}

TEST(DerivedWeightsTest, AnIdentityOfAConstantSharesItsDerivedWeights) {
  Tensor x = F(Ramp(9 * kK, 3), {9, kK});
  for (bool direct : {false, true}) {
    SCOPED_TRACE(direct);
    auto shared = SharedWeightModel(true, direct), plain = SharedWeightModel(false, direct);
    ASSERT_TRUE(shared && plain);
    ExpectNear(RunOne(*shared, {x}), RunOne(*plain, {x, F(Ramp(kK * kN, 1), {kK, kN})}), 1e-4, 1e-4);
    EXPECT_EQ(shared->derived_weights(), 1u);
    EXPECT_EQ(plain->derived_weights(), 0u);
  }
}

// y = op(x, w, r) (LSTM or GRU), bidirectional, `hidden` cells; w and r
// initializers, or else inputs (in that order, after x).
std::unique_ptr<OnnxModel> RecurrentModel(const std::string& op, int64_t hidden, bool constant_w,
                                          bool constant_r) {
  const int64_t gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  Builder b;
  b.Input("x", TensorProto::FLOAT, {-1, -1, kK}).Output("y");
  auto weight = [&](const char* name, int64_t k, int seed, bool constant) {
    std::vector<float> v = Ramp(2 * gates * hidden * k, seed);
    if (constant)
      b.Init(name, HostTensor::FromDoubles({v.begin(), v.end()}, {2, gates * hidden, k},
                                           dtypes::kFloat32));
    else
      b.Input(name, TensorProto::FLOAT, {2, gates * hidden, k});
  };
  weight("w", kK, 1, constant_w);
  weight("r", hidden, 2, constant_r);
  NodeProto* n = b.Node(op, {"x", "w", "r"}, {"y"});
  AttrInt(n, "hidden_size", hidden);
  AttributeProto* dir = n->add_attribute();
  dir->set_name("direction");
  dir->set_type(AttributeProto::STRING);
  dir->set_s("bidirectional");
  return Load(b);
}

// A recurrent op's input projection (all steps at once) by its constant W
// reads panels of each direction's slice, like a Gemm's transposed weight.
// The key names the direction: one set of panels for both would run the
// backward pass with the forward weight. (R is an input here, so it has
// no panels.)
TEST(DerivedWeightsTest, RecurrentInputProjectionsReadPanelsPerDirection) {
  constexpr int64_t kH = 32;
  auto panels = RecurrentModel("LSTM", kH, true, false);
  auto plain = RecurrentModel("LSTM", kH, false, false);
  ASSERT_TRUE(panels && plain);
  Tensor w = F(Ramp(2 * 4 * kH * kK, 1), {2, 4 * kH, kK});
  Tensor r = F(Ramp(2 * 4 * kH * kH, 2), {2, 4 * kH, kH});
  Tensor x = F(Ramp(6 * kK, 3), {6, 1, kK});
  ExpectNear(RunOne(*panels, {x, r}), RunOne(*plain, {x, w, r}), 1e-4, 1e-4);
  EXPECT_EQ(panels->derived_weights(), 2u);
  EXPECT_EQ(plain->derived_weights(), 0u);
}

// Each step multiplies (batch, hidden) by the direction's R^T: from panels
// of R (one set a direction), as the input projection of all steps does.
// R and W are stored (N, K), so their panels pay at any size and for a
// batch of 1 (Tensor::PanelsPay): the RNN's 64 x 64 R is 16 KiB.
TEST(DerivedWeightsTest, RecurrentStepsReadPanelsOfRPerDirection) {
  for (const auto& [op, kH] :
       {std::pair{"LSTM", 80}, std::pair{"GRU", 80}, std::pair{"RNN", 64}}) {
    SCOPED_TRACE(op);
    const int64_t gates = std::string(op) == "LSTM" ? 4 : std::string(op) == "GRU" ? 3 : 1;
    auto panels = RecurrentModel(op, kH, true, true), plain = RecurrentModel(op, kH, false, false);
    ASSERT_TRUE(panels && plain);
    Tensor w = F(Ramp(2 * gates * kH * kK, 1), {2, gates * kH, kK});
    Tensor r = F(Ramp(2 * gates * kH * kH, 2), {2, gates * kH, kH});
    for (int64_t batch : {1, 5}) {
      Tensor x = F(Ramp(3 * batch * kK, 3), {3, batch, kK});
      ExpectNear(RunOne(*panels, {x}), RunOne(*plain, {x, w, r}), 1e-4, 1e-4);
      EXPECT_EQ(panels->derived_weights(), 4u) << "batch " << batch;
    }
    EXPECT_EQ(plain->derived_weights(), 0u);
  }
}

}  // namespace
}  // namespace kiln

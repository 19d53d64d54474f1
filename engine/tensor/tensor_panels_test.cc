// Matmuls by weights stored in panels (tensor_panels.cc) against plain
// matmuls on every test device, their errors, and the rule that chooses
// them.
#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

class PanelsTest : public DeviceTest {
 protected:
  Tensor T(const std::vector<float>& v, Shape s) { return Tensor::FromFloats(e, v, s, dev); }
};

TEST_P(PanelsTest, MatchesMatmul) {
  struct Case {
    Shape a;
    int64_t n;
  } cases[] = {
      {{5, 16}, 70},        // three panels, the last one 6 columns wide
      {{16}, 64},           // a vector times two whole panels
      {{2, 3, 12}, 33},     // batched rows
      {{9, 40}, 32},        // one panel
  };
  for (const Case& c : cases) {
    const int64_t k = c.a.back();
    std::vector<float> av = Ramp(Prod(c.a), 1), bv = Ramp(k * c.n, 2);
    Tensor a = T(av, c.a), b = T(bv, {k, c.n});
    std::vector<double> want = Values(a.Matmul(b));
    for (bool transposed : {false, true}) {
      SCOPED_TRACE(testing::Message() << c.n << (transposed ? " transposed" : ""));
      // The same weight stored (N, K).
      Tensor stored = transposed ? b.Transpose().Contiguous() : b;
      Tensor p = stored.PanelWeights(Tensor::kPanel, transposed);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_EQ(p.shape(), (Shape{(c.n + 31) / 32, k, 32}));
      Tensor y = a.MatmulPanels(p, c.n);
      ASSERT_TRUE(y.ok()) << y.status();
      Shape ys(c.a.begin(), c.a.end() - 1);
      ys.push_back(c.n);
      EXPECT_EQ(y.shape(), ys);
      Check(y, want);
    }
  }
}

// The host-side producers of derived weights write into (FromFill) and read
// from (ReadHost) device memory directly where it is host memory, through
// a staging block elsewhere: the same values either way.
TEST_P(PanelsTest, FromFillAndReadHost) {
  Tensor t = Tensor::FromFill(e, {3, 4}, dtypes::kFloat32, dev, [](void* dst) {
    for (int i = 0; i < 12; ++i) static_cast<float*>(dst)[i] = 1.5f * i;
  });
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<double> want;
  for (int i = 0; i < 12; ++i) want.push_back(3.0 * i);
  std::vector<float> seen;
  absl::Status read = (t * 2.0).ReadHost([&](const void* src) {
    const float* f = static_cast<const float*>(src);
    seen.assign(f, f + 12);
  });
  ASSERT_TRUE(read.ok()) << read;
  EXPECT_EQ(std::vector<double>(seen.begin(), seen.end()), want);
  EXPECT_EQ(Values(t * 2.0), want);
  // Nothing to write: no call, an empty tensor.
  Tensor empty = Tensor::FromFill(e, {0, 4}, dtypes::kFloat32, dev,
                                  [](void*) { ADD_FAILURE() << "filled an empty tensor"; });
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty.numel(), 0);
}

TEST_P(PanelsTest, BadShapesAreErrors) {
  Tensor w3 = T(Ramp(24, 1), {2, 3, 4});
  EXPECT_FALSE(w3.PanelWeights(32, false).ok());
  Tensor wi = Tensor::FromVector(e, std::vector<int32_t>(12, 1), {3, 4}, dtypes::kInt32, dev);
  EXPECT_FALSE(wi.PanelWeights(32, false).ok());
  Tensor p = T(Ramp(256, 2), {8, 32}).PanelWeights(32, false);  // (1, 8, 32)
  ASSERT_TRUE(p.ok()) << p.status();
  Tensor a = T(Ramp(14, 3), {2, 7});
  EXPECT_FALSE(a.MatmulPanels(p, 32).ok());                       // K 7 against 8
  EXPECT_FALSE(T(Ramp(16, 3), {2, 8}).MatmulPanels(p, 33).ok());  // more columns than panels
  EXPECT_FALSE(T(Ramp(16, 3), {2, 8}).MatmulPanels(p, 0).ok());
}

INSTANTIATE_TEST_SUITE_P(Devices, PanelsTest, ::testing::ValuesIn(TestDevices()),
                         DeviceParamName);

// Panels pay for weights stored (K, N) several panels wide that do not fit
// in L1, shared by a few rows.
TEST(PanelsRule, WideWeightsOutsideL1) {
  EXPECT_TRUE(Tensor::PanelsPay(49, 768, 3072, false));  // ConvNeXt-T's expansion
  EXPECT_TRUE(Tensor::PanelsPay(8, 256, 1024, false));
  EXPECT_FALSE(Tensor::PanelsPay(1, 1280, 1000, false));  // one row streams B's rows anyway
  EXPECT_FALSE(Tensor::PanelsPay(3, 1280, 1000, false));
  EXPECT_FALSE(Tensor::PanelsPay(64, 64, 64, false));     // 16 KiB: in L1
  EXPECT_FALSE(Tensor::PanelsPay(64, 4096, 32, false));   // one panel wide already
}

// A weight stored (N, K) is read along K without panels, a dot product per
// output: once it is two panels wide, its panels pay at any size for 4 rows
// or more, and for fewer when it fits in L2.
TEST(PanelsRule, TransposedWeights) {
  EXPECT_TRUE(Tensor::PanelsPay(8, 128, 128, true));  // a tanh RNN's recurrent step
  EXPECT_TRUE(Tensor::PanelsPay(64, 64, 64, true));
  EXPECT_TRUE(Tensor::PanelsPay(8, 1280, 1000, true));
  EXPECT_TRUE(Tensor::PanelsPay(1, 256, 1024, true));    // LSTM-1000's R: 1 MiB
  EXPECT_FALSE(Tensor::PanelsPay(1, 257, 1024, true));
  EXPECT_FALSE(Tensor::PanelsPay(1, 1280, 1000, true));  // a classifier at batch 1
  EXPECT_FALSE(Tensor::PanelsPay(8, 4096, 32, true));
}

}  // namespace
}  // namespace kiln

#include "engine/jit/jit.h"

#include <random>

#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

class JitTest : public ::testing::TestWithParam<std::string> {
 protected:
  Engine* e = TestEngine();
  std::string dev = GetParam();

  Tensor Random(Shape s, int seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-2, 2);
    std::vector<float> v(Prod(s));
    for (float& x : v) x = d(rng);
    return Tensor::FromFloats(e, v, s, dev);
  }
};

// A small function: matmul + bias + relu, a softmax, and a reduction.
absl::StatusOr<std::vector<Tensor>> Model(const std::vector<Tensor>& in) {
  Tensor h = (in[0].Matmul(in[1]) + in[2]).Relu();
  return std::vector<Tensor>{h.Softmax(-1), h.Sum({1})};
}

TEST_P(JitTest, ReplayEqualsPlainOverManyCalls) {
  Jit jit(Model);
  Tensor w = Random({8, 12}, 1), b = Random({12}, 2);
  for (int call = 0; call < 12; ++call) {
    Tensor x = Random({5, 8}, 100 + call);
    auto got = jit({x, w, b});
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = Model({x, w, b});
    ASSERT_TRUE(want.ok());
    ExpectNear(Values((*got)[0]), Values((*want)[0]));
    ExpectNear(Values((*got)[1]), Values((*want)[1]));
  }
  Jit::Stats s = jit.stats();
  EXPECT_EQ(s.calls, 12u);
  EXPECT_EQ(s.plain_runs, 1u);
  EXPECT_EQ(s.captures, 1u);
  EXPECT_EQ(s.replays, 10u);
  auto caps = jit.captures();
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_GE(caps[0].kernels, 2u);
  EXPECT_GT(caps[0].flops, 2 * 5 * 8 * 12 - 1);
  EXPECT_GT(caps[0].bytes, 0);
}

TEST_P(JitTest, OutputsNeverAlias) {
  Jit jit([](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    return std::vector<Tensor>{in[0] * 2.0};
  });
  std::vector<Tensor> outs;
  for (int call = 0; call < 5; ++call) {
    auto r = jit({Tensor::FromFloats(e, {float(call), 1}, {2}, dev)});
    ASSERT_TRUE(r.ok());
    outs.push_back((*r)[0]);
  }
  for (int call = 0; call < 5; ++call) ExpectNear(Values(outs[call]), {2.0 * call, 2});
}

TEST_P(JitTest, OneCapturePerShape) {
  Jit jit([](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    return std::vector<Tensor>{in[0].Sum({-1}) + 1.0};
  });
  for (int round = 0; round < 3; ++round) {
    for (int64_t n : {3, 7}) {
      std::vector<float> v(2 * n, 1.0f);
      auto r = jit({Tensor::FromFloats(e, v, {2, n}, dev)});
      ASSERT_TRUE(r.ok());
      ExpectNear(Values((*r)[0]), {n + 1.0, n + 1.0});
    }
  }
  EXPECT_EQ(jit.captures().size(), 2u);
}

TEST_P(JitTest, HostReadDuringCaptureIsAnError) {
  Jit jit([](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    Tensor s = in[0].Sum();
    auto v = s.ToDoubles();  // data-dependent decision
    if (!v.ok()) return v.status();
    return std::vector<Tensor>{(*v)[0] > 0 ? in[0] * 2.0 : in[0] * 3.0};
  });
  Tensor x = Tensor::FromFloats(e, {1, 2}, {2}, dev);
  ASSERT_TRUE(jit({x}).ok());
  auto r = jit({x});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("host"), std::string::npos);
}

TEST_P(JitTest, PassThroughAndConstantOutputs) {
  Engine* eng = e;
  std::string d = dev;
  Jit jit([eng, d](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    Tensor c = Tensor::FromFloats(eng, {7, 8}, {2}, d);
    return std::vector<Tensor>{in[0], c, in[0] + c};
  });
  std::vector<Tensor> consts;
  for (int call = 0; call < 4; ++call) {
    Tensor x = Tensor::FromFloats(e, {float(call), 0}, {2}, dev);
    auto r = jit({x});
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectNear(Values((*r)[0]), {double(call), 0});
    ExpectNear(Values((*r)[2]), {7.0 + call, 8});
    consts.push_back((*r)[1]);
  }
  ExpectNear(Values(consts[2]), {7, 8});
  ASSERT_TRUE(consts[2].Buffer().ok() && consts[3].Buffer().ok());
  EXPECT_NE(*consts[2].Buffer(), *consts[3].Buffer());
}

TEST_P(JitTest, ErrorInputsAreRejected) {
  Jit jit(Model);
  Tensor bad = Tensor::FromFloats(e, {1, 2}, {2}, dev).Reshape({3});
  EXPECT_FALSE(jit({bad, bad, bad}).ok());
}

TEST_P(JitTest, SameBufferTwiceIsHonoured) {
  Jit jit([](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    return std::vector<Tensor>{in[0] - in[1]};
  });
  Tensor a = Tensor::FromFloats(e, {1, 2}, {2}, dev);
  Tensor b = Tensor::FromFloats(e, {5, 5}, {2}, dev);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(jit({a, b}).ok());
  auto r = jit({a, a});
  ASSERT_TRUE(r.ok());
  ExpectNear(Values((*r)[0]), {0, 0});
}

INSTANTIATE_TEST_SUITE_P(Devices, JitTest, ::testing::ValuesIn(TestDevices()), DeviceParamName);

}  // namespace
}  // namespace kiln

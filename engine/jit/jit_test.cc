#include "engine/jit/jit.h"

#include <algorithm>
#include <map>
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
  EXPECT_TRUE(jit.HasCapture({dtypes::kFloat32}, {{2, 3}}, dev));
  EXPECT_TRUE(jit.HasCapture({dtypes::kFloat32}, {{2, 7}}, dev));
  EXPECT_FALSE(jit.HasCapture({dtypes::kFloat32}, {{2, 5}}, dev));
  EXPECT_FALSE(jit.HasCapture({dtypes::kInt32}, {{2, 3}}, dev));
}

// The first call of a shape runs plainly: no capture until the second.
// Captures keep their intermediates and outputs alive; the byte bound
// evicts the least recently used ones, and a capture bigger than the whole
// bound is not kept (its signature runs plainly, with correct results).
TEST_P(JitTest, CapturesAreBoundedByTheBytesTheyHold) {
  auto fn = [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    Tensor h = (in[0] * 2.0 + 1.0).Contiguous();
    return std::vector<Tensor>{h.Sum({1}), h.Exp().Max({1})};
  };
  // Sizes first, with no bound.
  Jit probe(fn);
  std::map<int64_t, size_t> held;  // rows -> bytes
  for (int64_t rows : {64, 128, 4096}) {
    for (int call = 0; call < 2; ++call) ASSERT_TRUE(probe({Random({rows, 32}, 1)}).ok());
  }
  for (const Jit::CaptureInfo& c : probe.captures()) {
    EXPECT_GE(c.held_bytes, size_t{4} * 32) << c.signature;  // at least the intermediate row
    for (int64_t rows : {64, 128, 4096})
      if (c.signature.find(absl::StrCat("[", rows, ",32]")) != std::string::npos)
        held[rows] = c.held_bytes;
  }
  ASSERT_EQ(held.size(), 3u);
  EXPECT_GT(held[128], held[64]);
  EXPECT_GE(held[4096], size_t{4096} * 32 * 4);  // h itself

  Jit::Options o;
  o.max_capture_bytes = held[64] + held[128] - 1;  // room for one of the two
  Jit jit(fn, o);
  for (int call = 0; call < 2; ++call) ASSERT_TRUE(jit({Random({64, 32}, 2)}).ok());
  ASSERT_EQ(jit.captures().size(), 1u);
  for (int call = 0; call < 2; ++call) ASSERT_TRUE(jit({Random({128, 32}, 3)}).ok());
  std::vector<Jit::CaptureInfo> caps = jit.captures();
  ASSERT_EQ(caps.size(), 1u);  // the 64-row capture made room
  EXPECT_NE(caps[0].signature.find("[128,32]"), std::string::npos) << caps[0].signature;
  EXPECT_EQ(jit.stats().evictions, 1u);

  // 4096 rows hold more than the bound alone: computed, never kept.
  for (int call = 0; call < 4; ++call) {
    Tensor x = Random({4096, 32}, 10 + call);
    auto got = jit({x});
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = fn({x});
    ASSERT_TRUE(want.ok());
    ExpectNear(Values((*got)[0]), Values((*want)[0]));
    ExpectNear(Values((*got)[1]), Values((*want)[1]));
  }
  EXPECT_EQ(jit.stats().too_big, 1u);
  EXPECT_EQ(jit.stats().replays, 0u);
  EXPECT_EQ(jit.stats().captures, 2u);  // 64 and 128 rows only
  caps = jit.captures();
  ASSERT_EQ(caps.size(), 1u);  // the 128-row capture stays
  EXPECT_NE(caps[0].signature.find("[128,32]"), std::string::npos);
  EXPECT_FALSE(jit.HasCapture({dtypes::kFloat32}, {{4096, 32}}, dev));
}

TEST_P(JitTest, HasCaptureFromTheSecondCall) {
  Jit jit([](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    return std::vector<Tensor>{in[0] * 2.0};
  });
  std::vector<float> v(6, 1.0f);
  ASSERT_TRUE(jit({Tensor::FromFloats(e, v, {2, 3}, dev)}).ok());
  EXPECT_FALSE(jit.HasCapture({dtypes::kFloat32}, {{2, 3}}, dev));
  ASSERT_TRUE(jit({Tensor::FromFloats(e, v, {2, 3}, dev)}).ok());
  EXPECT_TRUE(jit.HasCapture({dtypes::kFloat32}, {{2, 3}}, dev));
}

// A data-dependent function: the host reads a sum and picks a branch.
absl::StatusOr<std::vector<Tensor>> Branchy(const std::vector<Tensor>& in) {
  Tensor s = in[0].Sum();
  auto v = s.ToDoubles();
  if (!v.ok()) return v.status();
  Tensor y = (*v)[0] > 0 ? in[0] * 2.0 + s : in[0] * 3.0 - s;
  return std::vector<Tensor>{y, s};
}

TEST_P(JitTest, HostReadsSplitTheCaptureIntoSegments) {
  Jit jit(Branchy);
  // The same data every call: every replay reads what the recording read.
  Tensor x = Tensor::FromFloats(e, {1, 2}, {2}, dev);
  for (int call = 0; call < 5; ++call) {
    auto r = jit.Call({x});
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectNear(Values(r->outputs[0]), {5, 7});
    ExpectNear(Values(r->outputs[1]), {3});
    Jit::Path want = call == 0 ? Jit::Path::kPlain
                               : call == 1 ? Jit::Path::kCapture : Jit::Path::kReplay;
    EXPECT_EQ(r->path, want) << "call " << call;
    EXPECT_GE(r->kernels, 2u);
  }
  Jit::Stats s = jit.stats();
  EXPECT_EQ(s.captures, 1u);
  EXPECT_EQ(s.replays, 3u);
  EXPECT_EQ(s.misses, 0u);
}

TEST_P(JitTest, EachBranchOfAReadIsCapturedAndReplaysCorrectly) {
  Jit jit(Branchy);
  Tensor pos = Tensor::FromFloats(e, {1, 2}, {2}, dev);
  Tensor neg = Tensor::FromFloats(e, {-1, -3}, {2}, dev);
  for (int round = 0; round < 4; ++round) {
    for (bool p : {true, false}) {
      auto r = jit.Call({p ? pos : neg});
      ASSERT_TRUE(r.ok()) << r.status();
      if (p) ExpectNear(Values(r->outputs[0]), {5, 7});
      else ExpectNear(Values(r->outputs[0]), {1, -5});
    }
  }
  Jit::Stats s = jit.stats();
  EXPECT_EQ(s.captures, 2u);  // one path per branch
  EXPECT_EQ(s.misses, 1u);    // the first call of the second branch
  EXPECT_EQ(s.replays, 5u);
  auto caps = jit.captures();
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_EQ(caps[0].paths, 2u);
}

TEST_P(JitTest, ReadsThatDifferEveryCallFallBackToPlainRuns) {
  // The read value is the input itself: no two calls agree.
  Jit jit([](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    Tensor x = in[0];
    auto v = x.ToDoubles();
    if (!v.ok()) return v.status();
    return std::vector<Tensor>{in[0] + (*v)[0]};
  });
  for (int call = 0; call < 20; ++call) {
    Tensor x = Tensor::FromFloats(e, {float(call), 1}, {2}, dev);
    auto r = jit.Call({x});
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectNear(Values(r->outputs[0]), {2.0 * call, 1.0 + call});
  }
  Jit::Stats s = jit.stats();
  EXPECT_EQ(s.replays, 0u);
  EXPECT_LE(s.misses, 4u);  // gives up trying after a few misses
  EXPECT_GE(s.plain_runs, 15u);
}

// Several reads in a row, each feeding a shape (a NonZero-like count, then a
// gather of that many elements), with outputs written before and after them.
TEST_P(JitTest, ChainedReadsShareTheirCommonSegments) {
  Engine* eng = e;
  std::string d = dev;
  Jit jit([eng, d](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    Tensor early = in[0] * 10.0;
    auto cnt = in[0].Gt(in[0].Scalar(0)).Cast(dtypes::kFloat32).Sum().ToDoubles();
    if (!cnt.ok()) return cnt.status();
    int64_t n = static_cast<int64_t>((*cnt)[0]);
    Tensor head = in[0].Shrink({{0, std::max<int64_t>(n, 1)}}) + 1.0;
    auto m = head.Max().ToDoubles();
    if (!m.ok()) return m.status();
    return std::vector<Tensor>{early, head * (*m)[0]};
  });
  std::vector<std::vector<float>> data = {{1, 2, -1}, {3, 1, -2}, {1, 2, 3}, {1, 2, -1}};
  for (int round = 0; round < 3; ++round) {
    for (const auto& v : data) {
      auto r = jit.Call({Tensor::FromFloats(e, v, {3}, dev)});
      ASSERT_TRUE(r.ok()) << r.status();
      int64_t n = 0;
      for (float x : v) n += x > 0;
      double m = -1e9;
      for (int64_t i = 0; i < n; ++i) m = std::max<double>(m, v[i] + 1);
      std::vector<double> head;
      for (int64_t i = 0; i < n; ++i) head.push_back((v[i] + 1) * m);
      ExpectNear(Values(r->outputs[0]), {10.0 * v[0], 10.0 * v[1], 10.0 * v[2]});
      ExpectNear(Values(r->outputs[1]), head);
    }
  }
  Jit::Stats s = jit.stats();
  // Paths: {2 positives, max 3}, {2 positives, max 4}, {3 positives}: the
  // first two share the segment before the first read.
  EXPECT_EQ(s.captures, 3u);
  EXPECT_GE(s.replays, 7u);
  EXPECT_EQ(jit.captures()[0].paths, 3u);
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

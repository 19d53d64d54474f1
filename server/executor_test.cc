#include "server/executor.h"

#include <cstring>

#include "gtest/gtest.h"
#include "server/testing/fake_backend.h"

namespace kiln {
namespace {

using testing::FakeBackend;
using testing::FakeLog;
using testing::FakeOptions;

struct Fixture {
  ModelSpec spec;
  std::shared_ptr<FakeLog> log = std::make_shared<FakeLog>();
  ModelStats stats;
  RealClock clock;
  std::unique_ptr<Executor> exec;

  explicit Fixture(FakeOptions o, int64_t max_batch = 8, int instances = 1) {
    FakeBackend backend(o, log);
    spec.name = "m";
    spec.max_batch_size = max_batch;
    CompleteSpecFromModel(backend.signature(), &spec).IgnoreError();
    std::vector<std::unique_ptr<ModelRunner>> runners;
    for (int i = 0; i < instances; ++i) runners.push_back(*backend.NewRunner(RunnerOptions{}));
    Clock* c = o.clock ? static_cast<Clock*>(o.clock) : &clock;
    exec = std::make_unique<Executor>(&spec, std::move(runners), nullptr, &stats, c,
                                      Executor::Options{});
  }
};

struct Outcome {
  absl::StatusOr<InferResult> result = absl::UnknownError("not completed");
};

// A request of `rows` rows: IN0 = base + i, IN1 = 1.
RequestPtr Req(int64_t rows, float base, Outcome* out, int64_t width = 4, bool batched = true) {
  auto r = std::make_shared<InferRequest>();
  r->model = "m";
  r->batch = rows;
  for (int k = 0; k < 2; ++k) {
    InputTensor in;
    in.name = k == 0 ? "IN0" : "IN1";
    in.shape = batched ? std::vector<int64_t>{rows, width} : std::vector<int64_t>{width};
    std::vector<float> v(static_cast<size_t>(rows * width));
    for (size_t i = 0; i < v.size(); ++i) v[i] = k == 0 ? base + static_cast<float>(i) : 1.0f;
    in.owned.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    r->inputs.push_back(std::move(in));
  }
  for (auto& in : r->inputs) in.data = in.owned;
  r->shape_key = ShapeKey(r->inputs, batched);
  r->outputs = {"OUT1", "OUT0"};
  r->arrival = absl::Now();
  r->set_callback([out](absl::StatusOr<InferResult> res) { out->result = std::move(res); });
  return r;
}

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

TEST(ExecutorTest, BatchesAndSplitsRowsBackToTheirRequests) {
  Fixture f(FakeOptions{});
  Outcome o[3];
  std::vector<RequestPtr> batch = {Req(1, 100, &o[0]), Req(2, 200, &o[1]), Req(1, 300, &o[2])};
  f.exec->Execute(batch, 0);
  const float bases[3] = {100, 200, 300};
  const int64_t rows[3] = {1, 2, 1};
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(o[k].result.ok()) << o[k].result.status();
    const auto& outs = o[k].result->outputs;
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_EQ(outs[0].name, "OUT1");  // in the order asked for
    EXPECT_EQ(outs[1].name, "OUT0");
    EXPECT_EQ(outs[1].shape, std::vector<int64_t>({rows[k], 4}));
    std::vector<float> sum = Floats(outs[1].data), twice = Floats(outs[0].data);
    ASSERT_EQ(sum.size(), static_cast<size_t>(rows[k] * 4));
    for (size_t i = 0; i < sum.size(); ++i) {
      EXPECT_EQ(sum[i], bases[k] + static_cast<float>(i) + 1);
      EXPECT_EQ(twice[i], 2 * (bases[k] + static_cast<float>(i)));
    }
    EXPECT_EQ(o[k].result->timings.batch_size, 4);
  }
  absl::MutexLock l(&f.log->mu);
  EXPECT_EQ(f.log->batch_rows, std::vector<int64_t>({4}));
}

TEST(ExecutorTest, CountsJitPathsAndTracksCapturedSizes) {
  Fixture f(FakeOptions{});
  std::string key;
  for (int i = 0; i < 4; ++i) {
    Outcome o;
    auto r = Req(2, 0, &o);
    key = r->shape_key;
    f.exec->Execute({r}, 0);
    ASSERT_TRUE(o.result.ok());
  }
  Executor::Counts c = f.exec->counts();
  EXPECT_EQ(c.misses, 2u);   // plain + capture
  EXPECT_EQ(c.captures, 1u);
  EXPECT_EQ(c.hits, 2u);
  EXPECT_EQ(f.exec->CapturedSizes(0, key), std::vector<int64_t>({2}));
  inference::ModelStatistics s;
  f.stats.Fill(&s);
  EXPECT_EQ(s.execution_count(), 4u);
  EXPECT_EQ(s.inference_count(), 8u);
}

TEST(ExecutorTest, PadsToACapturedSizeUntilCapturingPaysOff) {
  FakeClock clock;  // measured costs exact: a loaded machine once padded all 20
  FakeOptions fo;
  fo.delay = absl::Milliseconds(2);  // every run costs the same: rows are cheap
  fo.clock = &clock;
  Fixture f(fo);
  for (int i = 0; i < 4; ++i) {  // capture batch size 4 (plain, capture, replays)
    Outcome o;
    f.exec->Execute({Req(4, 0, &o)}, 0);
    ASSERT_TRUE(o.result.ok());
  }
  {
    absl::MutexLock l(&f.log->mu);
    f.log->batch_rows.clear();
  }
  int padded = 0;
  for (int i = 0; i < 20; ++i) {
    Outcome o;
    f.exec->Execute({Req(3, 10, &o)}, 0);
    ASSERT_TRUE(o.result.ok()) << o.result.status();
    // Padding never leaks into the result.
    ASSERT_EQ(o.result->outputs[1].shape, std::vector<int64_t>({3, 4}));
    std::vector<float> sum = Floats(o.result->outputs[1].data);
    ASSERT_EQ(sum.size(), 12u);
    EXPECT_EQ(sum[11], 10 + 11 + 1);
    absl::MutexLock l(&f.log->mu);
    if (f.log->batch_rows.back() == 4) ++padded;
  }
  // Ski rental: padding 1 row costs ~1/4 of a run, a capture ~2 runs, so
  // about 8 batches are padded before size 3 gets its own capture.
  EXPECT_GE(padded, 4);
  EXPECT_LT(padded, 20);
  absl::MutexLock l(&f.log->mu);
  EXPECT_EQ(f.log->batch_rows.back(), 3);
  EXPECT_EQ(f.exec->counts().padded_rows, static_cast<uint64_t>(padded));
}

// The executor pads only to sizes the runner says it has captured: a
// runner whose JIT kept no capture (dropped, or a capture that failed) gets
// its batches unpadded, whatever ran before.
TEST(ExecutorTest, PadsOnlyToSizesTheRunnerHasCaptured) {
  FakeOptions fo;
  fo.delay = absl::Milliseconds(2);
  Fixture f(fo);
  for (int i = 0; i < 4; ++i) {
    Outcome o;
    f.exec->Execute({Req(4, 0, &o)}, 0);
    ASSERT_TRUE(o.result.ok());
  }
  std::string key;
  {
    Outcome o;
    auto r = Req(4, 0, &o);
    key = r->shape_key;
  }
  EXPECT_EQ(f.exec->CapturedSizes(0, key), std::vector<int64_t>({4}));
  f.log->no_captures = true;
  EXPECT_TRUE(f.exec->CapturedSizes(0, key).empty());
  {
    absl::MutexLock l(&f.log->mu);
    f.log->batch_rows.clear();
  }
  for (int i = 0; i < 5; ++i) {
    Outcome o;
    f.exec->Execute({Req(3, 0, &o)}, 0);
    ASSERT_TRUE(o.result.ok());
  }
  absl::MutexLock l(&f.log->mu);
  EXPECT_EQ(f.log->batch_rows, std::vector<int64_t>({3, 3, 3, 3, 3}));
  EXPECT_EQ(f.exec->counts().padded_rows, 0u);
}

TEST(ExecutorTest, ModelsWithoutBatchDimRunWholeInputs) {
  FakeOptions fo;
  fo.batched = false;
  Fixture f(fo, /*max_batch=*/0);
  Outcome o;
  f.exec->Execute({Req(1, 5, &o, 4, /*batched=*/false)}, 0);
  ASSERT_TRUE(o.result.ok()) << o.result.status();
  EXPECT_EQ(o.result->outputs[1].shape, std::vector<int64_t>({4}));
  EXPECT_EQ(Floats(o.result->outputs[1].data)[3], 5 + 3 + 1);
}

TEST(ExecutorTest, FailuresReachEveryRequest) {
  FakeOptions fo;
  fo.fail = true;
  Fixture f(fo);
  Outcome a, b;
  f.exec->Execute({Req(1, 0, &a), Req(1, 0, &b)}, 0);
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(b.result.status().code(), absl::StatusCode::kInternal);
}

TEST(ExecutorTest, CancelledRequestsDoNotRun) {
  Fixture f(FakeOptions{});
  Outcome a, b;
  auto ra = Req(1, 0, &a), rb = Req(1, 50, &b);
  ra->Cancel();
  f.exec->Execute({ra, rb}, 0);
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kCancelled);
  ASSERT_TRUE(b.result.ok());
  absl::MutexLock l(&f.log->mu);
  EXPECT_EQ(f.log->batch_rows, std::vector<int64_t>({1}));
}

TEST(ExecutorTest, WarmupCapturesEveryInstance) {
  Fixture f(FakeOptions{}, 8, /*instances=*/2);
  WarmupSpec w;
  w.name = "w";
  w.batch_size = 2;
  w.inputs["IN0"] = {dtypes::kFloat32, {4}, true};
  w.inputs["IN1"] = {dtypes::kFloat32, {4}, false};
  f.spec.warmups.push_back(w);
  ASSERT_TRUE(f.exec->Warmup().ok());
  EXPECT_EQ(f.exec->counts().captures, 2u);
  std::string key = "FP32[4];FP32[4];";
  EXPECT_EQ(f.exec->CapturedSizes(0, key), std::vector<int64_t>({2}));
  EXPECT_EQ(f.exec->CapturedSizes(1, key), std::vector<int64_t>({2}));
  inference::ModelStatistics s;
  f.stats.Fill(&s);
  EXPECT_EQ(s.execution_count(), 0u);  // warm-up is not an inference
}

}  // namespace
}  // namespace kiln

// RunPerf / MakePerfRequest against a fake PerfTransport: the measurement
// loop only sees the transport interface (so any protocol plugs in), counts
// errors, orders the percentiles and computes the server-side breakdown
// from the statistics deltas.
#include "clients/perf.h"

#include <atomic>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

class FakeTransport : public PerfTransport {
 public:
  // Every `fail_every`-th request fails (0: none); workers answer after `delay`.
  explicit FakeTransport(int fail_every = 0, bool refuse_workers = false)
      : fail_every_(fail_every), refuse_workers_(refuse_workers) {}
  Protocol protocol() const override { return Protocol::kGrpc; }
  absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(const std::string&,
                                                                 const std::string&) override {
    inference::ModelMetadataResponse m;
    auto* x = m.add_inputs();
    x->set_name("X");
    x->set_datatype("FP32");
    x->add_shape(-1);
    x->add_shape(4);
    auto* y = m.add_inputs();
    y->set_name("Y");
    y->set_datatype("INT64");
    y->add_shape(-1);
    y->add_shape(-1);
    return m;
  }
  absl::StatusOr<inference::ModelConfigResponse> ModelConfig(const std::string&,
                                                             const std::string&) override {
    inference::ModelConfigResponse c;
    c.mutable_config()->set_max_batch_size(8);
    return c;
  }
  // 1 ms per request on the server, 0.1 ms of it queued, 2 rows per execution.
  absl::StatusOr<inference::ModelStatisticsResponse> Statistics(const std::string&,
                                                                const std::string&) override {
    const uint64_t n = ok_.load();
    inference::ModelStatisticsResponse r;
    auto* m = r.add_model_stats();
    m->set_inference_count(2 * n);
    m->set_execution_count(n);
    m->mutable_inference_stats()->mutable_success()->set_count(n);
    m->mutable_inference_stats()->mutable_success()->set_ns(n * 1000000);
    m->mutable_inference_stats()->mutable_queue()->set_ns(n * 100000);
    return r;
  }
  absl::StatusOr<std::unique_ptr<PerfWorker>> NewWorker(
      const inference::ModelInferRequest& request) override {
    if (refuse_workers_) return absl::UnavailableError("no connection for you");
    last_request_ = request;
    return std::unique_ptr<PerfWorker>(new Worker(this));
  }
  inference::ModelInferRequest last_request_;

 private:
  class Worker : public PerfWorker {
   public:
    explicit Worker(FakeTransport* t) : t_(t) {}
    absl::Status Infer() override {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const int k = ++t_->calls_;
      if (t_->fail_every_ > 0 && k % t_->fail_every_ == 0)
        return absl::ResourceExhaustedError("queue full");
      ++t_->ok_;
      return absl::OkStatus();
    }

   private:
    FakeTransport* t_;
  };
  const int fail_every_;
  const bool refuse_workers_;
  std::atomic<int> calls_{0};
  std::atomic<uint64_t> ok_{0};
};

PerfOptions ShortRun() {
  PerfOptions o;
  o.model = "m";
  o.concurrency = {1, 2};
  o.shapes["Y"] = {3, 5};
  o.batch = 3;
  o.window = absl::Milliseconds(60);
  o.max_windows = 3;
  return o;
}

TEST(MakePerfRequestTest, ShapesFromMetadataBatchAndFlags) {
  FakeTransport t;
  auto r = MakePerfRequest(&t, ShortRun());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->inputs_size(), 2);
  EXPECT_THAT(r->inputs(0).shape(), ::testing::ElementsAre(3, 4));
  EXPECT_THAT(r->inputs(1).shape(), ::testing::ElementsAre(3, 5));
  EXPECT_EQ(r->raw_input_contents(0).size(), 3u * 4 * 4);
  EXPECT_EQ(r->raw_input_contents(1).size(), 3u * 5 * 8);
  PerfOptions o = ShortRun();
  o.shapes.clear();
  auto bad = MakePerfRequest(&t, o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("--shape Y="));
}

TEST(RunPerfTest, MeasuresEveryLevelThroughTheTransport) {
  FakeTransport t;
  PerfOptions o = ShortRun();
  auto request = MakePerfRequest(&t, o);
  ASSERT_TRUE(request.ok());
  std::vector<int> seen;
  auto levels = RunPerf(&t, *request, o, [&](const PerfLevel& l) { seen.push_back(l.concurrency); });
  ASSERT_TRUE(levels.ok()) << levels.status();
  EXPECT_THAT(seen, ::testing::ElementsAre(1, 2));
  EXPECT_EQ(t.last_request_.inputs(0).shape(0), 3);
  for (const PerfLevel& l : *levels) {
    SCOPED_TRACE(l.concurrency);
    EXPECT_GT(l.requests, 0);
    EXPECT_EQ(l.errors, 0);
    EXPECT_GT(l.throughput, 0);
    EXPECT_GE(l.p50_ms, 2.0);
    EXPECT_LE(l.p50_ms, l.p90_ms);
    EXPECT_LE(l.p90_ms, l.p95_ms);
    EXPECT_LE(l.p95_ms, l.p99_ms);
    EXPECT_EQ(l.windows, 3);
    EXPECT_DOUBLE_EQ(l.server_request_us, 1000);
    EXPECT_DOUBLE_EQ(l.server_queue_us, 100);
    EXPECT_DOUBLE_EQ(l.server_avg_batch, 2);
  }
}

TEST(RunPerfTest, CountsFailedRequests) {
  FakeTransport t(/*fail_every=*/2);
  PerfOptions o = ShortRun();
  o.concurrency = {2};
  auto request = MakePerfRequest(&t, o);
  ASSERT_TRUE(request.ok());
  auto levels = RunPerf(&t, *request, o);
  ASSERT_TRUE(levels.ok()) << levels.status();
  EXPECT_GT((*levels)[0].errors, 0);
  EXPECT_GT((*levels)[0].requests, 0);
  EXPECT_THAT((*levels)[0].first_error, HasSubstr("queue full"));
}

TEST(RunPerfTest, AWorkerThatCannotBeMadeFailsTheRun) {
  FakeTransport t(0, /*refuse_workers=*/true);
  PerfOptions o = ShortRun();
  auto request = MakePerfRequest(&t, o);
  ASSERT_TRUE(request.ok());
  auto levels = RunPerf(&t, *request, o);
  EXPECT_EQ(levels.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(levels.status().message(), HasSubstr("no connection for you"));
}

}  // namespace
}  // namespace kiln

#include "server/batcher.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

struct Recorder {
  absl::Mutex mu;
  std::vector<std::vector<RequestPtr>> batches ABSL_GUARDED_BY(mu);
  size_t count() {
    absl::MutexLock l(&mu);
    return batches.size();
  }
  // Waits (real time, bounded) until `n` batches ran.
  bool WaitFor(size_t n) {
    absl::MutexLock l(&mu);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return batches.size() >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
  }
};

RequestPtr Req(std::atomic<int>* ok, std::vector<absl::StatusCode>* codes = nullptr,
               absl::Mutex* mu = nullptr) {
  auto r = std::make_shared<InferRequest>();
  r->model = "m";
  r->shape_key = "k";
  r->set_callback([ok, codes, mu](absl::StatusOr<InferResult> res) {
    if (res.ok()) ++*ok;
    if (codes) {
      absl::MutexLock l(mu);
      codes->push_back(res.status().code());
    }
  });
  return r;
}

BatchingSpec Dynamic(absl::Duration delay) {
  BatchingSpec b;
  b.dynamic = true;
  b.max_queue_delay = delay;
  return b;
}

Batcher::ExecuteFn Exec(Recorder* rec) {
  return [rec](std::vector<RequestPtr> batch, int) {
    for (auto& r : batch) r->Complete(InferResult{});
    absl::MutexLock l(&rec->mu);
    rec->batches.push_back(std::move(batch));
  };
}

TEST(BatcherTest, WaitsForTheInjectedClock) {
  FakeClock clock;
  Recorder rec;
  std::atomic<int> ok{0};
  Batcher b(Dynamic(absl::Milliseconds(10)), 8, 1, &clock, Exec(&rec));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(b.Enqueue(Req(&ok), absl::ZeroDuration()).ok());
  absl::SleepFor(absl::Milliseconds(30));  // real time passes, fake time does not
  EXPECT_EQ(rec.count(), 0u);
  EXPECT_EQ(b.pending(), 3u);
  clock.Advance(absl::Milliseconds(10));
  ASSERT_TRUE(rec.WaitFor(1));
  {
    absl::MutexLock l(&rec.mu);
    EXPECT_EQ(rec.batches[0].size(), 3u);
  }
  EXPECT_EQ(ok.load(), 3);
  b.Stop(Batcher::StopMode::kDrain);
}

TEST(BatcherTest, DrainRunsWhatIsQueuedAndRefusesNewWork) {
  FakeClock clock;
  Recorder rec;
  std::atomic<int> ok{0};
  std::vector<size_t> pending_seen;
  Batcher b(Dynamic(absl::Hours(1)), 8, 2, &clock, Exec(&rec));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(b.Enqueue(Req(&ok), absl::ZeroDuration()).ok());
  b.Stop(Batcher::StopMode::kDrain);  // returns once everything ran
  EXPECT_EQ(ok.load(), 5);
  EXPECT_EQ(b.Enqueue(Req(&ok), absl::ZeroDuration()).code(), absl::StatusCode::kUnavailable);
}

TEST(BatcherTest, AbortFailsQueuedRequests) {
  FakeClock clock;
  Recorder rec;
  std::atomic<int> ok{0};
  absl::Mutex mu;
  std::vector<absl::StatusCode> codes;
  Batcher b(Dynamic(absl::Hours(1)), 8, 1, &clock, Exec(&rec));
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(b.Enqueue(Req(&ok, &codes, &mu), absl::ZeroDuration()).ok());
  b.Stop(Batcher::StopMode::kAbort);
  absl::MutexLock l(&mu);
  ASSERT_EQ(codes.size(), 4u);
  for (auto c : codes) EXPECT_EQ(c, absl::StatusCode::kUnavailable);
  EXPECT_EQ(ok.load(), 0);
}

TEST(BatcherTest, TimeoutInTheQueueIsUnavailable) {
  FakeClock clock;
  Recorder rec;
  std::atomic<int> ok{0};
  absl::Mutex mu;
  std::vector<absl::StatusCode> codes;
  Batcher b(Dynamic(absl::Seconds(10)), 8, 1, &clock, Exec(&rec));
  ASSERT_TRUE(b.Enqueue(Req(&ok, &codes, &mu), absl::Milliseconds(5)).ok());
  clock.Advance(absl::Milliseconds(6));
  for (int i = 0; i < 1000; ++i) {
    {
      absl::MutexLock l(&mu);
      if (!codes.empty()) break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  {
    absl::MutexLock l(&mu);
    ASSERT_EQ(codes.size(), 1u);
    EXPECT_EQ(codes[0], absl::StatusCode::kUnavailable);
  }
  b.Stop(Batcher::StopMode::kDrain);
}

TEST(BatcherTest, InstancesRunInParallel) {
  RealClock clock;
  std::atomic<int> running{0}, peak{0}, ok{0};
  absl::Notification release;
  BatchingSpec none;  // one request per batch
  Batcher b(none, 8, 3, &clock, [&](std::vector<RequestPtr> batch, int) {
    int now = ++running;
    int prev = peak.load();
    while (now > prev && !peak.compare_exchange_weak(prev, now)) {}
    release.WaitForNotificationWithTimeout(absl::Seconds(5));
    --running;
    for (auto& r : batch) r->Complete(InferResult{});
  });
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(b.Enqueue(Req(&ok), absl::ZeroDuration()).ok());
  for (int i = 0; i < 500 && peak.load() < 3; ++i) absl::SleepFor(absl::Milliseconds(2));
  EXPECT_EQ(peak.load(), 3);
  release.Notify();
  b.Stop(Batcher::StopMode::kDrain);
  EXPECT_EQ(ok.load(), 3);
}

TEST(BatcherTest, ReportsPending) {
  FakeClock clock;
  Recorder rec;
  std::atomic<int> ok{0};
  std::atomic<size_t> last{99};
  Batcher b(Dynamic(absl::Hours(1)), 8, 1, &clock, Exec(&rec),
            [&](size_t p) { last = p; });
  ASSERT_TRUE(b.Enqueue(Req(&ok), absl::ZeroDuration()).ok());
  ASSERT_TRUE(b.Enqueue(Req(&ok), absl::ZeroDuration()).ok());
  EXPECT_EQ(last.load(), 2u);
  b.Stop(Batcher::StopMode::kDrain);
  EXPECT_EQ(last.load(), 0u);
}

}  // namespace
}  // namespace kiln

#include "server/batch_queue.h"

#include "gtest/gtest.h"

namespace kiln {
namespace {

const absl::Time kT0 = absl::UnixEpoch() + absl::Hours(1);

RequestPtr Req(int64_t rows, const std::string& key = "k", int priority = 0) {
  auto r = std::make_shared<InferRequest>();
  r->model = "m";
  r->batch = rows;
  r->shape_key = key;
  r->priority = priority;
  return r;
}

BatchingSpec Dynamic(absl::Duration delay, std::vector<int64_t> preferred = {}) {
  BatchingSpec b;
  b.dynamic = true;
  b.max_queue_delay = delay;
  b.preferred = std::move(preferred);
  return b;
}

std::vector<int64_t> Rows(const std::vector<RequestPtr>& batch) {
  std::vector<int64_t> out;
  for (const auto& r : batch) out.push_back(r->batch);
  return out;
}

TEST(BatchQueueTest, WaitsForTheDelayThenSendsEverything) {
  BatchQueue q(Dynamic(absl::Milliseconds(2)), 8);
  ASSERT_TRUE(q.Push(Req(1), absl::ZeroDuration(), kT0).ok());
  ASSERT_TRUE(q.Push(Req(2), absl::ZeroDuration(), kT0 + absl::Milliseconds(1)).ok());
  auto d = q.Next(kT0 + absl::Milliseconds(1));
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wake, kT0 + absl::Milliseconds(2));  // head arrival + delay
  d = q.Next(kT0 + absl::Milliseconds(2));
  EXPECT_EQ(Rows(d.batch), std::vector<int64_t>({1, 2}));
  EXPECT_EQ(q.size(), 0u);
}

TEST(BatchQueueTest, FullBatchGoesAtOnceAndNeverExceedsMax) {
  BatchQueue q(Dynamic(absl::Seconds(10)), 4);
  for (int64_t r : {2, 1, 3, 1}) ASSERT_TRUE(q.Push(Req(r), absl::ZeroDuration(), kT0).ok());
  auto d = q.Next(kT0);
  // 2 + 1 fit, 3 does not: FIFO order is kept, the batch goes now.
  EXPECT_EQ(Rows(d.batch), std::vector<int64_t>({2, 1}));
  d = q.Next(kT0);
  EXPECT_EQ(Rows(d.batch), std::vector<int64_t>({3, 1}));
}

TEST(BatchQueueTest, LargestPreferredSizeIsSentWithoutWaiting) {
  BatchQueue q(Dynamic(absl::Seconds(10), {2, 4}), 8);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(q.Push(Req(1), absl::ZeroDuration(), kT0).ok());
  auto d = q.Next(kT0);
  EXPECT_EQ(d.batch.size(), 4u);
  d = q.Next(kT0);
  EXPECT_TRUE(d.batch.empty());  // 1 left: not preferred, delay not over
  d = q.Next(kT0 + absl::Seconds(10));
  EXPECT_EQ(d.batch.size(), 1u);
}

TEST(BatchQueueTest, OnlyEqualShapesShareABatch) {
  BatchQueue q(Dynamic(absl::ZeroDuration()), 8);
  ASSERT_TRUE(q.Push(Req(1, "a"), absl::ZeroDuration(), kT0).ok());
  ASSERT_TRUE(q.Push(Req(1, "b"), absl::ZeroDuration(), kT0).ok());
  ASSERT_TRUE(q.Push(Req(1, "a"), absl::ZeroDuration(), kT0).ok());
  auto d = q.Next(kT0);
  ASSERT_EQ(d.batch.size(), 2u);
  EXPECT_EQ(d.batch[0]->shape_key, "a");
  EXPECT_EQ(d.batch[1]->shape_key, "a");
  d = q.Next(kT0);
  ASSERT_EQ(d.batch.size(), 1u);
  EXPECT_EQ(d.batch[0]->shape_key, "b");
}

TEST(BatchQueueTest, WithoutDynamicBatchingEachRequestRunsAlone) {
  BatchingSpec b;  // dynamic = false
  BatchQueue q(b, 8);
  ASSERT_TRUE(q.Push(Req(2), absl::ZeroDuration(), kT0).ok());
  ASSERT_TRUE(q.Push(Req(3), absl::ZeroDuration(), kT0).ok());
  EXPECT_EQ(Rows(q.Next(kT0).batch), std::vector<int64_t>({2}));
  EXPECT_EQ(Rows(q.Next(kT0).batch), std::vector<int64_t>({3}));
}

TEST(BatchQueueTest, HigherPriorityFirst) {
  BatchingSpec b = Dynamic(absl::ZeroDuration());
  b.priority_levels = 3;
  b.default_priority = 3;
  BatchQueue q(b, 1);
  auto low = Req(1, "k", 0);  // default -> 3
  auto high = Req(1, "k", 1);
  auto mid = Req(1, "k", 2);
  ASSERT_TRUE(q.Push(low, absl::ZeroDuration(), kT0).ok());
  ASSERT_TRUE(q.Push(mid, absl::ZeroDuration(), kT0).ok());
  ASSERT_TRUE(q.Push(high, absl::ZeroDuration(), kT0).ok());
  EXPECT_EQ(q.Next(kT0).batch[0], high);
  EXPECT_EQ(q.Next(kT0).batch[0], mid);
  EXPECT_EQ(q.Next(kT0).batch[0], low);
  EXPECT_EQ(q.Push(Req(1, "k", 4), absl::ZeroDuration(), kT0).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BatchQueueTest, QueueFullIsUnavailable) {
  BatchingSpec b = Dynamic(absl::Seconds(1));
  b.default_policy.max_queue_size = 2;
  BatchQueue q(b, 8);
  EXPECT_TRUE(q.Push(Req(1), absl::ZeroDuration(), kT0).ok());
  EXPECT_TRUE(q.Push(Req(1), absl::ZeroDuration(), kT0).ok());
  EXPECT_EQ(q.Push(Req(1), absl::ZeroDuration(), kT0).code(), absl::StatusCode::kUnavailable);
}

TEST(BatchQueueTest, TimeoutRejectsOrDelays) {
  BatchingSpec b = Dynamic(absl::Seconds(5), {4});
  b.priority_levels = 2;
  b.default_priority = 2;
  b.level_policy[1].delay_on_timeout = true;
  b.level_policy[1].default_timeout = absl::Milliseconds(1);
  BatchQueue q(b, 8);
  auto rejected = Req(1, "k", 2);
  auto delayed = Req(1, "k", 1);
  ASSERT_TRUE(q.Push(rejected, absl::Milliseconds(3), kT0).ok());  // no default: request's own
  ASSERT_TRUE(q.Push(delayed, absl::ZeroDuration(), kT0).ok());
  EXPECT_EQ(rejected->deadline, kT0 + absl::Milliseconds(3));
  auto d = q.Next(kT0);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wake, kT0 + absl::Milliseconds(1));  // the earliest deadline
  d = q.Next(kT0 + absl::Milliseconds(3));
  ASSERT_EQ(d.rejected.size(), 1u);
  EXPECT_EQ(d.rejected[0].first, rejected);
  EXPECT_EQ(d.rejected[0].second.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(delayed->delayed);
  EXPECT_EQ(q.size(), 1u);
  d = q.Next(kT0 + absl::Seconds(5));
  ASSERT_EQ(d.batch.size(), 1u);
  EXPECT_EQ(d.batch[0], delayed);
}

TEST(BatchQueueTest, RequestTimeoutOnlyShortensAnOverridableDefault) {
  BatchingSpec b = Dynamic(absl::Seconds(5));
  b.default_policy.default_timeout = absl::Milliseconds(10);
  BatchQueue q(b, 8);
  auto r = Req(1);
  ASSERT_TRUE(q.Push(r, absl::Milliseconds(1), kT0).ok());
  EXPECT_EQ(r->timeout, absl::Milliseconds(10));  // override not allowed
  b.default_policy.allow_timeout_override = true;
  BatchQueue q2(b, 8);
  auto r2 = Req(1);
  ASSERT_TRUE(q2.Push(r2, absl::Milliseconds(1), kT0).ok());
  EXPECT_EQ(r2->timeout, absl::Milliseconds(1));
  auto r3 = Req(1);
  ASSERT_TRUE(q2.Push(r3, absl::Seconds(1), kT0).ok());
  EXPECT_EQ(r3->timeout, absl::Milliseconds(10));  // may not grow
}

TEST(BatchQueueTest, CancelledRequestsAreDropped) {
  BatchQueue q(Dynamic(absl::Seconds(1)), 8);
  auto a = Req(1), b = Req(1);
  ASSERT_TRUE(q.Push(a, absl::ZeroDuration(), kT0).ok());
  ASSERT_TRUE(q.Push(b, absl::ZeroDuration(), kT0).ok());
  a->Cancel();
  auto d = q.Next(kT0, /*flush=*/true);
  ASSERT_EQ(d.rejected.size(), 1u);
  EXPECT_EQ(d.rejected[0].second.code(), absl::StatusCode::kCancelled);
  ASSERT_EQ(d.batch.size(), 1u);
  EXPECT_EQ(d.batch[0], b);
}

TEST(BatchQueueTest, TakeAllEmptiesTheQueue) {
  BatchQueue q(Dynamic(absl::Seconds(1)), 8);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.Push(Req(1), absl::ZeroDuration(), kT0).ok());
  EXPECT_EQ(q.TakeAll().size(), 3u);
  EXPECT_EQ(q.size(), 0u);
  EXPECT_TRUE(q.Next(kT0).batch.empty());
}

}  // namespace
}  // namespace kiln

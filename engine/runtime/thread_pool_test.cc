#include "engine/runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace {

// Runs ParallelFor(n) and checks that every index is covered exactly once by
// contiguous, ordered chunks, at most num_threads of them.
void CheckCoverage(ThreadPool& pool, int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::atomic<int> chunks{0};
  pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
    EXPECT_LT(begin, end);
    chunks.fetch_add(1);
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
  EXPECT_LE(chunks.load(), pool.num_threads());
  EXPECT_EQ(chunks.load(), n <= 0 ? 0 : std::min<int64_t>(n, pool.num_threads()));
}

TEST(ThreadPoolTest, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 64, 100, 1000, 4097}) {
      CheckCoverage(pool, n);
    }
  }
}

TEST(ThreadPoolTest, StdFunctionAndBalancedChunks) {
  ThreadPool pool(3);
  std::vector<std::pair<int64_t, int64_t>> seen(3, {-1, -1});
  std::function<void(int64_t, int64_t)> fn = [&](int64_t b, int64_t e) {
    int64_t c = b == 0 ? 0 : (b == 4 ? 1 : 2);
    seen[static_cast<size_t>(c)] = {b, e};
  };
  pool.ParallelFor(11, fn);  // 4 + 4 + 3
  EXPECT_EQ(seen[0], std::make_pair(int64_t{0}, int64_t{4}));
  EXPECT_EQ(seen[1], std::make_pair(int64_t{4}, int64_t{8}));
  EXPECT_EQ(seen[2], std::make_pair(int64_t{8}, int64_t{11}));
}

TEST(ThreadPoolTest, WorkersWakeAfterSleeping) {
  ThreadPool pool(2, /*spin_us=*/10);
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // workers go to sleep
    CheckCoverage(pool, 50);
  }
}

TEST(ThreadPoolTest, ConcurrentCallersAndNestedCalls) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < 300; ++i) {
        std::atomic<int64_t> sum{0};
        pool.ParallelFor(100, [&](int64_t b, int64_t e) {
          for (int64_t j = b; j < e; ++j) sum.fetch_add(j);
        });
        ASSERT_EQ(sum.load(), 4950);
        total.fetch_add(sum.load());
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(total.load(), 4 * 300 * 4950);
  // A nested call runs inline instead of deadlocking.
  std::atomic<int64_t> nested{0};
  pool.ParallelFor(6, [&](int64_t b, int64_t e) {
    pool.ParallelFor(10, [&](int64_t ib, int64_t ie) { nested.fetch_add((ie - ib) * (e - b)); });
  });
  EXPECT_EQ(nested.load(), 60);
  EXPECT_GT(pool.busy_fallbacks(), 0u);
}

// Chunk 0 (the caller) waits for chunk 1 to start: only a worker can run it.
TEST(ThreadPoolTest, ChunksRunConcurrently) {
  ThreadPool pool(2, /*spin_us=*/10);
  for (int round = 0; round < 20; ++round) {
    std::atomic<bool> started{false};
    std::atomic<bool> timed_out{false};
    pool.ParallelFor(2, [&](int64_t begin, int64_t) {
      if (begin == 1) {
        started.store(true);
        return;
      }
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!started.load()) {
        if (std::chrono::steady_clock::now() > deadline) {
          timed_out.store(true);
          return;
        }
        std::this_thread::yield();
      }
    });
    ASSERT_FALSE(timed_out.load());
    if (round % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST(ThreadPoolTest, DefaultThreads) {
  EXPECT_GE(ThreadPool::DefaultThreads(), 1);
  ThreadPool pool;
  EXPECT_EQ(pool.num_threads(), ThreadPool::DefaultThreads());
}

// Hot dispatch latency of a trivial two-way launch. Reported, not asserted
// tightly: the test machine may be shared.
TEST(ThreadPoolTest, HotDispatchLatency) {
  ThreadPool pool(2);
  std::atomic<int64_t> sink{0};
  auto fn = [&sink](int64_t b, int64_t e) { sink.fetch_add(e - b, std::memory_order_relaxed); };
  for (int i = 0; i < 2000; ++i) pool.ParallelFor(2, fn);  // warm up
  std::vector<double> samples;
  for (int rep = 0; rep < 20; ++rep) {
    const int iters = 2000;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) pool.ParallelFor(2, fn);
    auto t1 = std::chrono::steady_clock::now();
    samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  std::sort(samples.begin(), samples.end());
  std::printf("ThreadPool hot dispatch (2 threads): best %.3f us, median %.3f us per launch\n",
              samples.front(), samples[samples.size() / 2]);
  EXPECT_LT(samples.front(), 100.0);
}

}  // namespace
}  // namespace kiln

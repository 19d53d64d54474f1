#include "engine/runtime/device.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "engine/runtime/cpu_device.h"
#include "engine/runtime/interpreter.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// Host memory allocator that counts raw calls and can be told to fail.
class CountingAllocator : public Allocator {
 public:
  explicit CountingAllocator(size_t limit) : Allocator(limit) {}
  ~CountingAllocator() override { ClearCache(); }

  absl::Status CopyIn(void* dst, const void* src, size_t n) override {
    std::memcpy(dst, src, n);
    return absl::OkStatus();
  }
  absl::Status CopyOut(void* dst, const void* src, size_t n) override {
    std::memcpy(dst, src, n);
    return absl::OkStatus();
  }

  // RawAlloc / RawFree may run concurrently: atomics.
  std::atomic<int> raw_allocs{0};
  std::atomic<int> raw_frees{0};
  std::atomic<size_t> live_raw_bytes{0};
  std::atomic<size_t> capacity{SIZE_MAX};  // RawAlloc fails beyond this many live bytes

 protected:
  absl::StatusOr<void*> RawAlloc(size_t n) override {
    if (live_raw_bytes + n > capacity) return absl::ResourceExhaustedError("full");
    ++raw_allocs;
    live_raw_bytes += n;
    return std::malloc(n == 0 ? 1 : n);
  }
  void RawFree(void* p, size_t n) override {
    ++raw_frees;
    live_raw_bytes -= n;
    std::free(p);
  }
};

TEST(AllocatorTest, ReusesFreedBlockOfSameSize) {
  CountingAllocator a(1 << 20);
  void* p = *a.Alloc(1000);
  a.Free(p, 1000);
  EXPECT_EQ(a.stats().cached_bytes, 1000u);
  EXPECT_EQ(a.stats().allocated_bytes, 0u);
  void* q = *a.Alloc(1000);
  EXPECT_EQ(p, q);
  EXPECT_EQ(a.raw_allocs, 1);
  Allocator::Stats s = a.stats();
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.allocated_bytes, 1000u);
  EXPECT_EQ(s.cached_bytes, 0u);
  // A different size is not served from the cache.
  a.Free(q, 1000);
  void* r = *a.Alloc(999);
  EXPECT_EQ(a.raw_allocs, 2);
  a.Free(r, 999);
}

TEST(AllocatorTest, MostRecentlyFreedFirstAndClearCache) {
  CountingAllocator a(1 << 20);
  void* p1 = *a.Alloc(64);
  void* p2 = *a.Alloc(64);
  a.Free(p1, 64);
  a.Free(p2, 64);
  EXPECT_EQ(*a.Alloc(64), p2);
  EXPECT_EQ(*a.Alloc(64), p1);
  a.Free(p1, 64);
  a.Free(p2, 64);
  EXPECT_EQ(a.stats().cached_bytes, 128u);
  a.ClearCache();
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  EXPECT_EQ(a.raw_frees, 2);
  EXPECT_EQ(a.live_raw_bytes, 0u);
}

TEST(AllocatorTest, EvictsLeastRecentlyFreedBeyondLimit) {
  CountingAllocator a(250);
  void* p1 = *a.Alloc(100);
  void* p2 = *a.Alloc(100);
  void* p3 = *a.Alloc(100);
  a.Free(p1, 100);
  a.Free(p2, 100);
  EXPECT_EQ(a.raw_frees, 0);
  a.Free(p3, 100);  // 300 > 250: p1 (oldest) goes
  EXPECT_EQ(a.raw_frees, 1);
  EXPECT_EQ(a.stats().cached_bytes, 200u);
  std::set<void*> got = {*a.Alloc(100), *a.Alloc(100)};
  EXPECT_EQ(got, (std::set<void*>{p2, p3}));
  // Blocks larger than the limit are never cached.
  void* big = *a.Alloc(1000);
  a.Free(big, 1000);
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  EXPECT_EQ(a.raw_frees, 2);
  for (void* p : got) a.Free(p, 100);
}

TEST(AllocatorTest, FailedAllocationEvictsCacheAndRetries) {
  CountingAllocator a(1 << 20);
  void* p = *a.Alloc(600);
  a.Free(p, 600);
  a.capacity = 1000;  // 600 cached + 600 new does not fit
  absl::StatusOr<void*> q = a.Alloc(600 + 1);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(a.raw_frees, 1);
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  // Still too big after eviction: the error comes back.
  absl::StatusOr<void*> r = a.Alloc(5000);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  a.Free(*q, 601);
}

TEST(AllocatorTest, MemoryLimitRefusesAndEvictsToMakeRoom) {
  CountingAllocator a(1 << 20);
  a.set_memory_limit(3000);
  EXPECT_EQ(a.memory_limit(), 3000u);
  // One allocation beyond the limit: a Status, and nothing is allocated.
  absl::StatusOr<void*> big = a.Alloc(3001);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("memory limit of 3000 bytes"), std::string::npos)
      << big.status();
  EXPECT_EQ(a.raw_allocs, 0);
  // Cached blocks do not count against what is in use: they are evicted.
  void* p = *a.Alloc(1000);
  a.Free(p, 1000);
  void* q = *a.Alloc(2500);
  EXPECT_EQ(a.raw_frees, 1);
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  // In use 2500: 600 more is refused, 500 fits.
  EXPECT_EQ(a.Alloc(600).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(a.CheckRoom(600, "a plan").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(a.CheckRoom(500, "a plan").ok());
  EXPECT_EQ(a.stats().allocated_bytes, 2500u);
  EXPECT_EQ(a.stats().refusals, 3u);
  a.Free(q, 2500);
  a.set_memory_limit(0);  // no limit
  void* r = *a.Alloc(5000);
  a.Free(r, 5000);
}

TEST(AllocatorTest, FailedRawAllocLeavesNothingInUse) {
  CountingAllocator a(1 << 20);
  a.capacity = 100;
  EXPECT_FALSE(a.Alloc(200).ok());
  EXPECT_EQ(a.stats().allocated_bytes, 0u);
}

TEST(AllocatorTest, ConcurrentAllocFree) {
  CountingAllocator a(1 << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a, t] {
      for (int i = 0; i < 2000; ++i) {
        size_t n = 16 * (1 + (i + t) % 7);
        void* p = *a.Alloc(n);
        std::memset(p, t, n);
        a.Free(p, n);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(a.stats().allocated_bytes, 0u);
  EXPECT_EQ(a.stats().allocations, 8000u);
}

TEST(HostAllocatorTest, AlignedAndZeroBytesUnique) {
  HostAllocator a;
  void* p = *a.Alloc(0);
  void* q = *a.Alloc(0);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  EXPECT_NE(p, q);
  void* r = *a.Alloc(3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(r) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  a.Free(p, 0);
  a.Free(q, 0);
  a.Free(r, 3);
}

TEST(BufferTest, CopyInOutAndSizeErrors) {
  CpuDevice dev;
  absl::StatusOr<BufferRef> buf = dev.NewBuffer(16);
  ASSERT_TRUE(buf.ok());
  EXPECT_FALSE((*buf)->allocated());
  EXPECT_EQ((*buf)->nbytes(), 16u);
  float in[4] = {1, 2, 3, 4}, out[4] = {};
  ASSERT_TRUE((*buf)->CopyIn(in, sizeof(in)).ok());
  EXPECT_TRUE((*buf)->allocated());
  ASSERT_TRUE((*buf)->CopyOut(out, sizeof(out)).ok());
  EXPECT_EQ(std::memcmp(in, out, sizeof(in)), 0);
  // Partial copies are fine, larger ones are not.
  float two[2] = {};
  EXPECT_TRUE((*buf)->CopyOut(two, sizeof(two)).ok());
  EXPECT_EQ(two[1], 2.0f);
  char big[17] = {};
  EXPECT_EQ((*buf)->CopyIn(big, 17).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*buf)->CopyOut(big, 17).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dev.allocator().stats().allocated_bytes, 16u);
  void* ptr = *(*buf)->Ptr();
  const uint64_t id = (*buf)->id();
  buf->reset();  // returned to the allocator's cache
  EXPECT_EQ(dev.allocator().stats().allocated_bytes, 0u);
  EXPECT_EQ(dev.allocator().stats().cached_bytes, 16u);
  BufferRef again = *dev.NewBuffer(16);
  EXPECT_EQ(*again->Ptr(), ptr);
  EXPECT_NE(again->id(), id);
}

TEST(RegistryTest, CaseInsensitiveLazyAndNotFound) {
  std::unique_ptr<DeviceRegistry> reg = DeviceRegistry::WithDefaults();
  EXPECT_EQ(reg->Names(), (std::vector<std::string>{"CPU", "CUDA", "INTERP", "OPENCL"}));
  absl::StatusOr<Device*> a = reg->Get("cpu");
  absl::StatusOr<Device*> b = reg->Get("CPU");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ((*a)->name(), "CPU");
  EXPECT_EQ((*a)->renderer(), "c");
  absl::StatusOr<Device*> interp = reg->Get("Interp");
  ASSERT_TRUE(interp.ok());
  EXPECT_EQ((*interp)->renderer(), "bytecode");
  absl::StatusOr<Device*> missing = reg->Get("TPU");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("TPU"), std::string::npos);
}

TEST(RegistryTest, FactoryCalledOnceAndErrorsPropagate) {
  DeviceRegistry reg;
  int calls = 0;
  reg.Register("Fake", [&calls]() -> absl::StatusOr<std::unique_ptr<Device>> {
    ++calls;
    return std::unique_ptr<Device>(std::make_unique<InterpreterDevice>());
  });
  reg.Register("broken", []() -> absl::StatusOr<std::unique_ptr<Device>> {
    return absl::UnavailableError("no driver");
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&reg] { ASSERT_TRUE(reg.Get("fake").ok()); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls, 1);
  absl::StatusOr<Device*> broken = reg.Get("BROKEN");
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(broken.status().message().find("no driver"), std::string::npos);
}

}  // namespace
}  // namespace kiln

#include "engine/runtime/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "engine/base/flags.h"

namespace kiln {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

thread_local ThreadPool* scoped_pool = nullptr;

}  // namespace

ThreadPool::Scope::Scope(ThreadPool* pool) : previous_(scoped_pool) { scoped_pool = pool; }
ThreadPool::Scope::~Scope() { scoped_pool = previous_; }
ThreadPool* ThreadPool::ScopedOr(ThreadPool* fallback) {
  return scoped_pool != nullptr ? scoped_pool : fallback;
}
const ThreadPool* ThreadPool::ScopedOr(const ThreadPool* fallback) {
  return scoped_pool != nullptr ? scoped_pool : fallback;
}

int ThreadPool::DefaultThreads() {
  if (Env().threads > 0) return Env().threads;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

ThreadPool::ThreadPool(int num_threads, int spin_us)
    : num_threads_(num_threads > 0 ? num_threads : DefaultThreads()),
      spin_ns_(int64_t{std::max(spin_us, 0)} * 1000),
      slots_(new Slot[std::max(num_threads_ - 1, 1)]) {
  threads_.reserve(num_threads_ - 1);
  for (int i = 0; i + 1 < num_threads_; ++i) {
    threads_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  for (int i = 0; i + 1 < num_threads_; ++i) {
    std::lock_guard<std::mutex> lock(mu_);
    slots_[i].cv.notify_all();
  }
  for (std::thread& t : threads_) t.join();
}

uint64_t ThreadPool::WaitForWork(Slot& slot, uint64_t seen) {
  // Hot phase: poll our own cache line.
  const int64_t start = NowNs();
  while (true) {
    for (int i = 0; i < 64; ++i) {
      uint64_t g = slot.gen.load(std::memory_order_acquire);
      if (g != seen) return g;
      CpuRelax();
    }
    if (stop_.load(std::memory_order_relaxed)) return 0;
    if (NowNs() - start > spin_ns_) break;
  }
  // Cold phase: sleep. `sleeping` and `gen` are both seq_cst, so either the
  // dispatcher sees sleeping == true and notifies (under mu_), or we see the
  // new generation here.
  std::unique_lock<std::mutex> lock(mu_);
  slot.sleeping.store(true, std::memory_order_seq_cst);
  uint64_t g;
  while ((g = slot.gen.load(std::memory_order_seq_cst)) == seen &&
         !stop_.load(std::memory_order_seq_cst)) {
    slot.cv.wait(lock);
  }
  slot.sleeping.store(false, std::memory_order_relaxed);
  return g == seen ? 0 : g;
}

bool ThreadPool::Claim(Slot& slot, uint64_t g) {
  uint64_t c = slot.claim.load(std::memory_order_acquire);
  return c < g && slot.claim.compare_exchange_strong(c, g, std::memory_order_acq_rel);
}

void ThreadPool::WorkerLoop(int index) {
  Slot& slot = slots_[index];
  uint64_t seen = 0;
  while (true) {
    uint64_t g = WaitForWork(slot, seen);
    if (g == 0) return;
    seen = g;
    // The task fields were written before `gen` was set to g, and cannot be
    // rewritten before this chunk is finished (the dispatcher waits for it).
    if (!Claim(slot, g)) continue;  // the dispatcher ran it already
    slot.fn(slot.ctx, slot.begin, slot.end);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::Run(int64_t n, RangeFn fn, void* ctx) {
  if (n <= 0) return;
  const int64_t chunks = std::min<int64_t>(num_threads_, n);
  if (chunks <= 1) {
    fn(ctx, 0, n);
    return;
  }
  if (busy_.exchange(true, std::memory_order_acquire)) {
    busy_fallbacks_.fetch_add(1, std::memory_order_relaxed);
    fn(ctx, 0, n);
    return;
  }
  // Chunk c covers [c*base + min(c, rem), ...): the first `rem` chunks get
  // one extra element.
  const int64_t base = n / chunks;
  const int64_t rem = n % chunks;
  auto chunk_begin = [&](int64_t c) { return c * base + std::min(c, rem); };
  pending_.store(static_cast<int>(chunks - 1), std::memory_order_relaxed);
  for (int64_t c = 1; c < chunks; ++c) {
    Slot& slot = slots_[c - 1];
    slot.fn = fn;
    slot.ctx = ctx;
    slot.begin = chunk_begin(c);
    slot.end = chunk_begin(c + 1);
    slot.gen.store(slot.gen.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
    if (slot.sleeping.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(mu_);
      slot.cv.notify_one();
    }
  }
  fn(ctx, 0, chunk_begin(1));
  // Run the chunks that no worker has picked up yet.
  for (int64_t c = 1; c < chunks; ++c) {
    Slot& slot = slots_[c - 1];
    if (Claim(slot, slot.gen.load(std::memory_order_relaxed))) {
      fn(ctx, chunk_begin(c), chunk_begin(c + 1));
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
  // Wait for the workers: spin first (they are usually about as fast as we
  // are), then yield the core in case the machine is oversubscribed.
  int64_t spins = 0;
  while (pending_.load(std::memory_order_acquire) != 0) {
    if (++spins < 2000) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
  busy_.store(false, std::memory_order_release);
}

}  // namespace kiln

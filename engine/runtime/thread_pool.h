// ThreadPool: a persistent pool of worker threads that runs one data-parallel
// loop at a time with very low dispatch latency (kernel launches on the CPU
// device).
//
// A pool of N threads starts N-1 workers; the calling thread runs the first
// chunk itself, then runs any chunk that no worker has claimed yet (so a
// descheduled or sleeping worker never delays a launch), and then spin-waits
// for the claimed ones. Each worker spin-polls its
// own slot (with a CPU pause instruction) for `spin_us` microseconds after its
// last task, so back-to-back launches cost well under two microseconds, and
// then blocks on a condition variable so that an idle pool uses no CPU.
//
// Thread safety: ParallelFor/Run may be called from any number of threads at
// once. Only one loop uses the workers at a time; a call that finds the pool
// busy (another thread's loop, or a nested call from inside a chunk) runs its
// whole range inline on the calling thread instead of waiting, so concurrent
// and nested calls never deadlock. The function must not throw.
//
// ThreadPool::Scope names, for the thread that creates it and while it
// lives, the pool that CPU kernels launched from that thread run on instead
// of their device's (kilnd gives each model instance its own pool: its share
// of the cores). This is thread-local state, like the JIT's CaptureScope;
// scopes nest, and the innermost wins.
#ifndef KILN_ENGINE_RUNTIME_THREAD_POOL_H_
#define KILN_ENGINE_RUNTIME_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class ThreadPool {
 public:
  // The work of one chunk: fn(ctx, begin, end).
  using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end);

  // `num_threads` counts the calling thread; <= 0 means DefaultThreads().
  explicit ThreadPool(int num_threads = 0, int spin_us = 100);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // KILN_THREADS (kiln::Env().threads) when set, else the number of cores.
  static int DefaultThreads();

  int num_threads() const { return num_threads_; }

  // While alive, ScopedOr() on this thread returns `pool` (nullptr: no
  // pool, the fallback). Create and destroy on the same thread.
  class Scope {
   public:
    explicit Scope(ThreadPool* pool);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ThreadPool* const previous_;
  };
  // The pool of this thread's innermost Scope, or `fallback` (a device's
  // own pool) when it has none.
  static ThreadPool* ScopedOr(ThreadPool* fallback);
  static const ThreadPool* ScopedOr(const ThreadPool* fallback);

  // Splits [0, n) into at most num_threads() contiguous chunks of nearly
  // equal size and calls fn(begin, end) once per chunk, in parallel; returns
  // when all chunks are done. n <= 0 does nothing; n == 1, a pool of one
  // thread, or a busy pool run fn(0, n) inline.
  template <typename F>
  void ParallelFor(int64_t n, const F& fn) {
    Run(
        n,
        [](void* ctx, int64_t begin, int64_t end) { (*static_cast<const F*>(ctx))(begin, end); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // The type-erased form of ParallelFor.
  void Run(int64_t n, RangeFn fn, void* ctx);

  // Loops that ran inline because the pool was busy (for tests and stats).
  uint64_t busy_fallbacks() const { return busy_fallbacks_.load(std::memory_order_relaxed); }

 private:
  // One worker's mailbox, on its own cache line. The dispatching thread
  // writes the task fields and then bumps `gen`; whoever first advances
  // `claim` to that generation (the worker, or the dispatcher stealing it)
  // runs the chunk.
  struct alignas(64) Slot {
    std::atomic<uint64_t> gen{0};
    std::atomic<uint64_t> claim{0};
    std::atomic<bool> sleeping{false};
    RangeFn fn = nullptr;
    void* ctx = nullptr;
    int64_t begin = 0;
    int64_t end = 0;
    std::condition_variable cv;  // waited on with mu_ held
  };

  void WorkerLoop(int index);
  // Claims generation `g` of `slot`; false if it was claimed already.
  static bool Claim(Slot& slot, uint64_t g);
  // Returns the next generation posted to `slot` after `seen`, or 0 on stop.
  uint64_t WaitForWork(Slot& slot, uint64_t seen);

  const int num_threads_;
  const int64_t spin_ns_;
  std::unique_ptr<Slot[]> slots_;  // num_threads_ - 1 worker slots
  std::vector<std::thread> threads_;
  alignas(64) std::atomic<int> pending_{0};  // worker chunks not finished
  alignas(64) std::atomic<bool> busy_{false};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> busy_fallbacks_{0};
  std::mutex mu_;  // only for sleeping / waking workers
};

}  // namespace kiln

#endif  // KILN_ENGINE_RUNTIME_THREAD_POOL_H_

// Batcher: the dynamic batcher of one model version. Owns a BatchQueue and
// `instances` worker threads; each worker takes the next batch the queue
// decides on (waiting on the injected Clock until it is time) and hands it
// to the ExecuteFn, which must complete every request of the batch.
//
// Stop(kDrain) stops accepting (Enqueue -> UNAVAILABLE), sends what is
// queued without further delay, waits until every queued and running batch
// is done and joins the workers. Stop(kAbort) fails the queued requests
// with UNAVAILABLE instead. The destructor aborts if Stop was not called.
//
// Thread safety: Enqueue, pending and Stop may be called from any thread.
#ifndef KILN_SERVER_BATCHER_H_
#define KILN_SERVER_BATCHER_H_

#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/batch_queue.h"
#include "server/clock.h"

namespace kiln {

class Batcher {
 public:
  // Runs one batch on worker `instance` (0-based). Must complete every
  // request in `batch`.
  using ExecuteFn = std::function<void(std::vector<RequestPtr> batch, int instance)>;
  // Told the queue length after every change (for a pending-requests gauge);
  // called with the batcher's lock held, so it must be cheap and must not
  // call back into the batcher.
  using PendingFn = std::function<void(size_t pending)>;

  Batcher(BatchingSpec spec, int64_t max_batch_size, int instances, Clock* clock,
          ExecuteFn execute, PendingFn on_pending = nullptr);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues a validated request (see BatchQueue::Push). On error the request
  // is not queued and its callback is not run.
  absl::Status Enqueue(RequestPtr r, absl::Duration requested_timeout);

  enum class StopMode { kDrain, kAbort };
  void Stop(StopMode mode);

  size_t pending() const;
  // Makes the workers look at the queue again now (e.g. after a request
  // was cancelled, so it is dropped promptly).
  void Wake();
  // Batches currently executing.
  int running() const;

 private:
  void Worker(int instance);

  Clock* const clock_;
  const ExecuteFn execute_;
  const PendingFn on_pending_;
  mutable absl::Mutex mu_;
  BatchQueue queue_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped on every change
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> workers_;
  absl::Mutex stop_mu_;  // serializes Stop calls
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace kiln

#endif  // KILN_SERVER_BATCHER_H_

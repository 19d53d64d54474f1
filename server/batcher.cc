#include "server/batcher.h"

#include <algorithm>

namespace kiln {

Batcher::Batcher(BatchingSpec spec, int64_t max_batch_size, int instances, Clock* clock,
                 ExecuteFn execute, PendingFn on_pending)
    : clock_(clock),
      execute_(std::move(execute)),
      on_pending_(std::move(on_pending)),
      queue_(std::move(spec), max_batch_size) {
  for (int i = 0; i < std::max(1, instances); ++i)
    workers_.emplace_back([this, i] { Worker(i); });
}

Batcher::~Batcher() { Stop(StopMode::kAbort); }

absl::Status Batcher::Enqueue(RequestPtr r, absl::Duration requested_timeout) {
  absl::MutexLock l(&mu_);
  if (stopping_)
    return absl::UnavailableError("model '" + r->model +
                                  "' is unloading or the server is shutting down");
  absl::Status s = queue_.Push(std::move(r), requested_timeout, clock_->Now());
  if (!s.ok()) return s;
  ++generation_;
  // Under the lock, so the gauge sees queue lengths in order.
  if (on_pending_) on_pending_(queue_.size());
  return absl::OkStatus();
}

void Batcher::Stop(StopMode mode) {
  absl::MutexLock stop_lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  std::vector<RequestPtr> aborted;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    ++generation_;
    if (mode == StopMode::kAbort) aborted = queue_.TakeAll();
  }
  for (RequestPtr& r : aborted)
    r->Complete(absl::UnavailableError("model '" + r->model + "' was unloaded before the request ran"));
  for (std::thread& t : workers_) t.join();
  if (on_pending_) on_pending_(0);
}

size_t Batcher::pending() const {
  absl::MutexLock l(&mu_);
  return queue_.size();
}

void Batcher::Wake() {
  absl::MutexLock l(&mu_);
  ++generation_;
}

int Batcher::running() const {
  absl::MutexLock l(&mu_);
  return running_;
}

void Batcher::Worker(int instance) {
  mu_.Lock();
  while (true) {
    BatchQueue::Decision d = queue_.Next(clock_->Now(), /*flush=*/stopping_);
    size_t pending = queue_.size();
    bool idle_stop = d.batch.empty() && d.rejected.empty() && stopping_ && pending == 0;
    if (!d.batch.empty()) ++running_;
    if (!d.batch.empty() || !d.rejected.empty()) {
      ++generation_;  // other workers may have work now
      if (on_pending_) on_pending_(pending);
      mu_.Unlock();
      for (auto& [r, status] : d.rejected) r->Complete(status);
      if (!d.batch.empty()) execute_(std::move(d.batch), instance);
      mu_.Lock();
      if (running_ > 0 && !d.batch.empty()) --running_;
      continue;
    }
    if (idle_stop) break;
    uint64_t seen = generation_;
    auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return generation_ != seen;
    };
    clock_->AwaitWithDeadline(&mu_, absl::Condition(&changed), d.wake);
  }
  mu_.Unlock();
}

}  // namespace kiln

#include "server/batch_queue.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln {

namespace {
// Bound on how far one decision scans for batch mates.
constexpr size_t kMaxScan = 4096;
}  // namespace

BatchQueue::BatchQueue(BatchingSpec spec, int64_t max_batch_size)
    : spec_(std::move(spec)), max_batch_(max_batch_size) {
  levels_.resize(std::max(1, spec_.priority_levels));
}

absl::Status BatchQueue::Push(RequestPtr r, absl::Duration requested_timeout, absl::Time now) {
  int levels = static_cast<int>(levels_.size());
  if (r->priority == 0) r->priority = spec_.default_priority;
  if (r->priority < 1 || r->priority > levels) {
    // A model without priority levels treats every priority as the default
    // one (Triton does the same); with levels, out-of-range is an error.
    if (spec_.priority_levels <= 1) {
      r->priority = 1;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("priority ", r->priority,
                                                     " is outside [1, ", levels, "]"));
    }
  }
  const QueuePolicy& p = spec_.PolicyFor(r->priority);
  Level& level = levels_[r->priority - 1];
  if (p.max_queue_size > 0 && level.live.size() + level.delayed.size() >= p.max_queue_size)
    return absl::UnavailableError(absl::StrCat("queue of model '", r->model, "' is full (",
                                               p.max_queue_size, " requests)"));
  absl::Duration timeout = p.default_timeout;
  if (requested_timeout > absl::ZeroDuration() &&
      (p.allow_timeout_override || p.default_timeout == absl::ZeroDuration())) {
    timeout = p.default_timeout == absl::ZeroDuration()
                  ? requested_timeout
                  : std::min(requested_timeout, p.default_timeout);
  }
  r->timeout = timeout;
  r->arrival = now;
  r->deadline = timeout > absl::ZeroDuration() ? now + timeout : absl::InfiniteFuture();
  level.live.push_back(std::move(r));
  ++size_;
  return absl::OkStatus();
}

void BatchQueue::Sweep(absl::Time now, Decision* d) {
  for (size_t li = 0; li < levels_.size(); ++li) {
    Level& level = levels_[li];
    const QueuePolicy& p = spec_.PolicyFor(static_cast<int>(li) + 1);
    for (auto it = level.live.begin(); it != level.live.end();) {
      RequestPtr& r = *it;
      if (r->cancelled()) {
        d->rejected.emplace_back(r, absl::CancelledError("request cancelled by the client"));
      } else if (r->deadline <= now) {
        if (p.delay_on_timeout) {
          r->delayed = true;
          r->deadline = absl::InfiniteFuture();
          level.delayed.push_back(r);
          it = level.live.erase(it);
          continue;
        }
        d->rejected.emplace_back(
            r, absl::UnavailableError(absl::StrCat("request timed out after ",
                                                   absl::FormatDuration(r->timeout),
                                                   " in the queue of model '", r->model, "'")));
      } else {
        ++it;
        continue;
      }
      it = level.live.erase(it);
      --size_;
    }
    for (auto it = level.delayed.begin(); it != level.delayed.end();) {
      if ((*it)->cancelled()) {
        d->rejected.emplace_back(*it, absl::CancelledError("request cancelled by the client"));
        it = level.delayed.erase(it);
        --size_;
      } else {
        ++it;
      }
    }
  }
}

BatchQueue::Decision BatchQueue::Next(absl::Time now, bool flush) {
  Decision d;
  Sweep(now, &d);
  // Candidates in service order: live[1], delayed[1], live[2], ...
  std::vector<std::pair<std::list<RequestPtr>*, std::list<RequestPtr>::iterator>> gathered;
  std::list<RequestPtr>* order[2];
  const InferRequest* head = nullptr;
  int64_t rows = 0;
  bool overflow = false;
  size_t scanned = 0;
  absl::Time earliest_deadline = absl::InfiniteFuture();
  for (Level& level : levels_) {
    order[0] = &level.live;
    order[1] = &level.delayed;
    for (std::list<RequestPtr>* q : order) {
      for (auto it = q->begin(); it != q->end(); ++it) {
        const InferRequest& r = **it;
        earliest_deadline = std::min(earliest_deadline, r.deadline);
        if (overflow || ++scanned > kMaxScan) continue;
        if (head == nullptr) {
          head = &r;
          gathered.emplace_back(q, it);
          rows = r.batch;
          if (!spec_.dynamic || max_batch_ == 0) overflow = true;  // alone
          continue;
        }
        if (r.shape_key != head->shape_key) continue;
        if (rows + r.batch > max_batch_) {
          overflow = true;  // keep FIFO order: never skip past a mate that does not fit
          continue;
        }
        gathered.emplace_back(q, it);
        rows += r.batch;
      }
    }
  }
  if (head == nullptr) return d;

  size_t take = 0;
  bool full = overflow || rows >= max_batch_;
  bool expired = now >= head->arrival + spec_.max_queue_delay;
  if (full || expired || flush) {
    take = gathered.size();
  } else if (!spec_.preferred.empty()) {
    int64_t sum = 0;
    for (size_t i = 0; i < gathered.size(); ++i) {
      sum += (*gathered[i].second)->batch;
      if (std::binary_search(spec_.preferred.begin(), spec_.preferred.end(), sum)) take = i + 1;
    }
  }
  if (take == 0) {
    d.wake = std::min(head->arrival + spec_.max_queue_delay, earliest_deadline);
    return d;
  }
  for (size_t i = 0; i < take; ++i) {
    d.batch.push_back(*gathered[i].second);
    gathered[i].first->erase(gathered[i].second);
    --size_;
  }
  return d;
}

std::vector<RequestPtr> BatchQueue::TakeAll() {
  std::vector<RequestPtr> out;
  for (Level& level : levels_) {
    for (auto* q : {&level.live, &level.delayed}) {
      for (RequestPtr& r : *q) out.push_back(std::move(r));
      q->clear();
    }
  }
  size_ = 0;
  return out;
}

}  // namespace kiln

// BatchQueue: the scheduling decisions of the dynamic batcher, as a pure
// data structure with time passed in (no threads, no clock), so every
// decision is unit-testable.
//
// Requests wait in one FIFO per priority level (1 = highest). Next(now):
//   1. drops cancelled requests (CANCELLED) and handles expired ones:
//      REJECT policy -> UNAVAILABLE, DELAY policy -> moved to that level's
//      delayed queue, served after the level's live requests;
//   2. takes the first waiting request (the head, in priority order) and
//      gathers, in order, the requests with the same shape key (equal
//      non-batch shapes) while their rows fit max_batch_size;
//   3. sends the gathered batch when it is full, when the head has waited
//      max_queue_delay, or when `flush` is set; otherwise sends the largest
//      prefix whose row count is a preferred batch size, if any; otherwise
//      says when to look again (head arrival + delay, or an earlier
//      request deadline).
// Without dynamic batching every request is a batch of its own.
//
// Thread safety: none (the Batcher owns it under its mutex).
#ifndef KILN_SERVER_BATCH_QUEUE_H_
#define KILN_SERVER_BATCH_QUEUE_H_

#include <list>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/model_spec.h"
#include "server/request.h"

namespace kiln {

class BatchQueue {
 public:
  // `max_batch_size` 0: the model has no batch dim.
  BatchQueue(BatchingSpec spec, int64_t max_batch_size);

  // Validates the request's priority (0 = the default level), sets its
  // arrival, timeout and deadline from the level's policy, and queues it.
  // UNAVAILABLE when that level's queue is full; INVALID_ARGUMENT for a
  // priority outside [0, priority_levels]. `requested_timeout` zero: none.
  absl::Status Push(RequestPtr r, absl::Duration requested_timeout, absl::Time now);

  struct Decision {
    std::vector<RequestPtr> batch;
    std::vector<std::pair<RequestPtr, absl::Status>> rejected;
    absl::Time wake = absl::InfiniteFuture();  // when nothing was sent
  };
  // Takes the next batch (and any rejected requests) out of the queues.
  // `flush`: send whatever can be batched now, without waiting.
  Decision Next(absl::Time now, bool flush = false);

  size_t size() const { return size_; }
  // Removes everything (for an aborting stop).
  std::vector<RequestPtr> TakeAll();

 private:
  struct Level {
    std::list<RequestPtr> live;
    std::list<RequestPtr> delayed;
  };
  void Sweep(absl::Time now, Decision* d);

  BatchingSpec spec_;
  int64_t max_batch_;
  std::vector<Level> levels_;  // index 0 = priority 1
  size_t size_ = 0;
};

}  // namespace kiln

#endif  // KILN_SERVER_BATCH_QUEUE_H_

// InferRequest / InferResult: one validated inference request as it moves
// through the batcher and the executor, and what comes back.
//
// A request is created by the gRPC layer after validation (every input
// present, dtypes, shapes and byte sizes checked), shared between the
// handler and the batcher through shared_ptr, and completed exactly once
// through Complete(). Input data may point into the caller's request
// message (the handler keeps it alive until completion) or into `owned`.
//
// Thread safety: the fields are written before the request is enqueued and
// only read afterwards, except `cancelled` (atomic) and the completion,
// which is guarded by its own mutex and runs the callback exactly once.
#ifndef KILN_SERVER_REQUEST_H_
#define KILN_SERVER_REQUEST_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/base/dtype.h"

namespace kiln {

// An input tensor: full shape (batch dim included when the model batches).
struct InputTensor {
  std::string name;
  DType dtype = dtypes::kFloat32;
  std::vector<int64_t> shape;
  std::string_view data;  // row-major little-endian, numel * itemsize bytes
  std::string owned;      // backing store when the data was converted
};

struct OutputTensor {
  std::string name;
  DType dtype = dtypes::kFloat32;
  std::vector<int64_t> shape;
  std::string data;
};

// Server-side time spent on a request (nanoseconds).
struct RequestTimings {
  uint64_t queue_ns = 0;
  uint64_t compute_input_ns = 0;
  uint64_t compute_infer_ns = 0;
  uint64_t compute_output_ns = 0;
  int64_t batch_size = 0;  // rows in the executed batch (after padding)
};

struct InferResult {
  std::vector<OutputTensor> outputs;  // in the order requested
  RequestTimings timings;
};

class InferRequest {
 public:
  using Callback = std::function<void(absl::StatusOr<InferResult>)>;

  std::string model;
  int64_t version = 0;
  std::string id;
  // In the model's input order.
  std::vector<InputTensor> inputs;
  // Output names to return, in response order (all outputs when none asked).
  std::vector<std::string> outputs;
  int64_t batch = 1;             // rows (dim 0) when the model batches, else 1
  std::string shape_key;         // equal for requests that can share a batch
  int priority = 1;              // 1 = highest
  absl::Duration timeout = absl::ZeroDuration();  // zero: none (set by batcher policy)
  absl::Time arrival;            // set by the batcher on enqueue
  absl::Time deadline = absl::InfiniteFuture();
  bool delayed = false;          // timed out under a DELAY policy

  void set_callback(Callback cb) { callback_ = std::move(cb); }
  void Cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  // Runs the callback once; later calls are ignored. Returns true if this
  // call completed the request.
  bool Complete(absl::StatusOr<InferResult> result) {
    Callback cb;
    {
      absl::MutexLock l(&mu_);
      if (done_) return false;
      done_ = true;
      cb = std::move(callback_);
    }
    if (cb) cb(std::move(result));
    return true;
  }
  bool done() const {
    absl::MutexLock l(&mu_);
    return done_;
  }

 private:
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  Callback callback_ ABSL_GUARDED_BY(mu_);
};

using RequestPtr = std::shared_ptr<InferRequest>;

}  // namespace kiln

#endif  // KILN_SERVER_REQUEST_H_

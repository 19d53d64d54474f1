// Executor: runs batches of one model version on its instances (one
// ModelRunner each, each with its own JIT captures).
//
// For a batch it gathers the requests' inputs along dim 0 (no copy for a
// single request), runs the runner, splits every output back by rows and
// completes each request with its own rows, its timings and the outputs it
// asked for. It asks each runner which batch sizes of a shape it has
// captured (ModelRunner::HasCapture), and counts JIT captures,
// hits (replays), misses and their time.
//
// Padding to a captured batch size (ski rental): when a batch of b rows has
// no capture but a larger captured size b' (<= max_batch_size) exists for
// the same non-batch shapes, the batch is padded with zero rows to b' as
// long as the padding spent on size b so far, plus (b' - b) x the measured
// time per row, stays below the measured cost of capturing a new size (two
// non-replay runs). After that b is run as is and gets its own capture.
// Padded rows are computed and dropped; rows never mix between requests.
//
// Thread safety: Execute(…, i) may run concurrently for distinct instances
// i; calls for one instance must not overlap (the Batcher guarantees it).
#ifndef KILN_SERVER_EXECUTOR_H_
#define KILN_SERVER_EXECUTOR_H_

#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/clock.h"
#include "server/metrics.h"
#include "server/model_spec.h"
#include "server/model_stats.h"
#include "server/runner.h"

namespace kiln {

class Executor {
 public:
  struct Options {
    size_t max_captures = 16;  // per instance, as the runners were created
    bool pad_to_captured = true;
  };
  struct Counts {
    uint64_t captures = 0, hits = 0, misses = 0, padded_batches = 0, padded_rows = 0;
    double capture_seconds = 0;
  };

  // `spec` must outlive the executor. `metrics` may be null.
  Executor(const ModelSpec* spec, std::vector<std::unique_ptr<ModelRunner>> runners,
           std::shared_ptr<ModelMetrics> metrics, ModelStats* stats, Clock* clock,
           Options options);

  int instances() const { return static_cast<int>(instances_.size()); }

  // Runs `batch` (requests with one shape key) on `instance` and completes
  // every request in it.
  void Execute(std::vector<RequestPtr> batch, int instance);

  // Runs the config's warm-up requests on every instance (each at least
  // twice, so its shape is captured). Not counted as inferences.
  absl::Status Warmup();

  Counts counts() const;
  // Batch sizes with a capture on `instance` for `shape_key` (tests).
  std::vector<int64_t> CapturedSizes(int instance, const std::string& shape_key) const;

 private:
  // What the executor remembers of one shape key (input shapes without the
  // batch dim) for padding: its element types and shapes (dim 0 to be set),
  // and per batch size run, the seconds of padding spent instead of
  // capturing that size.
  struct KeyState {
    std::vector<DType> dtypes;
    std::vector<std::vector<int64_t>> shapes;
    std::map<int64_t, double> pad_spent;
  };
  struct Instance {
    std::unique_ptr<ModelRunner> runner;
    mutable absl::Mutex mu;
    // Shape keys in LRU order (front = most recent), at most
    // kKeysPerCapture * max_captures of them.
    std::list<std::string> lru ABSL_GUARDED_BY(mu);
    std::map<std::string, KeyState> keys ABSL_GUARDED_BY(mu);
  };
  static constexpr size_t kKeysPerCapture = 4;

  // Whether `instance`'s runner has a capture for `key`'s shapes at `rows`.
  static bool Captured(const Instance& inst, const KeyState& ks, int64_t rows);
  // Rows to run a batch of `rows` at (>= rows).
  int64_t ChooseRows(Instance& inst, const std::string& key, int64_t rows);
  // Runs the runner and updates captures / counters / metrics.
  absl::StatusOr<std::vector<OutputTensor>> RunCounted(Instance& inst, const std::string& key,
                                                       int64_t rows,
                                                       const std::vector<InputTensor>& inputs,
                                                       RunStats* stats);
  void CompleteAll(std::vector<RequestPtr>& batch, const absl::Status& s);

  const ModelSpec* const spec_;
  std::vector<std::unique_ptr<Instance>> instances_;
  std::shared_ptr<ModelMetrics> metrics_;
  ModelStats* const stats_;
  Clock* const clock_;
  const Options options_;

  mutable absl::Mutex mu_;
  Counts counts_ ABSL_GUARDED_BY(mu_);
  double miss_seconds_ ABSL_GUARDED_BY(mu_) = 0;  // EWMA of one non-replay run
  double row_seconds_ ABSL_GUARDED_BY(mu_) = 0;   // EWMA of replay time per row
};

// The shape key of a request: dtypes and non-batch dims of every input.
std::string ShapeKey(const std::vector<InputTensor>& inputs, bool batched);

}  // namespace kiln

#endif  // KILN_SERVER_EXECUTOR_H_

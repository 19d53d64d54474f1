// ModelStats: the per-version statistics served by the ModelStatistics RPC
// (Triton's InferStatistics / InferBatchStatistics), accumulated as
// requests and executions finish.
//
// Thread safety: thread-safe.
#ifndef KILN_SERVER_MODEL_STATS_H_
#define KILN_SERVER_MODEL_STATS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "proto/grpc_service.pb.h"
#include "server/request.h"

namespace kiln {

class ModelStats {
 public:
  // A request finished successfully after `total_ns` in the server.
  void RecordSuccess(uint64_t total_ns, const RequestTimings& t, uint64_t now_ms);
  void RecordFailure(uint64_t total_ns, uint64_t now_ms);
  // One execution of `batch_size` rows (`real_rows` of them from requests).
  void RecordExecution(int64_t batch_size, int64_t real_rows, uint64_t input_ns,
                       uint64_t infer_ns, uint64_t output_ns);
  void Fill(inference::ModelStatistics* out) const;

 private:
  struct Duration {
    uint64_t count = 0;
    uint64_t ns = 0;
    void Add(uint64_t v) {
      ++count;
      ns += v;
    }
  };
  struct Batch {
    Duration input, infer, output;
  };
  mutable absl::Mutex mu_;
  uint64_t last_inference_ms_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t inference_count_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t execution_count_ ABSL_GUARDED_BY(mu_) = 0;
  Duration success_ ABSL_GUARDED_BY(mu_), fail_ ABSL_GUARDED_BY(mu_),
      queue_ ABSL_GUARDED_BY(mu_), input_ ABSL_GUARDED_BY(mu_), infer_ ABSL_GUARDED_BY(mu_),
      output_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Batch> batches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kiln

#endif  // KILN_SERVER_MODEL_STATS_H_

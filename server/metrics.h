// Metrics: kiln's Prometheus metrics (prometheus-cpp), exposed by kilnd on
// :8002/metrics. Per model version (labels model, version):
//
//   kiln_inference_requests_success_total       counter
//   kiln_inference_requests_failure_total       counter, + label reason
//                                               (the gRPC code, lower case)
//   kiln_inferences_total                        counter: rows inferred
//   kiln_executions_total                        counter: batches executed
//   kiln_request_duration_seconds                histogram (end to end)
//   kiln_queue_duration_seconds                  histogram
//   kiln_compute_input_duration_seconds          histogram (per batch)
//   kiln_compute_infer_duration_seconds          histogram (per batch)
//   kiln_compute_output_duration_seconds         histogram (per batch)
//   kiln_batch_size                              histogram (rows per execution)
//   kiln_padded_rows_total                       counter: rows added by padding
//   kiln_pending_requests                        gauge: queued requests
//   kiln_model_load_duration_seconds             gauge
//   kiln_model_ready                             gauge: 1 ready, 0 not
//   kiln_jit_captures_total / _hits_total / _misses_total   counters
//   kiln_jit_capture_seconds_total               counter: time in runs that
//                                                were not replays
//   kiln_estimated_flops_total                   counter (engine estimates)
//   kiln_estimated_bytes_total                   counter (memory traffic)
//   kiln_achieved_flops_per_second               gauge (last execution)
//
// Server-wide: kiln_rpc_requests_total{method, code} (gRPC),
// kiln_http_requests_total{method, status} (HTTP/REST: the same method
// names, "other" for unknown paths, and the HTTP status); engine-wide (read at
// scrape time from the Engine and the device allocators, see
// EngineCollector): kiln_kernels_compiled_total,
// kiln_kernel_compile_seconds_total, kiln_device_memory_allocated_bytes
// {device}, kiln_device_memory_cached_bytes{device},
// kiln_device_memory_limit_bytes{device} (0: no limit); process-wide (read
// from /proc/self/statm at scrape time): kiln_process_resident_bytes.
//
// Thread safety: everything here is thread-safe (prometheus-cpp metrics
// are atomic; family lookups are locked).
#ifndef KILN_SERVER_METRICS_H_
#define KILN_SERVER_METRICS_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace kiln {

// The metrics of one model version.
struct ModelMetrics {
  prometheus::Counter* success;
  prometheus::Family<prometheus::Counter>* failure_family;
  std::map<std::string, std::string> labels;
  prometheus::Counter* inferences;
  prometheus::Counter* executions;
  prometheus::Histogram* request_duration;
  prometheus::Histogram* queue_duration;
  prometheus::Histogram* compute_input;
  prometheus::Histogram* compute_infer;
  prometheus::Histogram* compute_output;
  prometheus::Histogram* batch_size;
  prometheus::Counter* padded_rows;
  prometheus::Gauge* pending;
  prometheus::Gauge* load_seconds;
  prometheus::Gauge* ready;
  prometheus::Counter* jit_captures;
  prometheus::Counter* jit_hits;
  prometheus::Counter* jit_misses;
  prometheus::Counter* jit_capture_seconds;
  prometheus::Counter* flops;
  prometheus::Counter* bytes;
  prometheus::Gauge* flops_per_second;

  void Failure(const std::string& reason) const;
};

class Metrics {
 public:
  explicit Metrics(std::shared_ptr<prometheus::Registry> registry);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }
  // The metrics of `model` version `version` (created on first use; the
  // same object afterwards, so counters survive reloads).
  std::shared_ptr<ModelMetrics> ForModel(const std::string& model, const std::string& version);
  // Counts one RPC by method and final status code name ("OK", "NOT_FOUND").
  void CountRpc(const std::string& method, const std::string& code);
  // Counts one HTTP/REST request by operation ("ModelInfer") and HTTP status.
  void CountHttp(const std::string& method, int status);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& success_;
  prometheus::Family<prometheus::Counter>& failure_;
  prometheus::Family<prometheus::Counter>& inferences_;
  prometheus::Family<prometheus::Counter>& executions_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Histogram>& queue_duration_;
  prometheus::Family<prometheus::Histogram>& compute_input_;
  prometheus::Family<prometheus::Histogram>& compute_infer_;
  prometheus::Family<prometheus::Histogram>& compute_output_;
  prometheus::Family<prometheus::Histogram>& batch_size_;
  prometheus::Family<prometheus::Counter>& padded_rows_;
  prometheus::Family<prometheus::Gauge>& pending_;
  prometheus::Family<prometheus::Gauge>& load_seconds_;
  prometheus::Family<prometheus::Gauge>& ready_;
  prometheus::Family<prometheus::Counter>& jit_captures_;
  prometheus::Family<prometheus::Counter>& jit_hits_;
  prometheus::Family<prometheus::Counter>& jit_misses_;
  prometheus::Family<prometheus::Counter>& jit_capture_seconds_;
  prometheus::Family<prometheus::Counter>& flops_;
  prometheus::Family<prometheus::Counter>& bytes_;
  prometheus::Family<prometheus::Gauge>& flops_per_second_;
  prometheus::Family<prometheus::Counter>& rpcs_;
  prometheus::Family<prometheus::Counter>& http_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<ModelMetrics>> models_;  // guarded by mu_
};

// Engine-wide values read at scrape time. `read` fills a snapshot; it is
// called on the exposer's thread and must be thread-safe.
struct EngineSnapshot {
  double kernels_compiled = 0;
  double compile_seconds = 0;
  struct DeviceMemory {
    std::string device;
    double allocated_bytes = 0;
    double cached_bytes = 0;
    double limit_bytes = 0;  // 0: no limit
  };
  std::vector<DeviceMemory> memory;
};

// The resident set size of this process in bytes (/proc/self/statm; 0 when
// it cannot be read).
double ProcessResidentBytes();

class EngineCollector : public prometheus::Collectable {
 public:
  explicit EngineCollector(std::function<EngineSnapshot()> read) : read_(std::move(read)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<EngineSnapshot()> read_;
};

}  // namespace kiln

#endif  // KILN_SERVER_METRICS_H_

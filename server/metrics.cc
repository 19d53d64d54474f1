#include "server/metrics.h"

#include <unistd.h>

#include <fstream>
#include <utility>

#include "prometheus/metric_family.h"

namespace kiln {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// Seconds: 100 us .. ~100 s.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
      0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    100};
  return *b;
}

const prometheus::Histogram::BucketBoundaries& BatchBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{1,  2,  4,   8,   16,
                                                                     32, 64, 128, 256, 1024};
  return *b;
}

}  // namespace

double ProcessResidentBytes() {
  // statm: size resident shared text lib data dt, in pages.
  std::ifstream statm("/proc/self/statm");
  double size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? resident * static_cast<double>(page) : 0;
}

void ModelMetrics::Failure(const std::string& reason) const {
  std::map<std::string, std::string> l = labels;
  l["reason"] = reason;
  failure_family->Add(l).Increment();
}

Metrics::Metrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      success_(BuildCounter()
                   .Name("kiln_inference_requests_success_total")
                   .Help("Inference requests that succeeded")
                   .Register(*registry_)),
      failure_(BuildCounter()
                   .Name("kiln_inference_requests_failure_total")
                   .Help("Inference requests that failed, by reason (gRPC status code)")
                   .Register(*registry_)),
      inferences_(BuildCounter()
                      .Name("kiln_inferences_total")
                      .Help("Inferences performed (batch rows, padding excluded)")
                      .Register(*registry_)),
      executions_(BuildCounter()
                      .Name("kiln_executions_total")
                      .Help("Model executions (batches run)")
                      .Register(*registry_)),
      request_duration_(BuildHistogram()
                            .Name("kiln_request_duration_seconds")
                            .Help("End-to-end server time of inference requests")
                            .Register(*registry_)),
      queue_duration_(BuildHistogram()
                          .Name("kiln_queue_duration_seconds")
                          .Help("Time requests waited in the batcher queue")
                          .Register(*registry_)),
      compute_input_(BuildHistogram()
                         .Name("kiln_compute_input_duration_seconds")
                         .Help("Per execution: gathering inputs and copying them to the device")
                         .Register(*registry_)),
      compute_infer_(BuildHistogram()
                         .Name("kiln_compute_infer_duration_seconds")
                         .Help("Per execution: running the model (JIT replay or capture)")
                         .Register(*registry_)),
      compute_output_(BuildHistogram()
                          .Name("kiln_compute_output_duration_seconds")
                          .Help("Per execution: copying outputs back and splitting them")
                          .Register(*registry_)),
      batch_size_(BuildHistogram()
                      .Name("kiln_batch_size")
                      .Help("Rows per model execution (after padding)")
                      .Register(*registry_)),
      padded_rows_(BuildCounter()
                       .Name("kiln_padded_rows_total")
                       .Help("Rows of padding added to reuse a captured batch size")
                       .Register(*registry_)),
      pending_(BuildGauge()
                   .Name("kiln_pending_requests")
                   .Help("Requests waiting in the batcher queue")
                   .Register(*registry_)),
      load_seconds_(BuildGauge()
                        .Name("kiln_model_load_duration_seconds")
                        .Help("Time the last load of the model version took (incl. warm-up)")
                        .Register(*registry_)),
      ready_(BuildGauge()
                 .Name("kiln_model_ready")
                 .Help("1 when the model version is ready to serve, else 0")
                 .Register(*registry_)),
      jit_captures_(BuildCounter()
                        .Name("kiln_jit_captures_total")
                        .Help("JIT captures recorded (one per input-shape signature)")
                        .Register(*registry_)),
      jit_hits_(BuildCounter()
                    .Name("kiln_jit_hits_total")
                    .Help("Executions replayed from a JIT capture")
                    .Register(*registry_)),
      jit_misses_(BuildCounter()
                      .Name("kiln_jit_misses_total")
                      .Help("Executions that were not replays (first run or capture)")
                      .Register(*registry_)),
      jit_capture_seconds_(BuildCounter()
                               .Name("kiln_jit_capture_seconds_total")
                               .Help("Time spent in executions that were not replays")
                               .Register(*registry_)),
      flops_(BuildCounter()
                 .Name("kiln_estimated_flops_total")
                 .Help("Floating point operations executed (engine per-kernel estimates)")
                 .Register(*registry_)),
      bytes_(BuildCounter()
                 .Name("kiln_estimated_bytes_total")
                 .Help("Memory traffic of executed kernels (engine per-kernel estimates)")
                 .Register(*registry_)),
      flops_per_second_(BuildGauge()
                            .Name("kiln_achieved_flops_per_second")
                            .Help("Estimated FLOPs / compute time of the last execution")
                            .Register(*registry_)),
      rpcs_(BuildCounter()
                .Name("kiln_rpc_requests_total")
                .Help("gRPC requests by method and status code")
                .Register(*registry_)),
      http_(BuildCounter()
                .Name("kiln_http_requests_total")
                .Help("HTTP/REST requests by method (the gRPC method doing the same) and HTTP "
                      "status")
                .Register(*registry_)) {}

std::shared_ptr<ModelMetrics> Metrics::ForModel(const std::string& model,
                                                const std::string& version) {
  std::lock_guard<std::mutex> l(mu_);
  std::string key = model + "\n" + version;
  auto it = models_.find(key);
  if (it != models_.end()) return it->second;
  auto m = std::make_shared<ModelMetrics>();
  std::map<std::string, std::string> labels = {{"model", model}, {"version", version}};
  m->labels = labels;
  m->success = &success_.Add(labels);
  m->failure_family = &failure_;
  m->inferences = &inferences_.Add(labels);
  m->executions = &executions_.Add(labels);
  m->request_duration = &request_duration_.Add(labels, LatencyBuckets());
  m->queue_duration = &queue_duration_.Add(labels, LatencyBuckets());
  m->compute_input = &compute_input_.Add(labels, LatencyBuckets());
  m->compute_infer = &compute_infer_.Add(labels, LatencyBuckets());
  m->compute_output = &compute_output_.Add(labels, LatencyBuckets());
  m->batch_size = &batch_size_.Add(labels, BatchBuckets());
  m->padded_rows = &padded_rows_.Add(labels);
  m->pending = &pending_.Add(labels);
  m->load_seconds = &load_seconds_.Add(labels);
  m->ready = &ready_.Add(labels);
  m->jit_captures = &jit_captures_.Add(labels);
  m->jit_hits = &jit_hits_.Add(labels);
  m->jit_misses = &jit_misses_.Add(labels);
  m->jit_capture_seconds = &jit_capture_seconds_.Add(labels);
  m->flops = &flops_.Add(labels);
  m->bytes = &bytes_.Add(labels);
  m->flops_per_second = &flops_per_second_.Add(labels);
  models_[key] = m;
  return m;
}

void Metrics::CountRpc(const std::string& method, const std::string& code) {
  rpcs_.Add({{"method", method}, {"code", code}}).Increment();
}

void Metrics::CountHttp(const std::string& method, int status) {
  http_.Add({{"method", method}, {"status", std::to_string(status)}}).Increment();
}

std::vector<prometheus::MetricFamily> EngineCollector::Collect() const {
  EngineSnapshot s = read_();
  auto scalar = [](const std::string& name, const std::string& help, prometheus::MetricType type,
                   double value) {
    prometheus::MetricFamily f;
    f.name = name;
    f.help = help;
    f.type = type;
    prometheus::ClientMetric m;
    if (type == prometheus::MetricType::Counter) m.counter.value = value;
    else m.gauge.value = value;
    f.metric.push_back(m);
    return f;
  };
  std::vector<prometheus::MetricFamily> out;
  out.push_back(scalar("kiln_kernels_compiled_total", "Kernels compiled by the engine",
                       prometheus::MetricType::Counter, s.kernels_compiled));
  out.push_back(scalar("kiln_kernel_compile_seconds_total", "Time the engine spent compiling kernels",
                       prometheus::MetricType::Counter, s.compile_seconds));
  using DeviceMemory = EngineSnapshot::DeviceMemory;
  auto per_device = [&s](const std::string& name, const std::string& help,
                         double DeviceMemory::*field) {
    prometheus::MetricFamily f;
    f.name = name;
    f.help = help;
    f.type = prometheus::MetricType::Gauge;
    for (const DeviceMemory& d : s.memory) {
      prometheus::ClientMetric m;
      m.label.push_back({"device", d.device});
      m.gauge.value = d.*field;
      f.metric.push_back(m);
    }
    return f;
  };
  out.push_back(per_device("kiln_device_memory_allocated_bytes",
                           "Device memory held by live buffers", &DeviceMemory::allocated_bytes));
  out.push_back(per_device("kiln_device_memory_cached_bytes",
                           "Freed device memory kept by the allocator for reuse",
                           &DeviceMemory::cached_bytes));
  out.push_back(per_device("kiln_device_memory_limit_bytes",
                           "Device memory (allocated + cached) the engine may hold; 0: no limit",
                           &DeviceMemory::limit_bytes));
  out.push_back(scalar("kiln_process_resident_bytes",
                       "Resident set size of the kilnd process (/proc/self/statm)",
                       prometheus::MetricType::Gauge, ProcessResidentBytes()));
  return out;
}

}  // namespace kiln

// The `kiln perf` load generator: for each concurrency level N it keeps N
// requests in flight (N threads, each sending the next request as soon as
// the previous one returns), measures in fixed windows until the last
// `stable_windows` windows agree on throughput and mean latency within
// `stability` (or `max_windows` is reached), and reports throughput and
// latency percentiles over those windows, plus the server-side breakdown
// (queue, compute input / infer / output per request, average batch size)
// from the ModelStatistics deltas over the same windows. The protocol is a
// PerfTransport (perf_transport.h): gRPC or HTTP/REST, statistics included.
//
// Thread safety: RunPerf is a blocking call; it starts and joins its own
// threads.
#ifndef KILN_CLIENTS_PERF_H_
#define KILN_CLIENTS_PERF_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "clients/perf_transport.h"
#include "proto/grpc_service.pb.h"

namespace kiln {

struct PerfOptions {
  std::string model;
  std::string version;
  std::vector<int> concurrency = {1};
  // Full input shapes (batch dim included) for inputs with variable dims.
  std::map<std::string, std::vector<int64_t>> shapes;
  int64_t batch = 1;  // rows per request when the model batches
  absl::Duration window = absl::Seconds(1);
  double stability = 0.10;
  int stable_windows = 3;
  int max_windows = 10;
};

struct PerfLevel {
  int concurrency = 0;
  double throughput = 0;  // requests / s
  double p50_ms = 0, p90_ms = 0, p95_ms = 0, p99_ms = 0, avg_ms = 0;
  int64_t requests = 0, errors = 0;
  std::string first_error;
  bool stable = false;
  int windows = 0;
  // Server side, per request (microseconds), over the measured windows.
  double server_request_us = 0, server_queue_us = 0, server_input_us = 0, server_infer_us = 0,
         server_output_us = 0, server_avg_batch = 0;
};

// Parses "1:16" (doubling: 1,2,4,8,16), "1:16:3" (linear step), "1,4,16"
// (a list) or "4".
absl::StatusOr<std::vector<int>> ParseConcurrency(const std::string& text);
// Parses "NAME=d,d,d".
absl::Status ParseShape(const std::string& text, std::map<std::string, std::vector<int64_t>>* out);

// Builds one request with deterministic pseudo-random data of the model's
// inputs (metadata + config from the server, through `transport`).
absl::StatusOr<inference::ModelInferRequest> MakePerfRequest(PerfTransport* transport,
                                                             const PerfOptions& options);

// Measures every level of options.concurrency with `request` (from
// MakePerfRequest); `on_level` sees each level as it is done. Errors only
// when a worker cannot be made; failed requests are counted in the levels.
absl::StatusOr<std::vector<PerfLevel>> RunPerf(
    PerfTransport* transport, const inference::ModelInferRequest& request,
    const PerfOptions& options, const std::function<void(const PerfLevel&)>& on_level = nullptr);

std::string FormatPerfLevel(const PerfLevel& l);

}  // namespace kiln

#endif  // KILN_CLIENTS_PERF_H_

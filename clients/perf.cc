#include "clients/perf.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace kiln {
namespace {

struct Sample {
  absl::Time end;
  int64_t latency_ns;
  bool ok;
};

struct ServerTotals {
  uint64_t success = 0, success_ns = 0, queue_ns = 0, input_ns = 0, infer_ns = 0, output_ns = 0;
  uint64_t inferences = 0, executions = 0;
};

ServerTotals Totals(PerfTransport* transport, const PerfOptions& o) {
  ServerTotals t;
  auto stats = transport->Statistics(o.model, o.version);
  if (!stats.ok()) return t;
  for (const auto& m : stats->model_stats()) {
    const auto& s = m.inference_stats();
    t.success += s.success().count();
    t.success_ns += s.success().ns();
    t.queue_ns += s.queue().ns();
    t.input_ns += s.compute_input().ns();
    t.infer_ns += s.compute_infer().ns();
    t.output_ns += s.compute_output().ns();
    t.inferences += m.inference_count();
    t.executions += m.execution_count();
  }
  return t;
}

double Percentile(std::vector<int64_t>& v, double q) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) ;
  k = std::min(v.size() - 1, k == 0 ? 0 : k - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return static_cast<double>(v[k]) * 1e-6;
}

void FillRandom(const std::string& datatype, size_t n, std::string* out) {
  int size = DatatypeSize(datatype);
  out->assign(n * static_cast<size_t>(size), '\0');
  uint64_t x = 88172645463325252ULL;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double u = static_cast<double>(x >> 11) / static_cast<double>(1ULL << 53);
    char* p = out->data() + i * size;
    if (datatype == "FP32") {
      float f = static_cast<float>(u);
      std::memcpy(p, &f, 4);
    } else if (datatype == "FP64") {
      std::memcpy(p, &u, 8);
    } else if (datatype == "BOOL") {
      *p = u < 0.5;
    } else if (datatype == "FP16" || datatype == "BF16") {
      // Zeros: valid in both formats.
    } else {
      int64_t v = static_cast<int64_t>(u * 10);
      std::memcpy(p, &v, static_cast<size_t>(size));
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseConcurrency(const std::string& text) {
  if (text.find(',') != std::string::npos) {
    std::vector<int> out;
    for (absl::string_view p : absl::StrSplit(text, ',')) {
      int v;
      if (!absl::SimpleAtoi(p, &v) || v < 1 || v > 4096)
        return absl::InvalidArgumentError("--concurrency: '" + text + "'");
      out.push_back(v);
    }
    return out;
  }
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  std::vector<int> nums;
  for (const std::string& p : parts) {
    int v;
    if (!absl::SimpleAtoi(p, &v) || v < 1 || v > 4096)
      return absl::InvalidArgumentError("--concurrency: '" + text +
                                        "' (use N, START:END or START:END:STEP, 1..4096)");
    nums.push_back(v);
  }
  if (nums.size() == 1) return nums;
  if (nums.size() > 3 || nums[0] > nums[1])
    return absl::InvalidArgumentError("--concurrency: '" + text + "'");
  std::vector<int> out;
  if (nums.size() == 2) {
    for (int c = nums[0]; c <= nums[1]; c *= 2) out.push_back(c);
    if (out.back() != nums[1]) out.push_back(nums[1]);
  } else {
    for (int c = nums[0]; c <= nums[1]; c += nums[2]) out.push_back(c);
  }
  return out;
}

absl::Status ParseShape(const std::string& text, std::map<std::string, std::vector<int64_t>>* out) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return absl::InvalidArgumentError("--shape: '" + text + "' (use NAME=d,d,...)");
  std::vector<int64_t> dims;
  for (absl::string_view p : absl::StrSplit(text.substr(eq + 1), ',')) {
    int64_t d;
    if (!absl::SimpleAtoi(p, &d) || d < 1)
      return absl::InvalidArgumentError("--shape: bad dim in '" + text + "'");
    dims.push_back(d);
  }
  (*out)[text.substr(0, eq)] = dims;
  return absl::OkStatus();
}

absl::StatusOr<inference::ModelInferRequest> MakePerfRequest(PerfTransport* transport,
                                                             const PerfOptions& o) {
  auto meta = transport->ModelMetadata(o.model, o.version);
  if (!meta.ok()) return meta.status();
  auto config = transport->ModelConfig(o.model, o.version);
  if (!config.ok()) return config.status();
  const bool batched = config->config().max_batch_size() > 0;
  std::vector<ClientTensor> inputs;
  for (const auto& in : meta->inputs()) {
    ClientTensor t;
    t.name = in.name();
    t.datatype = in.datatype();
    auto it = o.shapes.find(in.name());
    if (it != o.shapes.end()) {
      t.shape = it->second;
    } else {
      for (int i = 0; i < in.shape_size(); ++i) {
        int64_t d = in.shape(i);
        if (d == -1 && i == 0 && batched) d = o.batch;
        if (d == -1)
          return absl::InvalidArgumentError(absl::StrCat(
              "input '", in.name(), "' has variable dims; give --shape ", in.name(), "=..."));
        t.shape.push_back(d);
      }
    }
    int size = DatatypeSize(t.datatype);
    if (size == 0) return absl::InvalidArgumentError("unsupported datatype " + t.datatype);
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    FillRandom(t.datatype, static_cast<size_t>(n), &t.data);
    inputs.push_back(std::move(t));
  }
  InferOptions io;
  io.version = o.version;
  return BuildInferRequest(o.model, inputs, io);
}

absl::StatusOr<std::vector<PerfLevel>> RunPerf(PerfTransport* transport,
                                               const inference::ModelInferRequest& request,
                                               const PerfOptions& o,
                                               const std::function<void(const PerfLevel&)>& on_level) {
  std::vector<PerfLevel> levels;
  for (int n : o.concurrency) {
    std::vector<std::unique_ptr<PerfWorker>> workers;
    for (int i = 0; i < n; ++i) {
      auto w = transport->NewWorker(request);
      if (!w.ok()) return w.status();
      workers.push_back(std::move(*w));
    }
    std::mutex mu;
    std::vector<Sample> samples;
    std::string first_error;
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, worker = workers[i].get()] {
        while (!stop.load()) {
          absl::Time t0 = absl::Now();
          absl::Status s = worker->Infer();
          absl::Time t1 = absl::Now();
          std::lock_guard<std::mutex> l(mu);
          samples.push_back({t1, absl::ToInt64Nanoseconds(t1 - t0), s.ok()});
          if (!s.ok() && first_error.empty()) first_error = s.ToString();
        }
      });
    }
    std::vector<absl::Time> bounds = {absl::Now()};
    std::vector<ServerTotals> server = {Totals(transport, o)};
    std::vector<double> tput, mean;
    PerfLevel level;
    level.concurrency = n;
    for (int w = 0; w < o.max_windows; ++w) {
      absl::SleepFor(o.window);
      absl::Time end = absl::Now();
      server.push_back(Totals(transport, o));
      int64_t count = 0, sum = 0;
      {
        std::lock_guard<std::mutex> l(mu);
        for (const Sample& s : samples)
          if (s.ok && s.end >= bounds.back() && s.end < end) {
            ++count;
            sum += s.latency_ns;
          }
      }
      tput.push_back(static_cast<double>(count) / absl::ToDoubleSeconds(end - bounds.back()));
      mean.push_back(count ? static_cast<double>(sum) / count : 0);
      bounds.push_back(end);
      level.windows = w + 1;
      int k = o.stable_windows;
      if (static_cast<int>(tput.size()) >= k) {
        double t_avg = 0, m_avg = 0;
        for (int i = 0; i < k; ++i) {
          t_avg += tput[tput.size() - 1 - i] / k;
          m_avg += mean[mean.size() - 1 - i] / k;
        }
        bool ok = t_avg > 0;
        for (int i = 0; i < k && ok; ++i) {
          ok = std::abs(tput[tput.size() - 1 - i] - t_avg) <= o.stability * t_avg &&
               std::abs(mean[mean.size() - 1 - i] - m_avg) <= o.stability * m_avg;
        }
        if (ok) {
          level.stable = true;
          break;
        }
      }
    }
    stop = true;
    for (std::thread& t : threads) t.join();
    int k = std::min<int>(o.stable_windows, static_cast<int>(bounds.size()) - 1);
    absl::Time from = bounds[bounds.size() - 1 - k], to = bounds.back();
    std::vector<int64_t> lat;
    double total = 0;
    for (const Sample& s : samples) {
      if (s.end < from || s.end >= to) continue;
      if (!s.ok) {
        ++level.errors;
        continue;
      }
      lat.push_back(s.latency_ns);
      total += static_cast<double>(s.latency_ns);
    }
    level.requests = static_cast<int64_t>(lat.size());
    level.first_error = first_error;
    level.throughput = static_cast<double>(lat.size()) / absl::ToDoubleSeconds(to - from);
    level.avg_ms = lat.empty() ? 0 : total / static_cast<double>(lat.size()) * 1e-6;
    level.p50_ms = Percentile(lat, 0.50);
    level.p90_ms = Percentile(lat, 0.90);
    level.p95_ms = Percentile(lat, 0.95);
    level.p99_ms = Percentile(lat, 0.99);
    const ServerTotals& a = server[server.size() - 1 - k];
    const ServerTotals& b = server.back();
    if (b.success > a.success) {
      double reqs = static_cast<double>(b.success - a.success);
      level.server_request_us = (b.success_ns - a.success_ns) / reqs * 1e-3;
      level.server_queue_us = (b.queue_ns - a.queue_ns) / reqs * 1e-3;
      level.server_input_us = (b.input_ns - a.input_ns) / reqs * 1e-3;
      level.server_infer_us = (b.infer_ns - a.infer_ns) / reqs * 1e-3;
      level.server_output_us = (b.output_ns - a.output_ns) / reqs * 1e-3;
    }
    if (b.executions > a.executions)
      level.server_avg_batch = static_cast<double>(b.inferences - a.inferences) /
                               static_cast<double>(b.executions - a.executions);
    if (on_level) on_level(level);
    levels.push_back(level);
  }
  return levels;
}

std::string FormatPerfLevel(const PerfLevel& l) {
  std::string s = absl::StrFormat(
      "concurrency %d: %.1f infer/s, latency p50 %.3f ms, p90 %.3f ms, p95 %.3f ms, p99 %.3f ms, "
      "avg %.3f ms "
      "(%d requests, %d errors, %s after %d windows)\n"
      "  server per request: total %.1f us = queue %.1f us + compute input %.1f us + infer %.1f us"
      " + output %.1f us; avg batch %.2f",
      l.concurrency, l.throughput, l.p50_ms, l.p90_ms, l.p95_ms, l.p99_ms, l.avg_ms, l.requests, l.errors,
      l.stable ? "stable" : "NOT stable", l.windows, l.server_request_us, l.server_queue_us,
      l.server_input_us, l.server_infer_us, l.server_output_us, l.server_avg_batch);
  if (!l.first_error.empty()) absl::StrAppend(&s, "\n  first error: ", l.first_error);
  return s;
}

}  // namespace kiln

#include "clients/perf_cli.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "clients/perf_export.h"

namespace kiln {
namespace {

int Fail(const absl::Status& s, int code) {
  std::fprintf(stderr, "kiln: %s\n", s.ToString().c_str());
  return code;
}

void PrintBenchLines(const std::string& prefix, const PerfLevel& l) {
  std::string p = absl::StrCat(prefix, "_c", l.concurrency);
  std::printf(
      "%s_throughput: %.1f infer/s\n%s_p50: %.3f ms\n%s_p90: %.3f ms\n%s_p95: %.3f ms\n"
      "%s_p99: %.3f ms\n%s_server_avg_batch: %.2f rows\n",
      p.c_str(), l.throughput, p.c_str(), l.p50_ms, p.c_str(), l.p90_ms, p.c_str(), l.p95_ms,
      p.c_str(), l.p99_ms, p.c_str(), l.server_avg_batch);
}

// Rewrites the export files with the levels so far.
absl::Status Export(const PerfCommand& c, const PerfRunInfo& info,
                    const std::vector<PerfLevel>& levels) {
  if (!c.export_json.empty()) {
    absl::Status s = WriteFileAtomically(c.export_json, PerfJson(info, levels));
    if (!s.ok()) return s;
  }
  if (!c.export_csv.empty()) return WriteFileAtomically(c.export_csv, PerfCsv(info, levels));
  return absl::OkStatus();
}

}  // namespace

void AddPerfFlags(FlagParser* flags, PerfFlags* f) {
  flags->AddString("protocol", &f->protocol,
                   "perf: grpc or http (KServe v2 REST with binary tensor data; --url is then "
                   "the HTTP port, default localhost:8000)");
  flags->AddString("concurrency", &f->concurrency,
                   "perf: N, START:END (doubling), START:END:STEP or N,N,...");
  flags->AddList("shape", &f->shapes, "perf: NAME=d,d,... full input shape (repeat)");
  flags->AddInt("batch", &f->batch, "perf: rows per request for batching models");
  flags->AddInt("window-ms", &f->window_ms, "perf: measurement window");
  flags->AddDouble("stability", &f->stability, "perf: allowed relative spread between windows");
  flags->AddInt("max-windows", &f->max_windows, "perf: windows per level at most");
  flags->AddString("export-json", &f->export_json,
                   "perf: write settings + one record per level as JSON to FILE");
  flags->AddString("export-csv", &f->export_csv,
                   "perf: write one CSV row per level (with a header row) to FILE");
  flags->AddString("bench-prefix", &f->bench_prefix,
                   "perf: also print 'PREFIX_cN_...: value unit' lines (tools/bench)");
  flags->AddString("shared-memory", &f->shared_memory,
                   "perf: none or system (one POSIX shm region per worker holds every input "
                   "and output; keys /kiln_perf_...: kilnd needs --shm-allow=/kiln_perf)");
  flags->AddInt("output-shared-memory-size", &f->output_shared_memory_size,
                "perf: bytes per output in shared memory (default: from the model's metadata, "
                "or one probe inference)");
}

absl::StatusOr<PerfCommand> ResolvePerfFlags(const PerfFlags& f, const std::string& model,
                                             const std::string& version,
                                             const ClientOptions& client, bool url_set) {
  if (model.empty()) return absl::InvalidArgumentError("perf needs --model");
  auto protocol = ParseProtocol(f.protocol);
  if (!protocol.ok()) return protocol.status();
  PerfCommand c;
  c.transport.protocol = *protocol;
  c.transport.client = client;
  if (!url_set) c.transport.client.address = DefaultAddress(*protocol);
  c.options.model = model;
  c.options.version = version;
  auto levels = ParseConcurrency(f.concurrency);
  if (!levels.ok()) return levels.status();
  c.options.concurrency = *levels;
  for (const std::string& s : f.shapes) {
    absl::Status st = ParseShape(s, &c.options.shapes);
    if (!st.ok()) return st;
  }
  if (f.batch < 1 || f.batch > (int64_t{1} << 20))
    return absl::InvalidArgumentError("--batch: 1 .. 1048576");
  if (f.window_ms < 10 || f.window_ms > 3600 * 1000)
    return absl::InvalidArgumentError("--window-ms: 10 .. 3600000");
  if (f.max_windows < 3 || f.max_windows > 10000)
    return absl::InvalidArgumentError("--max-windows: 3 .. 10000");
  if (!(f.stability > 0 && f.stability <= 10))
    return absl::InvalidArgumentError("--stability: above 0, at most 10");
  auto shm = ParseSharedMemoryMode(f.shared_memory);
  if (!shm.ok()) return shm.status();
  if (f.output_shared_memory_size < 0 ||
      static_cast<uint64_t>(f.output_shared_memory_size) > kMaxPerfShmBytes)
    return absl::InvalidArgumentError(
        absl::StrCat("--output-shared-memory-size: 1 .. ", kMaxPerfShmBytes));
  if (f.output_shared_memory_size > 0 && *shm == SharedMemoryMode::kNone)
    return absl::InvalidArgumentError("--output-shared-memory-size needs --shared-memory system");
  c.shared_memory = *shm;
  c.output_shared_memory_bytes = static_cast<uint64_t>(f.output_shared_memory_size);
  c.options.batch = f.batch;
  c.options.window = absl::Milliseconds(f.window_ms);
  c.options.stability = f.stability;
  c.options.max_windows = static_cast<int>(f.max_windows);
  c.export_json = f.export_json;
  c.export_csv = f.export_csv;
  c.bench_prefix = f.bench_prefix;
  return c;
}

int RunPerfCommand(const PerfCommand& c) {
  // A path that cannot be written fails now, not after a long sweep.
  for (const std::string* path : {&c.export_json, &c.export_csv}) {
    if (path->empty()) continue;
    if (absl::Status s = CheckExportPath(*path); !s.ok()) return Fail(s, 2);
  }
  // Before any thread exists: SIGINT / SIGTERM then remove the regions.
  std::unique_ptr<PerfSignalCleanup> signals;
  if (c.shared_memory == SharedMemoryMode::kSystem) signals.reset(new PerfSignalCleanup());
  auto transport = NewPerfTransport(c.transport);
  if (!transport.ok())
    return Fail(transport.status(),
                transport.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1);
  auto request = MakePerfRequest(transport->get(), c.options);
  if (!request.ok()) return Fail(request.status(), 1);
  PerfRunInfo info = MakePerfRunInfo(c.options, *request, ProtocolName(c.transport.protocol),
                                     c.transport.client.address);
  info.shared_memory = SharedMemoryModeName(c.shared_memory);
  std::vector<PerfLevel> done;
  absl::Status export_status;
  auto on_level = [&](const PerfLevel& l) {
    std::printf("%s\n", FormatPerfLevel(l).c_str());
    if (!c.bench_prefix.empty()) PrintBenchLines(c.bench_prefix, l);
    std::fflush(stdout);
    done.push_back(l);
    if (export_status.ok()) export_status = Export(c, info, done);
  };
  auto r = c.shared_memory == SharedMemoryMode::kSystem
               ? RunPerfWithSharedMemory(transport->get(), *request, c.options,
                                         c.output_shared_memory_bytes, signals.get(), on_level)
               : RunPerf(transport->get(), *request, c.options, on_level);
  if (!r.ok()) return Fail(r.status(), 1);
  if (!export_status.ok()) return Fail(export_status, 1);
  for (const PerfLevel& l : *r)
    if (l.requests == 0) return 1;
  return 0;
}

}  // namespace kiln

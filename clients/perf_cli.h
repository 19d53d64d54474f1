// The `kiln perf` command of the kiln CLI: its flags, their checks and the
// run (printing each level, rewriting the --export-json / --export-csv
// files after every level).
//
//   kiln perf --model M [--protocol grpc|http] [--url host:port]
//             [--concurrency 1:16] [--shape NAME=d,d,...] [--batch N]
//             [--window-ms 1000] [--stability 0.1] [--max-windows 10]
//             [--export-json FILE] [--export-csv FILE] [--bench-prefix P]
//             [--shared-memory none|system] [--output-shared-memory-size BYTES]
//
// --url is the address of the chosen protocol: the gRPC port
// (default localhost:8001) or the HTTP/REST port (default localhost:8000,
// or an http:// / https:// URL). --shared-memory system: perf_shm.h.
//
// Thread safety: thread-compatible; RunPerfCommand blocks.
#ifndef KILN_CLIENTS_PERF_CLI_H_
#define KILN_CLIENTS_PERF_CLI_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "clients/perf.h"
#include "clients/perf_shm.h"
#include "clients/perf_transport.h"
#include "server/flags.h"

namespace kiln {

// The perf-only flags (bound to `flags` by AddPerfFlags).
struct PerfFlags {
  std::string protocol = "grpc";
  std::string concurrency = "1";
  std::vector<std::string> shapes;
  int64_t batch = 1, window_ms = 1000, max_windows = 10;
  double stability = 0.10;
  std::string bench_prefix, export_json, export_csv;
  std::string shared_memory = "none";
  int64_t output_shared_memory_size = 0;  // 0: from metadata / a probe
};
void AddPerfFlags(FlagParser* flags, PerfFlags* f);

// A checked perf command line.
struct PerfCommand {
  PerfOptions options;
  PerfTransportOptions transport;
  std::string export_json, export_csv, bench_prefix;
  SharedMemoryMode shared_memory = SharedMemoryMode::kNone;
  uint64_t output_shared_memory_bytes = 0;
};

// Checks the perf flags; INVALID_ARGUMENT (a usage error) names the bad
// flag. `client` holds the common connection flags (--url as
// client.address); `url_set`: whether --url was given, if not the
// protocol's default address is used.
absl::StatusOr<PerfCommand> ResolvePerfFlags(const PerfFlags& flags, const std::string& model,
                                             const std::string& version,
                                             const ClientOptions& client, bool url_set);

// Runs it: exit status 0 ok, 1 the server failed or a level finished no
// request, 2 an export file cannot be written (checked before the run) or
// a bad address.
int RunPerfCommand(const PerfCommand& command);

}  // namespace kiln

#endif  // KILN_CLIENTS_PERF_CLI_H_

// `kiln perf --export-json FILE` / `--export-csv FILE`: the measured levels
// (one record per concurrency level, every PerfLevel field) as JSON with the
// run's settings, or as CSV with a header row. Numbers are plain decimals
// rounded to fixed places (throughput and server times 3, milliseconds 4,
// so 0.1 us); strings are escaped (JSON) or quoted per RFC 4180 (CSV).
//
// JSON: {"format": "kiln-perf/1", "settings": {model, model_version,
// protocol, url, batch, shapes: {input: [dims]}, window_ms, stability,
// stable_windows, max_windows, concurrency: [...]}, "levels": [{...}]}.
// CSV: model,protocol,concurrency,throughput_infer_per_sec,...,first_error.
//
// Files are written atomically: a temporary file in the same directory,
// then rename(2), so a reader sees the old file or the whole new one.
//
// Thread safety: pure functions (the writers touch only their own files).
#ifndef KILN_CLIENTS_PERF_EXPORT_H_
#define KILN_CLIENTS_PERF_EXPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "clients/perf.h"

namespace kiln {

// The settings of a run, as exported with its levels.
struct PerfRunInfo {
  std::string model, version, protocol, url;
  std::string shared_memory = "none";  // --shared-memory
  int64_t batch = 1;
  // The shapes of the request that was sent, per input.
  std::map<std::string, std::vector<int64_t>> shapes;
  int64_t window_ms = 0;
  double stability = 0;
  int stable_windows = 0, max_windows = 0;
  std::vector<int> concurrency;
};

// The run info of `options` + `request` (shapes from the request's inputs).
PerfRunInfo MakePerfRunInfo(const PerfOptions& options, const inference::ModelInferRequest& request,
                            const std::string& protocol, const std::string& url);

std::string PerfJson(const PerfRunInfo& info, const std::vector<PerfLevel>& levels);
std::string PerfCsv(const PerfRunInfo& info, const std::vector<PerfLevel>& levels);
// One CSV field, quoted when it holds a comma, quote, CR or LF.
std::string CsvField(const std::string& s);

// Whether `path` can be written: its directory exists and takes a new file
// (tried with a temporary file, removed again), and `path` is not a
// directory. INVALID_ARGUMENT naming the path and the reason.
absl::Status CheckExportPath(const std::string& path);
// Writes `content` to `path` atomically (temp file + fsync + rename).
absl::Status WriteFileAtomically(const std::string& path, const std::string& content);

}  // namespace kiln

#endif  // KILN_CLIENTS_PERF_EXPORT_H_

#include "clients/perf_export.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

using Json = nlohmann::ordered_json;

// `v` rounded to `places` decimals. Rounded values print as plain decimals
// (nlohmann switches to exponents only below 1e-4 or from 1e15 up).
double Round(double v, int places) {
  const double scale = std::pow(10.0, places);
  return std::round(v * scale) / scale;
}

// A CSV number with fixed places; empty when not finite.
std::string Fixed(double v, int places) {
  if (!std::isfinite(v)) return "";
  return absl::StrFormat("%.*f", places, v);
}

Json LevelJson(const PerfLevel& l) {
  Json j;
  j["concurrency"] = l.concurrency;
  j["throughput_infer_per_sec"] = Round(l.throughput, 3);
  j["latency_avg_ms"] = Round(l.avg_ms, 4);
  j["latency_p50_ms"] = Round(l.p50_ms, 4);
  j["latency_p90_ms"] = Round(l.p90_ms, 4);
  j["latency_p95_ms"] = Round(l.p95_ms, 4);
  j["latency_p99_ms"] = Round(l.p99_ms, 4);
  j["requests"] = l.requests;
  j["errors"] = l.errors;
  j["first_error"] = l.first_error;
  j["stable"] = l.stable;
  j["windows"] = l.windows;
  j["server_request_us"] = Round(l.server_request_us, 3);
  j["server_queue_us"] = Round(l.server_queue_us, 3);
  j["server_compute_input_us"] = Round(l.server_input_us, 3);
  j["server_compute_infer_us"] = Round(l.server_infer_us, 3);
  j["server_compute_output_us"] = Round(l.server_output_us, 3);
  j["server_avg_batch"] = Round(l.server_avg_batch, 3);
  return j;
}

constexpr const char* kCsvColumns[] = {
    "model", "protocol", "concurrency", "throughput_infer_per_sec", "latency_avg_ms",
    "latency_p50_ms", "latency_p90_ms", "latency_p95_ms", "latency_p99_ms", "requests", "errors",
    "stable", "windows", "server_request_us", "server_queue_us", "server_compute_input_us",
    "server_compute_infer_us", "server_compute_output_us", "server_avg_batch", "first_error"};

std::string Errno(const std::string& what, const std::string& path) {
  return absl::StrCat(what, " ", path, ": ", std::strerror(errno));
}

// Creates a new temporary file next to `path`; its name goes to `tmp`.
int MakeTemp(const std::string& path, std::string* tmp) {
  std::string name = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(name.data());
  if (fd >= 0) *tmp = name;
  return fd;
}

}  // namespace

PerfRunInfo MakePerfRunInfo(const PerfOptions& o, const inference::ModelInferRequest& request,
                            const std::string& protocol, const std::string& url) {
  PerfRunInfo info;
  info.model = o.model;
  info.version = o.version;
  info.protocol = protocol;
  info.url = url;
  info.batch = o.batch;
  for (const auto& in : request.inputs())
    info.shapes[in.name()] = std::vector<int64_t>(in.shape().begin(), in.shape().end());
  info.window_ms = absl::ToInt64Milliseconds(o.window);
  info.stability = o.stability;
  info.stable_windows = o.stable_windows;
  info.max_windows = o.max_windows;
  info.concurrency = o.concurrency;
  return info;
}

std::string PerfJson(const PerfRunInfo& info, const std::vector<PerfLevel>& levels) {
  Json settings;
  settings["model"] = info.model;
  settings["model_version"] = info.version;
  settings["protocol"] = info.protocol;
  settings["url"] = info.url;
  settings["shared_memory"] = info.shared_memory;
  settings["batch"] = info.batch;
  Json shapes = Json::object();
  for (const auto& [name, dims] : info.shapes) shapes[name] = dims;
  settings["shapes"] = std::move(shapes);
  settings["window_ms"] = info.window_ms;
  settings["stability"] = Round(info.stability, 4);
  settings["stable_windows"] = info.stable_windows;
  settings["max_windows"] = info.max_windows;
  settings["concurrency"] = info.concurrency;
  Json out;
  out["format"] = "kiln-perf/1";
  out["settings"] = std::move(settings);
  Json array = Json::array();
  for (const PerfLevel& l : levels) array.push_back(LevelJson(l));
  out["levels"] = std::move(array);
  return out.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string PerfCsv(const PerfRunInfo& info, const std::vector<PerfLevel>& levels) {
  std::string out = absl::StrJoin(kCsvColumns, ",") + "\n";
  for (const PerfLevel& l : levels) {
    std::vector<std::string> row = {
        CsvField(info.model),
        CsvField(info.protocol),
        absl::StrCat(l.concurrency),
        Fixed(l.throughput, 3),
        Fixed(l.avg_ms, 4),
        Fixed(l.p50_ms, 4),
        Fixed(l.p90_ms, 4),
        Fixed(l.p95_ms, 4),
        Fixed(l.p99_ms, 4),
        absl::StrCat(l.requests),
        absl::StrCat(l.errors),
        l.stable ? "true" : "false",
        absl::StrCat(l.windows),
        Fixed(l.server_request_us, 3),
        Fixed(l.server_queue_us, 3),
        Fixed(l.server_input_us, 3),
        Fixed(l.server_infer_us, 3),
        Fixed(l.server_output_us, 3),
        Fixed(l.server_avg_batch, 3),
        CsvField(l.first_error),
    };
    absl::StrAppend(&out, absl::StrJoin(row, ","), "\n");
  }
  return out;
}

absl::Status CheckExportPath(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("export: empty file name");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat("export: ", path, " is a directory"));
  std::string tmp;
  int fd = MakeTemp(path, &tmp);
  if (fd < 0) return absl::InvalidArgumentError(Errno("export: cannot create a file next to", path));
  ::close(fd);
  ::unlink(tmp.c_str());
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& content) {
  std::string tmp;
  int fd = MakeTemp(path, &tmp);
  if (fd < 0) return absl::UnavailableError(Errno("cannot create a file next to", path));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = absl::UnavailableError(Errno("cannot write", tmp));
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  // mkstemp makes 0600; an export is an ordinary file.
  ::fchmod(fd, 0644);
  const bool synced = ::fsync(fd) == 0;
  if (::close(fd) != 0 || !synced) {
    absl::Status s = absl::UnavailableError(Errno("cannot write", tmp));
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = absl::UnavailableError(Errno("cannot rename to", path));
    ::unlink(tmp.c_str());
    return s;
  }
  return absl::OkStatus();
}

}  // namespace kiln

// Cold start (issue 12, item 4): each measurement is a new `kiln run`
// process, so nothing of an earlier run is in memory, with its kernel cache
// in a new empty directory (KILN_CACHE_DIR) unless said otherwise. Prints,
// medians of --runs runs:
//   start_resnet18_t<T>_process: S s        the whole process: load, first call, 2 replays
//   start_resnet18_t<T>_load: X ms          the model loaded (parse, weights on the device)
//   start_resnet18_t<T>_first_call: X ms    schedule, compile, run (its kernel count below)
//   start_resnet18_t<T>_load_first_call: X ms   the two together (goal: under 1000)
//   start_resnet18_t<T>_kernels_compiled: N count
//   start_resnet18_t<T>_warm_call: X ms     a JIT replay
// and for the BERT-style encoder at a sequence length it has not run
// (its kernel cache warm from length 128, as a server's would be):
//   start_bert_new_length_t<T>_first_call: X ms, ..._kernels_compiled: N count,
//   start_bert_new_length_t<T>_warm_call: X ms,
//   start_bert_new_length_t<T>_first_over_warm: R x   (goal: at most 3)
// Needs the zoo (tools/fetch_testdata) and the kiln CLI; run from the
// repository root (tools/bench start does).
//   start_bench [--kiln PATH] [--threads N] [--runs N]
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/bench/bench_util.h"

namespace kiln::bench {
namespace {

struct Options {
  std::string kiln = "bazel-out/k8-opt/bin/clients/kiln";
  int threads = 2;
  int runs = 3;
};

std::string ZooDir() {
  if (const char* d = std::getenv("KILN_DATA")) return std::string(d) + "/zoo";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/kiln/data/zoo";
}

// What one `kiln run` printed, and its wall time.
struct Run {
  bool ok = false;
  double seconds = 0, load_ms = 0, first_ms = 0, warm_ms = 0;
  double compiled = 0;
};

// Runs `kiln run ARGS --repeat 3` with the kernel cache in `cache`.
Run KilnRun(const Options& o, const std::string& cache, const std::string& args) {
  const std::string out = cache + ".out";
  const std::string cmd = "KILN_CACHE_DIR='" + cache + "' KILN_THREADS=" +
                          std::to_string(o.threads) + " '" + o.kiln + "' run " + args +
                          " --repeat 3 > '" + out + "' 2>&1";
  Run r;
  const double t0 = Now();
  const int rc = std::system(cmd.c_str());
  r.seconds = Now() - t0;
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  std::smatch m;
  const bool loaded = std::regex_search(s, m, std::regex(R"(loaded in ([0-9.]+) ms)"));
  if (loaded) r.load_ms = std::stod(m[1]);
  const std::regex latency(
      R"(first ([0-9.]+) ms \(incl\. ([0-9]+) kernel compiles.*median of [0-9]+: ([0-9.]+) ms)");
  if (rc == 0 && loaded && std::regex_search(s, m, latency)) {
    r.first_ms = std::stod(m[1]);
    r.compiled = std::stod(m[2]);
    r.warm_ms = std::stod(m[3]);
    r.ok = true;
  } else {
    std::fprintf(stderr, "start_bench: `%s` failed:\n%s\n", cmd.c_str(), s.c_str());
  }
  return r;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// A new empty directory under $TMPDIR.
std::string NewDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string t = std::string(tmp ? tmp : "/tmp") + "/kiln_start_XXXXXX";
  std::vector<char> buf(t.begin(), t.end());
  buf.push_back('\0');
  return mkdtemp(buf.data()) ? std::string(buf.data()) : "";
}

void ReportRuns(const std::string& name, const std::vector<Run>& runs, bool process) {
  std::vector<double> wall, load, first, both, compiled, warm;
  for (const Run& r : runs) {
    if (!r.ok) continue;
    wall.push_back(r.seconds);
    load.push_back(r.load_ms);
    first.push_back(r.first_ms);
    both.push_back(r.load_ms + r.first_ms);
    compiled.push_back(r.compiled);
    warm.push_back(r.warm_ms);
  }
  if (first.empty()) return Report(name + "_error", 1, "count");
  if (process) {
    Report(name + "_process", Median(wall), "s");
    Report(name + "_load", Median(load), "ms");
  }
  Report(name + "_first_call", Median(first), "ms");
  if (process) Report(name + "_load_first_call", Median(both), "ms");
  Report(name + "_kernels_compiled", Median(compiled), "count");
  Report(name + "_warm_call", Median(warm), "ms");
  if (!process) Report(name + "_first_over_warm", Median(first) / Median(warm), "x");
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--kiln" && i + 1 < argc) {
      o.kiln = argv[++i];
    } else if (a == "--threads" && i + 1 < argc) {
      o.threads = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--runs" && i + 1 < argc) {
      o.runs = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: start_bench [--kiln PATH] [--threads N] [--runs N]\n");
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  const std::string zoo = ZooDir(), t = "_t" + std::to_string(o.threads);
  const std::string resnet = "--model " + zoo + "/resnet18/op17.onnx --input input=" + zoo +
                             "/resnet18/b1/input.npy";
  std::vector<std::string> dirs;
  auto dir = [&] { return dirs.emplace_back(NewDir()); };
  std::vector<Run> runs;
  for (int i = 0; i < o.runs; ++i) runs.push_back(KilnRun(o, dir(), resnet));
  ReportRuns("start_resnet18" + t, runs, true);

  const std::string bert = "--model " + zoo + "/bert_encoder/op17.onnx";
  auto shapes = [](int len) {
    std::string s;
    for (const char* in : {"input_ids", "token_type_ids", "attention_mask"})
      s += std::string(" --shape ") + in + "=1x" + std::to_string(len);
    return s;
  };
  runs.clear();
  for (int i = 0; i < o.runs; ++i) {
    const std::string cache = dir();
    if (!KilnRun(o, cache, bert + shapes(128)).ok) continue;  // the cache a server has
    runs.push_back(KilnRun(o, cache, bert + shapes(100 + 3 * i)));
  }
  ReportRuns("start_bert_new_length" + t, runs, false);
  std::error_code ec;
  for (const std::string& d : dirs) {
    std::filesystem::remove_all(d, ec);
    std::filesystem::remove(d + ".out", ec);
  }
  return 0;
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) { return kiln::bench::Main(argc, argv); }

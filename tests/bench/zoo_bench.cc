// The model zoo ($KILN_DATA/zoo, tests/zoo) through kiln (JIT replay, CPU)
// and onnxruntime-node in the same run, on each case's own .npy inputs.
// For every model of the manifest: one opset (17, else the highest present),
// batches 1 and 8 (those present: detectors have batch 1 only). kiln times a
// model's cases, then tests/bench/zoo_ort_bench.js times the same cases, so
// both see the same machine state. Prints per case
//   zoo_<model>_b<batch>_t<threads>_kiln: X ms      median JIT replay (--ops: fastest)
//   zoo_<model>_b<batch>_t<threads>_gflops: G GFLOP/s   JIT flop estimate / X
//   zoo_<model>_b<batch>_t<threads>_peak: P %      G / (peak per core x threads)
//   zoo_<model>_b<batch>_t<threads>_ort: Y ms       onnxruntime-node median
//   zoo_<model>_b<batch>_t<threads>_ratio: X/Y x    below 1: kiln is faster
// (a case kiln fails: `..._error: 1 count` and the message on stderr; one
// onnxruntime fails: `..._ort_error: 1 count`), and at the end
//   zoo_geomean_ratio[_b1|_b8]_t<threads>: R x   and   zoo_errors_t<threads>: N count.
// With --ops it runs the operation zoo instead ($KILN_DATA/ops, one small
// graph per operation, tools/zoo/export_ops.py): the same lines with `op_`
// for `zoo_` (op_attention_b1_t1_ratio: ..., op_geomean_ratio_t1: ...), kernel-
// level figures since each graph is one operation or one fused group. There
// both sides report their fastest of up to 100 runs, not the median:
// onnxruntime-node's time for a graph this small swings by up to 15x between
// runs on this VM (page faults as it fills fresh output and scratch memory;
// a few runs at 0.45 ms, then dozens at 7-8 ms for one depthwise convolution),
// and the fastest run is its kernels' own cost.
// Peak: 254 GFLOP/s per core with AVX-512, 126 without (BENCHMARKS.md).
// Needs tools/fetch_testdata (the zoo, onnxruntime-node in $KILN_DATA); run
// from the repository root (tools/bench zoo does) or with `bazel run`.
//   zoo_bench [--threads N] [--ops] [--quick] [--list] [filter]
//     --threads N  kiln's CPU workers (KILN_THREADS) and onnxruntime's
//                  intra-op threads (default 1)
//     --ops        the operation zoo instead of the model zoo
//     --quick      batch 1 only, fewer repetitions
//     --list       print the selected cases and exit
//     filter       substring of `<model>_b<batch>`
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/base/flags.h"
#include "engine/jit/jit.h"
#include "engine/onnx/model.h"
#include "engine/onnx/npy.h"
#include "engine/runtime/device.h"
#include "tests/bench/bench_util.h"
#include "tests/zoo/zoo_manifest.h"

namespace kiln::bench {
namespace {

struct Options {
  int threads = 1;
  bool quick = false;
  bool list = false;
  std::string set = "zoo";    // ZooDir's set: "zoo" or "ops"
  std::string prefix = "zoo";  // of every printed name
  std::string filter;
  bool min = false;  // report the fastest run instead of the median (--ops)
  int reps() const { return quick ? 5 : min ? 100 : 20; }
  double budget() const { return quick ? 1.5 : 5.0; }  // seconds per case and side
};

std::string DataDir() {
  if (const char* d = std::getenv("KILN_DATA")) return d;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/kiln/data";
}

// 'x' -> 'x' quoted for sh.
std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The cases to run, grouped by model (manifest order): per model name one
// opset (17, else the highest present), every batch of that opset (only 1
// with --quick) whose `<name>_b<batch>` contains the filter.
std::vector<std::vector<ZooCase>> SelectCases(const std::vector<ZooCase>& all, const Options& o) {
  std::map<std::string, int> opset;
  std::vector<std::string> order;
  for (const ZooCase& c : all) {
    auto [it, added] = opset.emplace(c.name, c.opset);
    if (added) order.push_back(c.name);
    int& best = it->second;
    if (best != 17 && (c.opset == 17 || c.opset > best)) best = c.opset;
  }
  std::vector<std::vector<ZooCase>> groups;
  for (const std::string& name : order) {
    std::vector<ZooCase> g;
    for (const ZooCase& c : all) {
      if (c.name != name || c.opset != opset[name]) continue;
      if (c.batch != 1 && (o.quick || c.batch != 8)) continue;
      std::string key = c.name + "_b" + std::to_string(c.batch);
      if (!o.filter.empty() && key.find(o.filter) == std::string::npos) continue;
      g.push_back(c);
    }
    if (!g.empty()) groups.push_back(std::move(g));
  }
  return groups;
}

std::string Key(const ZooCase& c) { return c.name + "_b" + std::to_string(c.batch); }

// The case's inputs as CPU tensors, in the model's input order (matched by
// name with the manifest's).
absl::StatusOr<std::vector<Tensor>> LoadInputs(const std::string& dir, const ZooCase& c,
                                               const OnnxModel& model, Engine* e) {
  std::map<std::string, std::string> paths(c.inputs.begin(), c.inputs.end());
  std::vector<Tensor> ins;
  for (const ValueInfo& vi : model.inputs()) {
    auto it = paths.find(vi.name);
    if (it == paths.end())
      return absl::InvalidArgumentError("no .npy for model input '" + vi.name + "'");
    auto h = ReadNpy(dir + "/" + it->second);
    if (!h.ok()) return h.status();
    Tensor t = h->ToTensor(e, "CPU");
    if (absl::Status st = t.Realize(); !st.ok()) return st;
    ins.push_back(std::move(t));
  }
  if (ins.size() != c.inputs.size())
    return absl::InvalidArgumentError("the manifest lists inputs the model does not have");
  return ins;
}

struct KilnTime {
  double ms = 0, flops = 0;
};

// Compiles (call 1), captures (call 2), then times the replays (Options::min).
absl::StatusOr<KilnTime> TimeKiln(Jit* jit, const std::vector<Tensor>& ins, const Options& o,
                                  const std::string& tag) {
  for (int i = 0; i < 2; ++i) {
    auto r = jit->Call(ins);
    if (!r.ok()) return r.status();
  }
  absl::Status status;
  Jit::Result last;
  bool plain = false;
  double s = TimedSeconds(
      [&] {
        if (!status.ok()) return;
        auto r = jit->Call(ins);
        if (!r.ok()) {
          status = r.status();
          return;
        }
        plain |= r->path != Jit::Path::kReplay;
        last = std::move(*r);
      },
      o.reps(), 1, o.budget(), o.min);
  if (!status.ok()) return status;
  if (plain) std::fprintf(stderr, "zoo_bench: %s: some timed calls were not replays\n", tag.c_str());
  return KilnTime{s * 1e3, last.flops};
}

// Runs zoo_ort_bench.js on `cases` (one model) and returns onnxruntime's
// median ms per Key(); a case missing from the map failed there.
std::map<std::string, double> TimeOrt(const std::string& dir, const std::vector<ZooCase>& cases,
                                      const Options& o) {
  std::string script = "tests/bench/zoo_ort_bench.js";
  if (const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY")) script = std::string(ws) + "/" + script;
  std::string cmd = "NODE_PATH=" + Quote(DataDir() + "/ort/node_modules") + " node " +
                    Quote(script) + " " + Quote(dir) + " " + std::to_string(o.threads) + " " +
                    std::to_string(o.reps()) + " " +
                    std::to_string(static_cast<int>(o.budget() * 1000)) + " " +
                    (o.min ? "min " : "median ") + Quote(cases[0].model);
  for (const ZooCase& c : cases) {
    std::string ins;
    for (const auto& [name, path] : c.inputs) ins += (ins.empty() ? "" : ",") + name + "=" + path;
    cmd += " " + Quote(Key(c) + ":" + ins);
  }
  std::map<std::string, double> ms;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return ms;
  char line[1024];
  while (std::fgets(line, sizeof(line), p)) {
    std::string l = line;
    size_t colon = l.find(':');
    if (l.rfind("ort_", 0) != 0 || colon == std::string::npos) {
      std::fputs(line, stderr);
      continue;
    }
    double v = std::atof(l.c_str() + colon + 1);
    if (v > 0) ms[l.substr(4, colon - 4)] = v;
  }
  int rc = pclose(p);
  if (rc != 0) std::fprintf(stderr, "zoo_bench: %s: zoo_ort_bench.js exited with %d\n",
                            cases[0].name.c_str(), rc);
  return ms;
}

double Geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / v.size());
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  using namespace kiln;
  using namespace kiln::bench;
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      o.quick = true;
    } else if (std::strcmp(argv[i], "--ops") == 0) {
      o.set = "ops";
      o.prefix = "op";
      o.min = true;
    } else if (std::strcmp(argv[i], "--list") == 0) {
      o.list = true;
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      o.threads = std::atoi(argv[++i]);
    } else if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      o.threads = std::atoi(argv[i] + 10);
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr, "usage: zoo_bench [--threads N] [--ops] [--quick] [--list] [filter]\n");
      return 2;
    } else {
      o.filter = argv[i];
    }
  }
  if (o.threads < 1) {
    std::fprintf(stderr, "zoo_bench: --threads wants a positive count\n");
    return 2;
  }
  // Before anything reads the environment snapshot (kiln::Env()).
  setenv("KILN_THREADS", std::to_string(o.threads).c_str(), 1);
  if (Env().threads != o.threads) {
    std::fprintf(stderr, "zoo_bench: KILN_THREADS was read before it was set\n");
    return 1;
  }

  const std::string dir = ZooDir(o.set);
  auto all = ReadZooManifest(dir);
  if (!all.ok()) {
    std::fprintf(stderr, "zoo_bench: %s (run tools/fetch_testdata)\n",
                 std::string(all.status().message()).c_str());
    return 1;
  }
  std::vector<std::vector<ZooCase>> groups = SelectCases(*all, o);
  if (o.list) {
    for (const auto& g : groups)
      for (const ZooCase& c : g)
        std::printf("%s_b%d\top%d\t%s\n", c.name.c_str(), c.batch, c.opset, c.model.c_str());
    return 0;
  }
  if (groups.empty()) {
    std::fprintf(stderr, "zoo_bench: no case matches '%s'\n", o.filter.c_str());
    return 1;
  }

  bool avx512 = false;
#if defined(__x86_64__)
  avx512 = __builtin_cpu_supports("avx512f");
#endif
  const double peak = (avx512 ? 254.0 : 126.0) * o.threads;  // GFLOP/s
  std::printf("# zoo_bench %s: %d thread(s), peak %.0f GFLOP/s (%s), %s\n", o.set.c_str(), o.threads, peak,
              avx512 ? "AVX-512" : "256-bit", dir.c_str());
  std::fflush(stdout);

  auto registry = DeviceRegistry::WithDefaults();
  Engine engine(registry.get());
  const std::string t = "_t" + std::to_string(o.threads);
  std::vector<double> ratios, ratios_b1, ratios_b8;
  int errors = 0;
  for (const std::vector<ZooCase>& group : groups) {
    std::map<std::string, KilnTime> kiln;
    std::vector<ZooCase> ok_cases;
    {
      auto model = OnnxModel::Load(dir + "/" + group[0].model, &engine, "CPU");
      std::unique_ptr<Jit> jit;
      if (model.ok()) {
        const OnnxModel* m = model->get();
        jit = std::make_unique<Jit>([m](const std::vector<Tensor>& in) { return m->Run(in); });
      }
      for (const ZooCase& c : group) {
        std::string name = o.prefix + "_" + Key(c) + t;
        absl::StatusOr<KilnTime> k = absl::UnknownError("");
        if (!model.ok()) {
          k = model.status();
        } else if (auto ins = LoadInputs(dir, c, **model, &engine); !ins.ok()) {
          k = ins.status();
        } else {
          k = TimeKiln(jit.get(), *ins, o, name);
        }
        if (!k.ok()) {
          std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(k.status().message()).c_str());
          Report(name + "_error", 1, "count");
          ++errors;
          continue;
        }
        kiln[Key(c)] = *k;
        ok_cases.push_back(c);
        double gflops = k->flops / (k->ms * 1e-3) * 1e-9;
        Report(name + "_kiln", k->ms, "ms");
        Report(name + "_gflops", gflops, "GFLOP/s");
        Report(name + "_peak", gflops / peak * 100, "%");
      }
    }  // the model and its captures are freed before onnxruntime runs
    if (ok_cases.empty()) continue;
    std::map<std::string, double> ort = TimeOrt(dir, ok_cases, o);
    for (const ZooCase& c : ok_cases) {
      std::string name = o.prefix + "_" + Key(c) + t;
      auto it = ort.find(Key(c));
      if (it == ort.end()) {
        Report(name + "_ort_error", 1, "count");
        ++errors;
        continue;
      }
      double ratio = kiln[Key(c)].ms / it->second;
      Report(name + "_ort", it->second, "ms");
      Report(name + "_ratio", ratio, "x");
      ratios.push_back(ratio);
      (c.batch == 1 ? ratios_b1 : ratios_b8).push_back(ratio);
    }
  }
  if (!ratios.empty()) Report(o.prefix + "_geomean_ratio" + t, Geomean(ratios), "x");
  if (!ratios_b1.empty()) Report(o.prefix + "_geomean_ratio_b1" + t, Geomean(ratios_b1), "x");
  if (!ratios_b8.empty()) Report(o.prefix + "_geomean_ratio_b8" + t, Geomean(ratios_b8), "x");
  Report(o.prefix + "_errors" + t, errors, "count");
  return 0;
}

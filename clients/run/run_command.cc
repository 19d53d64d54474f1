#include "clients/run/run_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/base/status.h"
#include "engine/jit/jit.h"
#include "engine/onnx/model.h"
#include "engine/onnx/npy.h"
#include "engine/runtime/device.h"

namespace kiln {
namespace {

constexpr const char* kUsage = R"(usage: kiln run --model PATH.onnx [options]

Loads an ONNX model into kiln's engine, runs it and reports the result.

options:
  --model PATH          the .onnx file (required)
  --input NAME=FILE     an input as a NumPy .npy file (repeatable)
  --shape NAME=DIMS     shape of a random input, e.g. x=1x3x640x640 (repeatable);
                        inputs without --input get random values (uniform [0,1)
                        for floats, zeros for integers) of this shape, or of the
                        model's declared shape when it has no dynamic dims
  --output-dir DIR      write each output as DIR/NAME.npy
  --device NAME         engine device: CPU (default), INTERP, OPENCL or CUDA
  --no-jit              run every repeat plainly (schedule, lower, launch), to
                        compare with the JIT's replays
  --repeat N            run N times through the JIT (call 1 plain, 2 captures,
                        3+ replay) and report the median latency (default 1)
  --seed S              seed of the random inputs (default 0)
  -h, --help            this text

Environment: DEBUG=2 prints one line per kernel run (time, GFLOP/s, GB/s), 4 also
the kernel sources; KILN_THREADS=N CPU threads; KILN_AVX512=0 keeps CPU kernels at
256-bit vectors on an AVX-512 host (=1 forces 512-bit tiles); BEAM=N searches the
CPU heuristics per kernel; KILN_CACHE_DIR the compiled-kernel cache;
KILN_BATCH_SPLIT=0 builds a batch whole (on the CPU a batch of a model that
computes image by image may be built in slices of images, in one group per thread
whose replays run side by side; the "batch:" line says which, and why).
)";

struct Options {
  std::string model;
  std::map<std::string, std::string> inputs;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::string output_dir;
  std::string device = "CPU";
  int repeat = 1;
  uint64_t seed = 0;
  bool no_jit = false;
};

absl::StatusOr<Options> Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> absl::StatusOr<std::string> {
      size_t eq = a.find('=');
      if (a.rfind("--", 0) == 0 && eq != std::string::npos) return a.substr(eq + 1);
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(a, " needs a value"));
      return std::string(argv[++i]);
    };
    std::string flag = a.substr(0, a.find('='));
    if (flag == "-h" || flag == "--help") return absl::CancelledError("help");
    if (flag == "--model") {
      ASSIGN_OR_RETURN(o.model, value());
    } else if (flag == "--input" || flag == "--shape") {
      ASSIGN_OR_RETURN(std::string v, value());
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0)
        return absl::InvalidArgumentError(absl::StrCat(flag, " wants NAME=VALUE, got '", v, "'"));
      std::string name = v.substr(0, eq), rest = v.substr(eq + 1);
      if (flag == "--input") {
        o.inputs[name] = rest;
      } else {
        std::vector<int64_t> dims;
        for (absl::string_view d : absl::StrSplit(rest, 'x')) {
          int64_t x;
          if (!absl::SimpleAtoi(d, &x) || x < 0)
            return absl::InvalidArgumentError(absl::StrCat("bad shape '", rest, "' (use 1x3x64x64)"));
          dims.push_back(x);
        }
        o.shapes[name] = dims;
      }
    } else if (a == "--no-jit") {
      o.no_jit = true;
    } else if (flag == "--output-dir") {
      ASSIGN_OR_RETURN(o.output_dir, value());
    } else if (flag == "--device") {
      ASSIGN_OR_RETURN(o.device, value());
    } else if (flag == "--repeat" || flag == "--seed") {
      ASSIGN_OR_RETURN(std::string v, value());
      int64_t x;
      if (!absl::SimpleAtoi(v, &x) || x < (flag == "--repeat" ? 1 : 0))
        return absl::InvalidArgumentError(absl::StrCat("bad value for ", flag, ": ", v));
      if (flag == "--repeat") o.repeat = static_cast<int>(x);
      else o.seed = static_cast<uint64_t>(x);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option '", a, "'"));
    }
  }
  if (o.model.empty()) return absl::InvalidArgumentError("--model is required");
  return o;
}

std::string Dims(const std::vector<int64_t>& d) { return "[" + absl::StrJoin(d, ",") + "]"; }

absl::StatusOr<std::vector<Tensor>> MakeInputs(const Options& o, const OnnxModel& m, Engine* e) {
  std::vector<Tensor> out;
  for (const auto& [name, _] : o.inputs) {
    bool known = false;
    for (const ValueInfo& vi : m.inputs()) known |= vi.name == name;
    if (!known) return absl::InvalidArgumentError(absl::StrCat("the model has no input '", name, "'"));
  }
  for (const auto& [name, _] : o.shapes) {
    bool known = false;
    for (const ValueInfo& vi : m.inputs()) known |= vi.name == name;
    if (!known) return absl::InvalidArgumentError(absl::StrCat("the model has no input '", name, "'"));
  }
  uint64_t seed = o.seed;
  for (const ValueInfo& vi : m.inputs()) {
    auto file = o.inputs.find(vi.name);
    if (file != o.inputs.end()) {
      struct stat st;
      if (::stat(file->second.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        return absl::InvalidArgumentError(
            absl::StrCat("input '", vi.name, "': ", file->second, " is not a regular file"));
      ASSIGN_OR_RETURN(HostTensor h, ReadNpy(file->second));
      if (h.dtype != vi.dtype)
        return absl::InvalidArgumentError(absl::StrCat("input '", vi.name, "' is ", vi.dtype.Name(),
                                                       " but ", file->second, " holds ", h.dtype.Name()));
      Tensor t = h.ToTensor(e, o.device);
      if (!t.ok())
        return absl::Status(t.status().code(),
                            absl::StrCat("input '", vi.name, "': ", t.status().message()));
      out.push_back(t);
      continue;
    }
    std::vector<int64_t> dims = vi.dims;
    auto s = o.shapes.find(vi.name);
    if (s != o.shapes.end()) {
      dims = s->second;
    } else if (!vi.rank_known || std::find(dims.begin(), dims.end(), -1) != dims.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", vi.name, "' has dynamic shape ", Dims(vi.dims), ": give --input ", vi.name,
          "=FILE.npy or --shape ", vi.name, "=DIMS"));
    }
    Tensor t = vi.dtype.IsFloat() ? Tensor::Rand(e, dims, seed++, vi.dtype, o.device)
                                  : Tensor::Zeros(e, dims, vi.dtype, o.device);
    if (!t.ok())
      return absl::Status(t.status().code(),
                          absl::StrCat("input '", vi.name, "' of shape ", Dims(dims), ": ",
                                       t.status().message()));
    out.push_back(t);
  }
  return out;
}

void PrintStats(const std::string& name, Tensor t) {
  auto v = t.ToDoubles();
  std::printf("output %s: shape %s dtype %s", name.c_str(), Dims(t.shape()).c_str(),
              t.dtype().Name().c_str());
  if (!v.ok() || v->empty()) {
    std::printf("\n");
    return;
  }
  double mn = INFINITY, mx = -INFINITY, sum = 0, sq = 0;
  int64_t nans = 0;
  for (double x : *v) {
    if (std::isnan(x)) {
      ++nans;
      continue;
    }
    mn = std::min(mn, x);
    mx = std::max(mx, x);
    sum += x;
    sq += x * x;
  }
  double n = static_cast<double>(v->size() - nans);
  double mean = n > 0 ? sum / n : NAN;
  double sd = n > 0 ? std::sqrt(std::max(0.0, sq / n - mean * mean)) : NAN;
  std::printf(" min %.6g max %.6g mean %.6g std %.6g", mn, mx, mean, sd);
  if (nans) std::printf(" nan %lld", static_cast<long long>(nans));
  std::printf("\n");
}

std::string FileName(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
  return s.empty() ? "output" : s;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "kiln run: %s\n", std::string(s.message()).c_str());
  return 1;
}

int RunChecked(int argc, char** argv);

}  // namespace

// Whatever the model file or the inputs hold, `kiln run` prints the error
// and exits 1: sizes are checked before they are allocated, and an
// allocation that still fails is reported here instead of aborting.
int RunCommand(int argc, char** argv) {
  try {
    return RunChecked(argc, argv);
  } catch (const std::bad_alloc& e) {
    return Fail(absl::ResourceExhaustedError(absl::StrCat("out of memory (", e.what(), ")")));
  } catch (const std::length_error& e) {
    return Fail(absl::ResourceExhaustedError(absl::StrCat("out of memory (", e.what(), ")")));
  } catch (const std::exception& e) {
    return Fail(absl::InternalError(e.what()));
  }
}

namespace {

int RunChecked(int argc, char** argv) {
  auto opts = Parse(argc, argv);
  if (!opts.ok()) {
    if (absl::IsCancelled(opts.status())) {
      std::printf("%s", kUsage);
      return 0;
    }
    std::fprintf(stderr, "kiln run: %s\n\n%s", std::string(opts.status().message()).c_str(), kUsage);
    return 2;
  }
  const Options& o = *opts;
  std::unique_ptr<DeviceRegistry> registry = DeviceRegistry::WithDefaults();
  Engine engine(registry.get());
  auto t0 = std::chrono::steady_clock::now();
  auto model = OnnxModel::Load(o.model, &engine, o.device);
  if (!model.ok()) return Fail(model.status());
  double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("model %s: %zu input(s), %zu output(s), loaded in %.1f ms\n", o.model.c_str(),
              (*model)->inputs().size(), (*model)->outputs().size(), load_ms);
  auto inputs = MakeInputs(o, **model, &engine);
  if (!inputs.ok()) return Fail(inputs.status());
  for (size_t i = 0; i < inputs->size(); ++i)
    std::printf("input %s: shape %s dtype %s\n", (*model)->inputs()[i].name.c_str(),
                Dims((*inputs)[i].shape()).c_str(), (*inputs)[i].dtype().Name().c_str());

  const OnnxModel* m = model->get();
  Jit jit([m](const std::vector<Tensor>& in) { return m->Run(in); });
  std::vector<double> times;
  std::vector<Tensor> outs;
  EngineStats before = engine.stats();
  EngineStats first;
  Jit::Result last;  // the last call through the JIT (its kernels and estimates)
  EngineStats last_before;  // around the last call
  for (int r = 0; r < o.repeat; ++r) {
    last_before = engine.stats();
    auto s = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<Tensor>> res;
    if (o.no_jit) {
      res = m->Run(*inputs);
      if (res.ok()) {
        std::vector<Tensor*> ptrs;
        for (Tensor& t : *res) ptrs.push_back(&t);
        absl::Status rs = Tensor::RealizeAll(ptrs);
        if (!rs.ok()) res = rs;
      }
    } else {
      absl::StatusOr<Jit::Result> call = jit.Call(*inputs);
      if (!call.ok()) return Fail(call.status());
      last = std::move(*call);
      res = std::move(last.outputs);
    }
    if (!res.ok()) return Fail(res.status());
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
    outs = std::move(*res);
    if (r == 0) first = engine.stats();
  }
  for (size_t i = 0; i < outs.size(); ++i) PrintStats((*model)->outputs()[i].name, outs[i]);
  if (std::optional<BatchSplitter::Choice> c = m->BatchChoice(*inputs)) {
    if (c->images < c->batch)
      std::printf("batch: %lld images, built in slices of %lld%s (largest intermediate %.2f MB per image)\n",
                  static_cast<long long>(c->batch), static_cast<long long>(c->images),
                  c->groups > 1 ? absl::StrCat(" in ", c->groups, " groups").c_str() : "",
                  c->image_bytes * 1e-6);
    else
      std::printf("batch: %lld images, built whole: %s\n", static_cast<long long>(c->batch),
                  c->reason.c_str());
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted[sorted.size() / 2];
  std::printf("latency: first %.3f ms (incl. %llu kernel compiles, %.1f ms of compiling), median of %d: %.3f ms\n",
              times[0], static_cast<unsigned long long>(first.kernels_compiled - before.kernels_compiled),
              (first.compile_seconds - before.compile_seconds) * 1e3, o.repeat, median);
  // The last call's kernels (the first call also runs kernels made once:
  // weights laid out for the CPU): a replay's from the JIT, a plain run's
  // from the engine.
  const bool replayed = last.path == Jit::Path::kReplay;
  const EngineStats after = engine.stats();
  const double kernels = replayed ? static_cast<double>(last.kernels)
                                  : static_cast<double>(after.kernels_run - last_before.kernels_run);
  const double flops = replayed ? last.flops : after.flops_run - last_before.flops_run;
  const double bytes = replayed ? last.bytes : after.bytes_run - last_before.bytes_run;
  std::printf("kernels: %.0f per %s, estimated %.4g GFLOP and %.4g MB per run", kernels,
              replayed ? "replay" : "run", flops * 1e-9, bytes * 1e-6);
  if (median > 0 && o.repeat > 2) std::printf(" (%.2f GFLOP/s achieved)", flops * 1e-9 / (median * 1e-3));
  std::printf("\n");
  if (!o.output_dir.empty()) {
    mkdir(o.output_dir.c_str(), 0755);
    for (size_t i = 0; i < outs.size(); ++i) {
      auto h = ReadBack(outs[i]);
      if (!h.ok()) return Fail(h.status());
      std::string path = o.output_dir + "/" + FileName((*model)->outputs()[i].name) + ".npy";
      absl::Status s = WriteNpy(path, *h);
      if (!s.ok()) return Fail(s);
      std::printf("wrote %s\n", path.c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace kiln

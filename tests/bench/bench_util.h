// Helpers for benchmark binaries: timing and `name: value unit` output.
#ifndef KILN_TESTS_BENCH_BENCH_UTIL_H_
#define KILN_TESTS_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"

namespace kiln::bench {

inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds of `fn` over `reps` runs (after `warmup` runs), stopping early
// once `budget` seconds are spent (at least 3 runs): the median, or the
// fastest run with `min`.
inline double TimedSeconds(const std::function<void()>& fn, int reps, int warmup, double budget,
                           bool min) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  double start = Now();
  for (int i = 0; i < reps; ++i) {
    double t0 = Now();
    fn();
    t.push_back(Now() - t0);
    if (t.size() >= 3 && Now() - start > budget) break;
  }
  std::sort(t.begin(), t.end());
  return min ? t.front() : t[t.size() / 2];
}

// Median seconds of `fn` (TimedSeconds).
inline double MedianSeconds(const std::function<void()>& fn, int reps, int warmup = 1,
                            double budget = 10.0) {
  return TimedSeconds(fn, reps, warmup, budget, false);
}

inline void Report(const std::string& name, double value, const std::string& unit) {
  std::printf("%s: %.4g %s\n", name.c_str(), value, unit.c_str());
  std::fflush(stdout);
}

// Realizes `outs` in one schedule and returns the compile time per newly
// compiled kernel in ms (engine stats before / after); status in *status.
inline double CompileMsPerKernel(Engine* e, std::vector<Tensor>* outs, absl::Status* status) {
  std::vector<Tensor*> ptrs;
  for (Tensor& t : *outs) ptrs.push_back(&t);
  EngineStats before = e->stats();
  *status = Tensor::RealizeAll(ptrs);
  EngineStats after = e->stats();
  uint64_t n = after.kernels_compiled - before.kernels_compiled;
  return (after.compile_seconds - before.compile_seconds) / std::max<uint64_t>(n, 1) * 1e3;
}

}  // namespace kiln::bench

#endif  // KILN_TESTS_BENCH_BENCH_UTIL_H_

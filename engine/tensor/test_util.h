// Test helpers: an engine per device and comparison of tensors.
#ifndef KILN_ENGINE_TENSOR_TEST_UTIL_H_
#define KILN_ENGINE_TENSOR_TEST_UTIL_H_

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/device.h"
#include "engine/tensor/tensor.h"
#include "gtest/gtest.h"

namespace kiln {

// One registry + engine shared by a test binary.
inline Engine* TestEngine() {
  static DeviceRegistry* reg = DeviceRegistry::WithDefaults().release();
  static Engine* e = new Engine(reg);
  return e;
}

// Whether `device` can be created here (GPU devices need a driver / ICD).
inline bool DeviceAvailable(const std::string& device) {
  return TestEngine()->GetDevice(device).ok();
}

// The devices op test suites run on: CPU and INTERP, plus OPENCL and CUDA
// where they can be created. KILN_TEST_DEVICES (comma separated, e.g.
// "CUDA,INTERP") replaces the list. Opt in with
//   INSTANTIATE_TEST_SUITE_P(Devices, MyTest, ::testing::ValuesIn(TestDevices()),
//                            DeviceParamName);
inline std::vector<std::string> TestDevices() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("KILN_TEST_DEVICES"); env != nullptr && *env != '\0') {
    std::string s = env;
    for (size_t pos = 0; pos <= s.size();) {
      size_t comma = s.find(',', pos);
      if (comma == std::string::npos) comma = s.size();
      if (comma > pos) out.push_back(s.substr(pos, comma - pos));
      pos = comma + 1;
    }
    return out;
  }
  out = {"CPU", "INTERP"};
  for (const char* gpu : {"OPENCL", "CUDA"})
    if (DeviceAvailable(gpu)) out.push_back(gpu);
  return out;
}

// The GPU devices available here (possibly none).
inline std::vector<std::string> GpuTestDevices() {
  std::vector<std::string> out;
  for (const std::string& d : TestDevices())
    if (d == "OPENCL" || d == "CUDA") out.push_back(d);
  return out;
}

// Names parameterized tests by device ("Devices/MyTest.Op/CUDA").
inline std::string DeviceParamName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

// Values of t as doubles; fails the test on error.
inline std::vector<double> Values(Tensor t) {
  auto v = t.ToDoubles();
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : std::vector<double>{};
}

inline void ExpectNear(const std::vector<double>& got, const std::vector<double>& want,
                       double atol = 1e-5, double rtol = 1e-4) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
      continue;
    }
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "at " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << "at " << i;
  }
}

// n values in [-1, 1) on a 1/8 grid (exact in float32), varied by seed.
inline std::vector<float> Ramp(int64_t n, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 5 + seed * 11) % 16) / 8 - 1;
  return v;
}

// Deterministic values in [-2, 2) on a 1/8 grid (sums of products stay exact).
inline std::vector<float> GridValues(int64_t n, int seed) {
  std::vector<float> v(n);
  uint32_t s = 2654435761u * static_cast<uint32_t>(seed + 1);
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>((s >> 16) % 32) / 8.0f - 2.0f;
  }
  return v;
}

inline std::vector<double> Doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Calls f(idx) for every multi-index of `shape` in row-major order.
inline void ForEachIndex(const Shape& shape,
                         const std::function<void(const std::vector<int64_t>&)>& f) {
  if (Prod(shape) == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  while (true) {
    f(idx);
    int d = static_cast<int>(shape.size()) - 1;
    while (d >= 0 && ++idx[d] == shape[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

// The row-major offset of a multi-index.
inline int64_t RavelIndex(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t r = 0;
  for (size_t i = 0; i < shape.size(); ++i) r = r * shape[i] + idx[i];
  return r;
}

// A test fixture parameterized by device name, with batched checks:
// Check() records a result and its expected values; all checks are verified
// together when the test ends (every result is cast to float64, flattened
// and concatenated, so a test realizes a few kernels instead of one per
// check, which keeps cold-cache runs on compiling devices short). A failure
// names the line of its Check.
class DeviceTest : public ::testing::TestWithParam<std::string> {
 protected:
  Engine* e = TestEngine();
  std::string dev = GetParam();

  void Check(const Tensor& t, std::vector<double> want, double atol = 1e-5, double rtol = 1e-4,
             std::string note = "", int line = __builtin_LINE()) {
    pending_.push_back({t, std::move(want), atol, rtol, std::move(note), line});
  }
  void TearDown() override { VerifyChecks(); }
  void VerifyChecks() {
    std::vector<PendingCheck> p;
    p.swap(pending_);
    std::vector<Tensor> parts;
    std::vector<const PendingCheck*> live;
    for (const PendingCheck& c : p) {
      if (!c.t.ok()) {
        ADD_FAILURE_AT(__FILE__, c.line) << c.note << " " << c.t.status();
        continue;
      }
      parts.push_back(c.t.Cast(dtypes::kFloat64).Reshape({-1}));
      live.push_back(&c);
    }
    if (parts.empty()) return;
    std::vector<double> all = Values(Tensor::Cat(parts, 0));
    size_t off = 0;
    for (size_t i = 0; i < live.size(); ++i) {
      SCOPED_TRACE(::testing::Message()
                   << "Check at line " << live[i]->line << " " << live[i]->note);
      size_t n = static_cast<size_t>(parts[i].numel());
      if (off + n > all.size()) return ADD_FAILURE() << "results missing";
      ExpectNear({all.begin() + off, all.begin() + off + n}, live[i]->want, live[i]->atol,
                 live[i]->rtol);
      off += n;
    }
  }
  struct PendingCheck {
    Tensor t;
    std::vector<double> want;
    double atol, rtol;
    std::string note;
    int line;
  };
  std::vector<PendingCheck> pending_;
};

}  // namespace kiln

#endif  // KILN_ENGINE_TENSOR_TEST_UTIL_H_

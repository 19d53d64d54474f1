// Test helpers: an engine per device and comparison of tensors.
#ifndef KILN_ENGINE_TENSOR_TEST_UTIL_H_
#define KILN_ENGINE_TENSOR_TEST_UTIL_H_

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

}  // namespace kiln

#endif  // KILN_ENGINE_TENSOR_TEST_UTIL_H_

// Test helper: the CPU schedule of some lazy tensors' graph (a failure to
// schedule fails the test and gives an empty schedule).
#ifndef KILN_ENGINE_SCHEDULE_SCHEDULE_TESTING_H_
#define KILN_ENGINE_SCHEDULE_SCHEDULE_TESTING_H_

#include <vector>

#include "engine/schedule/schedule.h"
#include "engine/tensor/tensor.h"
#include "gtest/gtest.h"

namespace kiln {

inline Schedule Sched(const std::vector<Tensor>& ts) {
  UOpList roots;
  for (const Tensor& t : ts) roots.push_back(t.uop());
  auto s = CreateSchedule(roots, "CPU");
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : Schedule{};
}

}  // namespace kiln

#endif  // KILN_ENGINE_SCHEDULE_SCHEDULE_TESTING_H_

// The realize planner's rules, seen through the schedules they produce.
#include <algorithm>
#include <cmath>

#include "engine/schedule/schedule.h"
#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

Schedule Sched(const std::vector<Tensor>& ts) {
  UOpList roots;
  for (const Tensor& t : ts) roots.push_back(t.uop());
  auto s = CreateSchedule(roots, "CPU");
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : Schedule{};
}

int Count(const Schedule& s, Op op) {
  int n = 0;
  for (const ScheduleItem& item : s.items)
    for (const UOp* u : Toposort(item.ast)) n += u->op() == op;
  return n;
}

// A concatenation of three or more parts read by several kernels (a
// softmax over SSD's six heads' class scores: its max, its sum of exps, its
// normalization) is realized once, and its readers load it plainly instead
// of each recomputing the chain of WHEREs that joins the parts through
// their views (SSDlite's two class-score reduces 3.9 + 1.6 ms -> 0.2 ms).
// Two parts, or a single reader, stay fused.
TEST(RealizePlannerTest, ConcatenationReadBySeveralKernelsIsRealized) {
  Engine* e = TestEngine();
  std::vector<float> v(4 * 15);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.7 * i);
  auto part = [&](int64_t at, int64_t rows) {  // (rows, 4), read transposed
    std::vector<float> p(v.begin() + 4 * at, v.begin() + 4 * (at + rows));
    return Tensor::FromFloats(e, p, {4, rows}).Permute({1, 0});
  };
  Tensor cat = Tensor::Cat({part(0, 5), part(5, 3), part(8, 7)}, 0);  // (15, 4)
  Schedule s = Sched({cat.Max({1}), cat.Sum({1})});
  EXPECT_EQ(s.items.size(), 3u);
  // The concatenation's own kernel joins the parts; the reduces load it.
  for (const ScheduleItem& item : s.items) {
    Schedule one;
    one.items.push_back(item);
    if (Count(one, Op::kReduceAxis) > 0) EXPECT_EQ(Count(one, Op::kWhere), 0);
  }
  Tensor two = Tensor::Cat({part(0, 5), part(5, 3)}, 0);
  EXPECT_EQ(Sched({two.Max({1}), two.Sum({1})}).items.size(), 2u);
  EXPECT_EQ(Sched({cat.Max({1})}).items.size(), 1u);
  // Values: row r of the concatenation is column r of the parts' data.
  std::vector<double> max, sum;
  auto at = [&](int64_t r, int64_t c) {
    const int64_t starts[] = {0, 5, 8, 15};
    int k = 0;
    while (r >= starts[k + 1]) ++k;
    const int64_t rows = starts[k + 1] - starts[k];
    return static_cast<double>(v[4 * starts[k] + c * rows + (r - starts[k])]);
  };
  for (int64_t r = 0; r < 15; ++r) {
    double m = at(r, 0), t = 0;
    for (int64_t c = 0; c < 4; ++c) m = std::max(m, at(r, c)), t += at(r, c);
    max.push_back(m);
    sum.push_back(t);
  }
  ExpectNear(Values(cat.Max({1})), max);
  ExpectNear(Values(cat.Sum({1})), sum, 1e-5, 1e-5);
}

}  // namespace
}  // namespace kiln

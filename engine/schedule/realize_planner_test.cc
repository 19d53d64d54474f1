// The realize planner's rules, seen through the schedules they produce.
#include <algorithm>
#include <cmath>

#include "engine/schedule/schedule_testing.h"
#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

class RealizePlannerTest : public ::testing::Test {
 protected:
  Engine* e = TestEngine();
  Tensor A(Shape s) { return Tensor::Empty(e, s, dtypes::kFloat32); }
};

int Count(const Schedule& s, Op op) {
  int n = 0;
  for (const ScheduleItem& item : s.items)
    for (const UOp* u : Toposort(item.ast)) n += u->op() == op;
  return n;
}

// A max pool's input padded with -inf (Tensor::Pad's WHERE form) is fused
// like a zero padding: the reduce computes into the interior and the border
// is filled with -inf, with no masked copy in between.
TEST_F(RealizePlannerTest, ValuePaddingIsFilledLikeZeroPadding) {
  auto build = [&](Tensor x, Tensor w) {
    Tensor conv = (w.Reshape({8, 6, 1}) * x.Reshape({1, 6, 7 * 40})).Sum({1});
    return conv.Reshape({8, 7, 40}).Relu().Pad({{0, 0}, {1, 1}, {2, 0}}, -INFINITY).Contiguous();
  };
  Schedule s = Sched({build(A({6, 7 * 40}), A({8, 6}))});
  int reduces = 0, masked_loads = 0, wheres = 0, fills = 0;
  for (const ScheduleItem& item : s.items) {
    for (const UOp* u : Toposort(item.ast)) {
      reduces += u->op() == Op::kReduceAxis;
      wheres += u->op() == Op::kWhere;
      if (u->op() == Op::kLoad && StOf(*u) && StOf(*u)->HasMask()) ++masked_loads;
    }
    const UOpRef& value = item.ast->src(0)->src(1);
    if (value->op() == Op::kConst) {
      ++fills;
      EXPECT_EQ(std::get<double>(value->const_value()), -INFINITY);
    }
  }
  EXPECT_EQ(reduces, 1);
  EXPECT_EQ(masked_loads, 0);
  EXPECT_EQ(wheres, 0);
  EXPECT_EQ(fills, 3);  // rows 0 and 8, columns 0..1 of rows 1..7
  EXPECT_EQ(s.items.size(), 4u);
  // Against the unpadded value: exp(-inf) = 0 on the border, so a border
  // left unfilled or filled with 0 differs.
  Tensor x = Tensor::Randn(e, {6, 280}, 1, dtypes::kFloat32, "CPU");
  Tensor w = Tensor::Randn(e, {8, 6}, 2, dtypes::kFloat32, "CPU");
  std::vector<double> got = Values(build(x, w).Exp());
  Tensor conv = (w.Reshape({8, 6, 1}) * x.Reshape({1, 6, 280})).Sum({1});
  std::vector<double> inner = Values(conv.Reshape({8, 7, 40}).Relu().Exp().Contiguous());
  ASSERT_EQ(got.size(), 8u * 9 * 42);
  for (int64_t c = 0; c < 8; ++c)
    for (int64_t r = 0; r < 9; ++r)
      for (int64_t q = 0; q < 42; ++q) {
        const bool in = r >= 1 && r < 8 && q >= 2;
        const double want = in ? inner[(c * 7 + r - 1) * 40 + q - 2] : 0.0;
        ASSERT_NEAR(got[(c * 9 + r) * 42 + q], want, 1e-4 * (1 + std::abs(want)))
            << c << "," << r << "," << q;
      }
}

// A concatenation of reduces (a fire module's expand convolutions, an
// Inception block's branches) is realized with each part computed straight
// into its slice: one kernel per part, no copy, no WHERE, no masked load.
TEST_F(RealizePlannerTest, ConcatPartsComputeIntoTheirSlices) {
  auto conv = [](Tensor x, Tensor w, int64_t cout) {  // (6, 49) -> (cout, 7, 7)
    return (w.Reshape({cout, 6, 1}) * x.Reshape({1, 6, 49})).Sum({1}).Reshape({cout, 7, 7});
  };
  auto build = [&](Tensor x, Tensor w1, Tensor w2, Tensor y) {
    return Tensor::Cat({conv(x, w1, 8).Relu(), y * 2.0, conv(x, w2, 4)}, 0);
  };
  Schedule s = Sched({build(A({6, 49}), A({8, 6}), A({4, 6}), A({3, 7, 7}))});
  int reduces = 0, masked_loads = 0, wheres = 0;
  for (const ScheduleItem& item : s.items)
    for (const UOp* u : Toposort(item.ast)) {
      reduces += u->op() == Op::kReduceAxis;
      wheres += u->op() == Op::kWhere;
      if (u->op() == Op::kLoad && StOf(*u) && StOf(*u)->HasMask()) ++masked_loads;
    }
  EXPECT_EQ(s.items.size(), 3u);
  EXPECT_EQ(reduces, 2);
  EXPECT_EQ(wheres, 0);
  EXPECT_EQ(masked_loads, 0);
  // A part read elsewhere too is realized; the concatenation copies it.
  Tensor shared = conv(A({6, 49}), A({8, 6}), 8);
  EXPECT_EQ(Sched({Tensor::Cat({shared, conv(A({6, 49}), A({4, 6}), 4)}, 0), shared.Exp()})
                .items.size(),
            4u);
  // Against the parts computed alone.
  Tensor x = Tensor::Randn(e, {6, 49}, 1, dtypes::kFloat32, "CPU");
  Tensor w1 = Tensor::Randn(e, {8, 6}, 2, dtypes::kFloat32, "CPU");
  Tensor w2 = Tensor::Randn(e, {4, 6}, 3, dtypes::kFloat32, "CPU");
  Tensor y = Tensor::Randn(e, {3, 7, 7}, 4, dtypes::kFloat32, "CPU");
  std::vector<double> got = Values(build(x, w1, w2, y));
  std::vector<double> want = Values(conv(x, w1, 8).Relu().Contiguous());
  for (double v : Values((y * 2.0).Contiguous())) want.push_back(v);
  for (double v : Values(conv(x, w2, 4).Contiguous())) want.push_back(v);
  ExpectNear(got, want, 1e-5, 1e-5);
}

// A concatenation of three or more parts read by several kernels (a
// softmax over SSD's six heads' class scores: its max, its sum of exps, its
// normalization) is realized once, and its readers load it plainly instead
// of each recomputing the chain of WHEREs that joins the parts through
// their views (SSDlite's two class-score reduces 3.9 + 1.6 ms -> 0.2 ms).
// Two parts, or a single reader, stay fused.
TEST_F(RealizePlannerTest, ConcatenationReadBySeveralKernelsIsRealized) {
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

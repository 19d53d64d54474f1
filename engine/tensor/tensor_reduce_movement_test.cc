// Reductions and movement ops on CPU and INTERP, against naive references
// and hand-computed values.
#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

std::vector<float> Iota(int n, float start = 0) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// Small values with ties, on a 1/4 grid.
std::vector<float> Mixed(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7) % 11) / 4.0f - 1.0f;
  return v;
}

// Naive reduction of a row-major tensor over `axes` (normalized, any order).
std::vector<double> RefReduce(const std::vector<float>& x, const Shape& s,
                              const std::set<int>& axes, double init,
                              const std::function<double(double, double)>& f) {
  Shape out = s;
  for (int a : axes) out[a] = 1;
  std::vector<double> r(Prod(out), init);
  for (int64_t flat = 0; flat < Prod(s); ++flat) {
    int64_t rem = flat, o = 0, stride = 1;
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      int64_t i = rem % s[d];
      rem /= s[d];
      if (!axes.count(d)) o += i * stride;
      stride *= out[d];
    }
    r[o] = f(r[o], x[flat]);
  }
  return r;
}

class ReduceMovementTest : public DeviceTest {
 protected:

  Tensor T(const std::vector<float>& v, Shape s) { return Tensor::FromFloats(e, v, s, dev); }
  Tensor I32(const std::vector<int32_t>& v, Shape s) {
    return Tensor::FromVector(e, v, s, dtypes::kInt32, dev);
  }
};

// Transpose + reshape pairs that cannot merge into one view: the stack of
// views is capped (a copy), so 40 pairs stay fast and exact. Uncapped, the
// index expression grows exponentially (30 pairs took minutes).
TEST_P(ReduceMovementTest, UnmergeableMovementsStayFast) {
  std::vector<float> x = Mixed(6);
  std::vector<double> want(x.begin(), x.end());
  Tensor t = T(x, {2, 3});
  for (int i = 0; i < 40; ++i) {
    t = t.Permute({1, 0}).Reshape({2, 3});
    std::vector<double> next(6);
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 2; ++c) next[r * 2 + c] = want[c * 3 + r];
    want = next;
  }
  Check(t + 1.0, [&] {
    std::vector<double> w = want;
    for (double& v : w) v += 1;
    return w;
  }());
}

TEST_P(ReduceMovementTest, ReductionsOverAxes) {
  Shape s = {2, 3, 5};
  std::vector<float> x = Mixed(30);
  Tensor t = T(x, s);
  struct Case {
    std::vector<int64_t> axes;
    std::set<int> norm;
  };
  std::vector<Case> cases = {{{}, {0, 1, 2}},  {{0}, {0}},       {{1}, {1}},
                             {{-1}, {2}},      {{0, 2}, {0, 2}}, {{-3, -1}, {0, 2}},
                             {{2, 0}, {0, 2}}, {{1, 2}, {1, 2}}};
  for (const Case& c : cases) {
    for (bool keep : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "axes " << c.norm.size() << " keep " << keep);
      Shape ks = s, ns;
      for (int a : c.norm) ks[a] = 1;
      for (int i = 0; i < 3; ++i)
        if (!c.norm.count(i)) ns.push_back(s[i]);
      Tensor sum = t.Sum(c.axes, keep);
      EXPECT_EQ(sum.shape(), keep ? ks : ns);
      Check(sum, RefReduce(x, s, c.norm, 0, [](double a, double b) { return a + b; }));
      Check((t.Prod(c.axes, keep)),
            RefReduce(x, s, c.norm, 1, [](double a, double b) { return a * b; }));
      ExpectNear(
          Values(t.Max(c.axes, keep)),
          RefReduce(x, s, c.norm, -INFINITY, [](double a, double b) { return std::max(a, b); }));
      ExpectNear(
          Values(t.Min(c.axes, keep)),
          RefReduce(x, s, c.norm, INFINITY, [](double a, double b) { return std::min(a, b); }));
      int64_t n = 1;
      for (int a : c.norm) n *= s[a];
      std::vector<double> mean =
          RefReduce(x, s, c.norm, 0, [](double a, double b) { return a + b; });
      for (double& m : mean) m /= static_cast<double>(n);
      Check((t.Mean(c.axes, keep)), mean);
    }
  }
}

// A contiguous reduce over a length that is not a multiple of 4 (the CPU
// rounds it up and reduces the identity in the extra lanes): all-negative
// rows check max's identity, products check 1, ints check the int minimum.
TEST_P(ReduceMovementTest, OddLengthReductions) {
  const int64_t rows = 3, n = 37;
  std::vector<float> x(rows * n);
  for (int64_t i = 0; i < rows * n; ++i)
    x[i] = -1.5f - static_cast<float>((i * 7) % 11) / 4.0f + (i / n == 1 ? 3.0f : 0.0f);
  std::vector<float> p(rows * n);
  for (int64_t i = 0; i < rows * n; ++i) p[i] = 1.0f + static_cast<float>(i % 3) / 64.0f;
  std::vector<int32_t> xi(rows * n);
  for (int64_t i = 0; i < rows * n; ++i) xi[i] = -1000 - static_cast<int32_t>((i * 13) % 17);
  std::vector<double> sum(rows, 0), mx(rows, -INFINITY), prod(rows, 1), mxi(rows, -1e9);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) {
      sum[r] += x[r * n + c];
      mx[r] = std::max<double>(mx[r], x[r * n + c]);
      prod[r] *= p[r * n + c];
      mxi[r] = std::max<double>(mxi[r], xi[r * n + c]);
    }
  Check((T(x, {rows, n}).Sum({1})), sum, 1e-5, 1e-5);
  Check((T(x, {rows, n}).Max({1})), mx);
  Check((T(p, {rows, n}).Prod({1})), prod, 1e-6, 1e-5);
  Check((I32(xi, {rows, n}).Max({1})), mxi);
  std::vector<double> sm(rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    double z = 0;
    for (int64_t c = 0; c < n; ++c) z += std::exp(x[r * n + c] - mx[r]);
    for (int64_t c = 0; c < n; ++c) sm[r * n + c] = std::exp(x[r * n + c] - mx[r]) / z;
  }
  Check((T(x, {rows, n}).Softmax(-1)), sm, 1e-6, 1e-5);
}

TEST_P(ReduceMovementTest, MeanVarStdLogSumExp) {
  Tensor t = T({1, 2, 3, 4, 2, 2, 2, 10}, {2, 4});
  Check((t.Var({1})), {5.0 / 3, 16});
  Check((t.Var({1}, true, 0)), {1.25, 12});
  Check((t.Std({1})), {std::sqrt(5.0 / 3), 4});
  EXPECT_EQ(t.Var({1}, true).shape(), (Shape{2, 1}));
  double m = 26.0 / 8, ss = 0;
  for (double v : {1, 2, 3, 4, 2, 2, 2, 10}) ss += (v - m) * (v - m);
  Check((t.Var()), {ss / 7});
  Check((I32({1, 2, 4, 5}, {4}).Mean()), {3});
  auto lse = [](std::vector<double> v) {
    double m = *std::max_element(v.begin(), v.end()), s = 0;
    for (double x : v) s += std::exp(x - m);
    return m + std::log(s);
  };
  Tensor big = T({1000, 1001, -1000, 0.5f}, {2, 2});
  Check((big.LogSumExp({1})), {lse({1000, 1001}), lse({-1000, 0.5})});
  Check((big.LogSumExp({0}, true)), {lse({1000, -1000}), lse({1001, 0.5})});
  EXPECT_EQ(big.LogSumExp({0}, true).shape(), (Shape{1, 2}));
  Check((big.LogSumExp({})), {lse({1000, 1001, -1000, 0.5})});
}

TEST_P(ReduceMovementTest, ArgmaxArgmin) {
  Tensor t = T({1, 5, 5, 2, 7, 0, 7, 0}, {2, 4});
  Check((t.Argmax(1)), {1, 0});
  Check((t.Argmax(1, false, true)), {2, 2});
  Check((t.Argmin(-1)), {0, 1});
  Check((t.Argmin(-1, true, true)), {0, 3});
  EXPECT_EQ(t.Argmin(-1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(t.Argmax(0).dtype(), dtypes::kInt64);
  Check((t.Argmax(0)), {1, 0, 1, 0});
  Check((t.Argmin(0, false, true)), {0, 1, 0, 1});
  Tensor i = I32({3, -1, 9, 9, -1}, {5});
  Check((i.Argmax(0)), {2});
  Check((i.Argmin(0, false, true)), {4});
  EXPECT_FALSE(t.Argmax(2).ok());
}

TEST_P(ReduceMovementTest, ReductionDtypesAndEdges) {
  Tensor i = I32({3, -4, 5, 6}, {2, 2});
  EXPECT_EQ(i.Sum().dtype(), dtypes::kInt32);
  Check((i.Sum({0})), {8, 2});
  Check((i.Prod({1})), {-12, 30});
  Check((i.Min()), {-4});
  Tensor u = Tensor::FromVector<uint8_t>(e, {9, 200, 3}, {3}, dtypes::kUInt8, dev);
  Check((u.Max()), {200});
  Check((u.Min()), {3});
  // Empty inputs reduce to the identity.
  Tensor z = T({}, {0, 3});
  EXPECT_EQ(z.Sum({0}).shape(), (Shape{3}));
  Check((z.Sum({0})), {0, 0, 0});
  Check((z.Prod({0})), {1, 1, 1});
  Check((z.Max({0})), {-INFINITY, -INFINITY, -INFINITY});
  EXPECT_EQ(z.Sum({1}).shape(), (Shape{0}));
  // Size-1 dims and scalars.
  Tensor one = T({4}, {1, 1});
  Check((one.Sum({0, 1})), {4});
  EXPECT_EQ(one.Sum({}).shape(), Shape{});
  EXPECT_EQ(T({2}, {}).Sum().shape(), Shape{});
  // Reductions of computed / non-contiguous inputs; odd sizes.
  std::vector<float> x = Mixed(7 * 13);
  Tensor tt = T(x, {7, 13}).Transpose();
  std::vector<double> want(7, 0);
  for (int r = 0; r < 7; ++r)
    for (int c = 0; c < 13; ++c) want[r] += 2.0 * x[r * 13 + c] + 1;
  Check(((tt * 2.0 + 1.0).Sum({0})), want);
  Tensor bad = i.Sum({2});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(2,2)"), std::string::npos) << bad.status();
  EXPECT_FALSE(i.Sum({0, -2}).ok());
}

TEST_P(ReduceMovementTest, ReshapePermuteExpand) {
  Tensor t = T(Iota(12), {3, 4});
  EXPECT_EQ(t.Reshape({2, -1}).shape(), (Shape{2, 6}));
  EXPECT_EQ(t.Reshape({-1}).shape(), (Shape{12}));
  Check((t.Transpose().Reshape({4, 3})), {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  Tensor bad = t.Reshape({5, -1});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(3,4)"), std::string::npos) << bad.status();
  EXPECT_FALSE(t.Reshape({5, 2}).ok());
  EXPECT_FALSE(t.Reshape({-1, -1}).ok());
  Tensor p = T(Iota(24), {2, 3, 4}).Permute({2, 0, -2});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  std::vector<double> want;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) want.push_back(i * 12 + j * 4 + k);
  Check(p, want);
  EXPECT_FALSE(t.Permute({0, 0}).ok());
  EXPECT_FALSE(t.Permute({0}).ok());
  Tensor ex = T({1, 2, 3}, {3, 1}).Expand({2, -1, 2});
  EXPECT_EQ(ex.shape(), (Shape{2, 3, 2}));
  Check(ex, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  EXPECT_FALSE(T({1, 2, 3}, {3}).Expand({2}).ok());
  EXPECT_FALSE(t.Expand({4}).ok());
}

TEST_P(ReduceMovementTest, PadShrinkFlip) {
  Tensor t = T(Iota(6, 1), {2, 3});
  Check((t.Pad({{1, 0}, {0, 2}}, -1)), {-1, -1, -1, -1, -1, 1, 2, 3, -1, -1, 4, 5, 6, -1, -1});
  Check((t.Pad({{0, 0}, {-1, 1}}, 7)), {2, 3, 7, 5, 6, 7});
  Check((t.Pad({{-1, 0}, {-1, -1}})), {5});
  Check((t.Transpose().Pad({{0, 1}, {1, 0}}, 0.5)),
        {0.5, 1, 4, 0.5, 2, 5, 0.5, 3, 6, 0.5, 0.5, 0.5});
  Check(((t * 2.0).Pad({{1, 1}, {0, 0}}, 9).Sum({0})), {28, 32, 36});
  EXPECT_FALSE(t.Pad({{0, 0}}).ok());
  EXPECT_FALSE(t.Pad({{-2, -1}, {0, 0}}).ok());
  Check((t.Shrink({{1, 2}, {0, 2}})), {4, 5});
  EXPECT_EQ(t.Shrink({{1, 1}, {0, 3}}).shape(), (Shape{0, 3}));
  EXPECT_FALSE(t.Shrink({{0, 3}, {0, 3}}).ok());
  EXPECT_FALSE(t.Shrink({{2, 1}, {0, 3}}).ok());
  Check((t.Flip({1})), {3, 2, 1, 6, 5, 4});
  Check((t.Flip({0, -1})), {6, 5, 4, 3, 2, 1});
  Check((t.Flip({0, 0})), {1, 2, 3, 4, 5, 6});
  EXPECT_FALSE(t.Flip({2}).ok());
}

TEST_P(ReduceMovementTest, Slices) {
  using S = Tensor::Slice;
  Tensor v = T(Iota(10), {10});
  auto sl = [&](std::optional<int64_t> a, std::optional<int64_t> b, int64_t st) {
    return v.Slices({S{a, b, st}});
  };
  Check(sl(2, 8, 2), {2, 4, 6});
  Check(sl(std::nullopt, std::nullopt, -1), {9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  Check(sl(8, 1, -3), {8, 5, 2});
  Check(sl(-3, std::nullopt, 1), {7, 8, 9});
  Check(sl(-100, 100, 4), {0, 4, 8});
  Check(sl(100, -100, -4), {9, 5, 1});
  Check(sl(5, 2, 1), {});
  Check(sl(std::nullopt, -11, -1), {9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  Check(sl(3, 3, -1), {});
  Tensor m = T(Iota(12), {3, 4});
  Tensor r = m.Slices({S{std::nullopt, std::nullopt, -2}, S{1, std::nullopt, 2}});
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  Check(r, {9, 11, 1, 3});
  EXPECT_EQ(m.Slices({S{1, 2, 1}}).shape(), (Shape{1, 4}));
  EXPECT_FALSE(m.Slices({S{0, 1, 0}}).ok());
  EXPECT_FALSE(m.Slices({S{}, S{}, S{}}).ok());
}

TEST_P(ReduceMovementTest, SqueezeUnsqueezeTransposeFlatten) {
  Tensor t = T(Iota(6), {1, 2, 1, 3});
  EXPECT_EQ(t.Squeeze().shape(), (Shape{2, 3}));
  EXPECT_EQ(t.Squeeze({-2}).shape(), (Shape{1, 2, 3}));
  EXPECT_FALSE(t.Squeeze({1}).ok());
  EXPECT_FALSE(t.Squeeze({4}).ok());
  EXPECT_EQ(t.Unsqueeze(-1).shape(), (Shape{1, 2, 1, 3, 1}));
  EXPECT_EQ(t.Unsqueeze(0).shape(), (Shape{1, 1, 2, 1, 3}));
  EXPECT_FALSE(t.Unsqueeze(6).ok());
  Tensor m = T(Iota(6), {2, 3});
  Check((m.Transpose()), {0, 3, 1, 4, 2, 5});
  Check((m.Transpose(0, 1)), {0, 3, 1, 4, 2, 5});
  EXPECT_FALSE(m.Transpose(0, 2).ok());
  EXPECT_EQ(t.Flatten().shape(), (Shape{6}));
  EXPECT_EQ(t.Flatten(1).shape(), (Shape{1, 6}));
  EXPECT_EQ(t.Flatten(1, 2).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(T({5}, {}).Flatten().shape(), (Shape{1}));
  EXPECT_FALSE(t.Flatten(2, 1).ok());
  Check((m.Transpose().Flatten()), {0, 3, 1, 4, 2, 5});
}

TEST_P(ReduceMovementTest, AsStrided) {
  Tensor v = T(Iota(10), {2, 5});
  Tensor w = v.AsStrided({4, 3}, {2, 1}, 1);  // overlapping windows
  Check(w, {1, 2, 3, 3, 4, 5, 5, 6, 7, 7, 8, 9});
  Check((v.AsStrided({3}, {-3}, 9)), {9, 6, 3});
  Check((v.Transpose().AsStrided({2, 2}, {1, 2}, 0)), {0, 1, 5, 6});
  EXPECT_EQ(v.AsStrided({0, 3}, {100, 1}, 0).shape(), (Shape{0, 3}));
  EXPECT_FALSE(v.AsStrided({4, 3}, {3, 1}, 1).ok());
  EXPECT_FALSE(v.AsStrided({2}, {1, 1}, 0).ok());
  EXPECT_FALSE(v.AsStrided({3}, {-4}, 2).ok());
}

// A kernel whose load of one buffer folds away (only its zero padding is
// read) still binds every buffer to its own parameter.
TEST_P(ReduceMovementTest, BufferReadOnlyThroughItsPadding) {
  Tensor a = T({1, 2, 3, 4}, {4});
  Tensor b = T({10, 20, 30, 40}, {4});
  Tensor c = T({100, 200, 300, 400}, {4});
  Check((b + a.Pad({{4, 0}}).Shrink({{0, 4}}) + c), {110, 220, 330, 440});
  // A slice of a concatenation that covers only some of its parts (an FPN
  // level's scores cut out of all levels, as RetinaNet does).
  Tensor cat = Tensor::Cat({a, b, c}, 0);
  Check((cat.Shrink({{4, 8}}) * 2 + a), {21, 42, 63, 84});
  Check((cat.Shrink({{0, 2}}).Sum() + cat.Shrink({{10, 12}})), {303, 403});
}

// Rows picked by bound variables (ShrinkAt) and written in place (Assign):
// every row is the same kernel with other variable values, compiled once.
TEST_P(ReduceMovementTest, SymbolicRowsAndAssignShareOneKernel) {
  Tensor src = T(Iota(12), {4, 3});
  Tensor dst = Tensor::Zeros(e, {4, 3}, dtypes::kFloat32, dev);
  ASSERT_TRUE(dst.Realize().ok());
  UOpRef r = UOp::Variable("r", 0, 3), w = UOp::Variable("w", 0, 3);
  uint64_t compiled = 0;
  for (int64_t i = 0; i < 4; ++i) {
    Tensor row = src.ShrinkAt(0, UOp::Bind(r, i), 1) * 2.0 + 1.0;
    ASSERT_TRUE(dst.ShrinkAt(0, UOp::Bind(w, 3 - i), 1).Assign(row).ok());
    if (i == 0) compiled = e->stats().kernels_compiled;
  }
  EXPECT_EQ(e->stats().kernels_compiled, compiled) << "a new kernel per row";
  Check(dst, {19, 21, 23, 13, 15, 17, 7, 9, 11, 1, 3, 5});
  // In place, reading each element where it is written; and through another
  // view (a transpose), which is computed before it is written.
  Tensor sq = T({1, 2, 3, 4}, {2, 2});
  ASSERT_TRUE(sq.Realize().ok());
  ASSERT_TRUE(sq.Assign(sq * 10.0 + 1.0).ok());
  ASSERT_TRUE(sq.Assign(sq.Transpose() + sq).ok());
  Check(sq, {22, 52, 52, 82});
  // A symbolic start outside the dim, a mismatched shape, a padded target.
  EXPECT_FALSE(src.ShrinkAt(0, UOp::Bind(UOp::Variable("x", 0, 4), 0), 1).ok());
  EXPECT_FALSE(dst.Assign(src.Shrink({{0, 2}, {0, 3}})).ok());
  EXPECT_FALSE(dst.Pad({{1, 0}, {0, 0}}).Shrink({{0, 4}, {0, 3}}).Assign(src).ok());
  EXPECT_FALSE((src + 1.0).Assign(src).ok());  // not a realized buffer
}

// One lazy graph with thousands of reduces that each need their own kernel
// (an unrolled recurrence): the scheduler plans it in one realize. The old
// planner restarted after every decision and gave up after 1000 (an abort).
TEST_P(ReduceMovementTest, ThousandsOfReducesInOneGraph) {
  std::vector<double> ref = {1, 2, 3, 4};
  Tensor x = T({1, 2, 3, 4}, {4});
  for (int i = 0; i < 1500; ++i) {
    x = (x - x.Mean()) * 0.998 + x.Max() * 0.25;
    double mean = (ref[0] + ref[1] + ref[2] + ref[3]) / 4;
    double max = *std::max_element(ref.begin(), ref.end());
    for (double& v : ref) v = (v - mean) * 0.998 + max * 0.25;
  }
  Check(x, ref, 1e-4, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Devices, ReduceMovementTest, ::testing::ValuesIn(TestDevices()),
                         DeviceParamName);

}  // namespace
}  // namespace kiln

// Cat / Stack / Split / Repeat / Gather / IndexSelect / Cumsum on CPU and
// INTERP, against hand-computed values and naive references.
#include <cmath>

#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

std::vector<float> Iota(int n, float start = 0) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

class IndexTest : public DeviceTest {
 protected:


  Tensor T(const std::vector<float>& v, Shape s) { return Tensor::FromFloats(e, v, s, dev); }
  Tensor I32(const std::vector<int32_t>& v, Shape s) {
    return Tensor::FromVector(e, v, s, dtypes::kInt32, dev);
  }
  Tensor I64(const std::vector<int64_t>& v, Shape s) {
    return Tensor::FromVector(e, v, s, dtypes::kInt64, dev);
  }
};

TEST_P(IndexTest, CatAxes) {
  Tensor a = T(Iota(6), {2, 3}), b = T(Iota(4, 10), {2, 2}), c = T(Iota(2, 20), {2, 1});
  Tensor r = Tensor::Cat({a, b, c}, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r.shape(), (Shape{2, 6}));
  Check(r, {0, 1, 2, 10, 11, 20, 3, 4, 5, 12, 13, 21});
  Tensor r0 = Tensor::Cat({a, T(Iota(3, 7), {1, 3})}, -2);
  EXPECT_EQ(r0.shape(), (Shape{3, 3}));
  Check(r0, {0, 1, 2, 3, 4, 5, 7, 8, 9});
  // Non-contiguous and computed inputs.
  Tensor r2 = Tensor::Cat({a.Transpose(), (b * 2.0).Transpose()}, 0);
  EXPECT_EQ(r2.shape(), (Shape{5, 2}));
  Check(r2, {0, 3, 1, 4, 2, 5, 20, 24, 22, 26});
  // Cat of a tensor with itself; 1-D.
  Check((Tensor::Cat({c.Reshape({2}), c.Reshape({2})}, 0)), {20, 21, 20, 21});
}

TEST_P(IndexTest, CatEdgeCases) {
  Tensor a = T(Iota(6), {2, 3});
  Tensor empty = T({}, {2, 0});
  // Size-0 inputs are skipped; a single input is returned as is.
  Tensor r = Tensor::Cat({empty, a, empty}, 1);
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  Check(r, Values(a));
  Check((Tensor::Cat({a}, 0)), Values(a));
  Tensor all_empty = Tensor::Cat({empty, empty}, 1);
  ASSERT_TRUE(all_empty.ok()) << all_empty.status();
  EXPECT_EQ(all_empty.shape(), (Shape{2, 0}));
  EXPECT_TRUE(Values(all_empty).empty());
  // Dtype promotion int32 + float32 -> float32; bool cat; -0.0 and inf kept.
  Tensor m = Tensor::Cat({I32({1, 2}, {2}), T({0.5, INFINITY}, {2})}, 0);
  EXPECT_EQ(m.dtype(), dtypes::kFloat32);
  Check(m, {1, 2, 0.5, INFINITY});
  Tensor bt = T({1, 0}, {2}).Cast(dtypes::kBool);
  Tensor bc = Tensor::Cat({bt, bt.LogicalNot()}, 0);
  EXPECT_EQ(bc.dtype(), dtypes::kBool);
  Check(bc, {1, 0, 0, 1});
  std::vector<double> neg = Values(Tensor::Cat({T({-0.0f}, {1}), T({1}, {1})}, 0));
  EXPECT_TRUE(std::signbit(neg[0]));
}

TEST_P(IndexTest, CatErrors) {
  Tensor a = T(Iota(6), {2, 3}), b = T(Iota(6), {3, 2});
  Tensor bad = Tensor::Cat({a, b}, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(2,3)"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("(3,2)"), std::string::npos) << bad.status();
  EXPECT_FALSE(Tensor::Cat({}, 0).ok());
  EXPECT_FALSE(Tensor::Cat({a, a}, 2).ok());
  EXPECT_FALSE(Tensor::Cat({a, T(Iota(3), {3})}, 0).ok());
  EXPECT_FALSE(Tensor::Cat({a, Tensor()}, 0).ok());
}

TEST_P(IndexTest, Stack) {
  Tensor a = T({1, 2, 3}, {3}), b = T({4, 5, 6}, {3});
  Tensor s0 = Tensor::Stack({a, b}, 0);
  EXPECT_EQ(s0.shape(), (Shape{2, 3}));
  Check(s0, {1, 2, 3, 4, 5, 6});
  Tensor s1 = Tensor::Stack({a, b, a}, -1);
  EXPECT_EQ(s1.shape(), (Shape{3, 3}));
  Check(s1, {1, 4, 1, 2, 5, 2, 3, 6, 3});
  Tensor m = Tensor::Stack({T(Iota(4), {2, 2}), T(Iota(4, 4), {2, 2})}, 1);
  EXPECT_EQ(m.shape(), (Shape{2, 2, 2}));
  Check(m, {0, 1, 4, 5, 2, 3, 6, 7});
  EXPECT_FALSE(Tensor::Stack({a, T({1, 2}, {2})}, 0).ok());
  EXPECT_FALSE(Tensor::Stack({a, b}, 2).ok());
}

TEST_P(IndexTest, Split) {
  Tensor a = T(Iota(12), {3, 4});
  std::vector<Tensor> p = a.Split({1, 0, 3}, -1);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].shape(), (Shape{3, 1}));
  EXPECT_EQ(p[1].shape(), (Shape{3, 0}));
  EXPECT_EQ(p[2].shape(), (Shape{3, 3}));
  Check(p[0], {0, 4, 8});
  Check(p[2], {1, 2, 3, 5, 6, 7, 9, 10, 11});
  std::vector<Tensor> q = a.Split({2, 1}, 0);
  Check(q[1], {8, 9, 10, 11});
  std::vector<Tensor> bad = a.Split({2, 3}, 1);
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_FALSE(bad[0].ok());
  EXPECT_NE(bad[0].status().message().find("(3,4)"), std::string::npos) << bad[0].status();
  EXPECT_FALSE(a.Split({3}, 5)[0].ok());
  EXPECT_FALSE(a.Split({}, 0)[0].ok());
}

// ChunkBatch: equal slices of the largest divisor of the batch up to `per`,
// the results concatenated along dim 0.
TEST_P(IndexTest, ChunkBatch) {
  Tensor x = T(Iota(12), {6, 2});
  auto run = [&](int64_t per, std::vector<int64_t>* seen) {
    return x.ChunkBatch(per, [seen](const Tensor& s) {
      seen->push_back(s.shape()[0]);
      return (s * 2.0).Sum({1});
    });
  };
  std::vector<double> want = {2, 10, 18, 26, 34, 42};
  for (auto [per, slices] : std::vector<std::pair<int64_t, std::vector<int64_t>>>{
           {6, {6}}, {9, {6}}, {4, {3, 3}}, {2, {2, 2, 2}}, {0, {1, 1, 1, 1, 1, 1}}}) {
    SCOPED_TRACE(per);
    std::vector<int64_t> seen;
    Tensor r = run(per, &seen);
    EXPECT_EQ(seen, slices);
    EXPECT_EQ(r.shape(), (Shape{6}));
    Check(r, want);
  }
  // 130 rows in slices of at most 1 or 2: 130 or 65 slices, more than 64 --
  // one call on the whole batch.
  Tensor many = T(Iota(130), {130, 1});
  for (int64_t per : {1, 2}) {
    int calls = 0;
    Tensor r = many.ChunkBatch(per, [&](const Tensor& s) { ++calls; return s * 2.0; });
    EXPECT_EQ(calls, 1) << per;
    EXPECT_EQ(r.shape(), (Shape{130, 1}));
  }
  // Up to 3: slices of 2 (the largest divisor of 130 up to 3), 65 of them: one call. Up to 5:
  // 26 slices of 5.
  for (auto [per, want] : {std::pair<int64_t, int>{3, 1}, {5, 26}}) {
    int calls = 0;
    (void)many.ChunkBatch(per, [&](const Tensor& s) { ++calls; return s; });
    EXPECT_EQ(calls, want) << per;
  }
  std::vector<int64_t> seen;
  Tensor bad = x.ChunkBatch(2, [&](const Tensor& s) {
    seen.push_back(s.shape()[0]);
    return seen.size() == 2 ? Tensor::Cat({s, s}, 5) : s;  // the second slice fails
  });
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(seen.size(), 2u) << "stops at the first error";
}

TEST_P(IndexTest, Repeat) {
  Tensor a = T({1, 2, 3, 4}, {2, 2});
  Tensor r = a.Repeat({2, 3});
  EXPECT_EQ(r.shape(), (Shape{4, 6}));
  Check(r, {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
  Tensor longer = T({1, 2}, {2}).Repeat({2, 2});
  EXPECT_EQ(longer.shape(), (Shape{2, 4}));
  Check(longer, {1, 2, 1, 2, 1, 2, 1, 2});
  Tensor shorter = a.Repeat({2});  // numpy: repeats padded with leading 1s
  EXPECT_EQ(shorter.shape(), (Shape{2, 4}));
  Check(shorter, {1, 2, 1, 2, 3, 4, 3, 4});
  EXPECT_EQ(a.Repeat({0, 1}).shape(), (Shape{0, 2}));
  Tensor i = I32({7, 8, 9}, {3, 1}).Repeat({1, 2});
  EXPECT_EQ(i.dtype(), dtypes::kInt32);
  Check(i, {7, 7, 8, 8, 9, 9});
  EXPECT_FALSE(a.Repeat({-1, 1}).ok());
}

TEST_P(IndexTest, GatherElementsOnnxExamples) {
  Tensor d = T({1, 2, 3, 4}, {2, 2});
  Check((d.Gather(1, I64({0, 0, 1, 0}, {2, 2}))), {1, 1, 4, 3});
  Tensor d3 = T(Iota(9, 1), {3, 3});
  Tensor r = d3.Gather(0, I32({1, 2, 0, 2, 0, 0}, {2, 3}));
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  Check(r, {4, 8, 3, 7, 2, 3});
  // Negative indices count from the end.
  Check((d3.Gather(0, I32({-1, -2, -3, 0, 1, -1}, {2, 3}))), {7, 5, 3, 1, 5, 9});
  // Index smaller than the input outside the axis.
  Check((d3.Gather(1, I64({2, 0}, {2, 1}))), {3, 4});
}

TEST_P(IndexTest, GatherElementsMatchesNaive) {
  const int a = 3, b = 5, c = 2;
  std::vector<float> x = Iota(a * b * c);
  for (int axis = 0; axis < 3; ++axis) {
    Shape is = {a, b, c};
    is[axis] = 4;
    int64_t n = axis == 0 ? a : axis == 1 ? b : c;
    std::vector<int64_t> idx(Prod(is));
    for (size_t i = 0; i < idx.size(); ++i)
      idx[i] = static_cast<int64_t>((i * 7 + 3) % (2 * n)) - n;
    std::vector<double> want;
    for (int64_t i = 0; i < is[0]; ++i)
      for (int64_t j = 0; j < is[1]; ++j)
        for (int64_t k = 0; k < is[2]; ++k) {
          int64_t v = idx[(i * is[1] + j) * is[2] + k];
          if (v < 0) v += n;
          int64_t ii = axis == 0 ? v : i, jj = axis == 1 ? v : j, kk = axis == 2 ? v : k;
          want.push_back(x[(ii * b + jj) * c + kk]);
        }
    Tensor r = T(x, {a, b, c}).Gather(axis, I64(idx, is));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r.shape(), is);
    Check(r, want);
  }
  Tensor x2 = T(Iota(4), {2, 2});
  EXPECT_FALSE(x2.Gather(0, T({0, 1}, {1, 2})).ok());          // float index
  EXPECT_FALSE(x2.Gather(0, I32({0, 1}, {2})).ok());           // rank
  EXPECT_FALSE(x2.Gather(2, I32({0, 1, 0, 1}, {2, 2})).ok());  // axis
  EXPECT_FALSE(x2.Gather(0, I32({0, 1, 0}, {1, 3})).ok());     // too big
}

TEST_P(IndexTest, IndexSelectOnnxExamples) {
  Tensor d = T({1, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f}, {3, 2});
  Tensor r = d.IndexSelect(0, I64({0, 1, 1, 2}, {2, 2}));
  EXPECT_EQ(r.shape(), (Shape{2, 2, 2}));
  Check(r, {1, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7});
  Tensor d2 = T({1, 1.2f, 1.9f, 2.3f, 3.4f, 3.9f, 4.5f, 5.7f, 5.9f}, {3, 3});
  Tensor r2 = d2.IndexSelect(1, I32({0, 2}, {1, 2}));
  EXPECT_EQ(r2.shape(), (Shape{3, 1, 2}));
  Check(r2, {1, 1.9, 2.3, 3.9, 4.5, 5.9});
  // Scalar index drops the axis; negative wraps.
  Tensor s = d2.IndexSelect(-1, I32({-1}, {}));
  EXPECT_EQ(s.shape(), (Shape{3}));
  Check(s, {1.9, 3.9, 5.9});
  // Empty index.
  Tensor z = d2.IndexSelect(0, I64({}, {0}));
  EXPECT_EQ(z.shape(), (Shape{0, 3}));
}

TEST_P(IndexTest, IndexSelectDtypes) {
  Tensor i64 = I64({10, -20, 30, 1LL << 40}, {4});
  Tensor r = i64.IndexSelect(0, I32({3, 0, 3}, {3}));
  EXPECT_EQ(r.dtype(), dtypes::kInt64);
  auto v = r.ToVector<int64_t>();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<int64_t>{1LL << 40, 10, 1LL << 40}));
  Tensor b = T({1, 0, 1}, {3}).Cast(dtypes::kBool).IndexSelect(0, I32({1, 2, 1}, {3}));
  EXPECT_EQ(b.dtype(), dtypes::kBool);
  Check(b, {0, 1, 0});
  Tensor h = T({0.5, NAN, INFINITY}, {3}).Cast(dtypes::kFloat16).IndexSelect(0, I32({2, 0}, {2}));
  EXPECT_EQ(h.dtype(), dtypes::kFloat16);
  Check(h, {INFINITY, 0.5});
  EXPECT_FALSE(T({1, 2}, {2}).IndexSelect(1, I32({0}, {1})).ok());
  EXPECT_FALSE(T({1, 2}, {2}).IndexSelect(0, T({0}, {1})).ok());
}

TEST_P(IndexTest, Cumsum) {
  Tensor a = T(Iota(6, 1), {2, 3});
  Check((a.Cumsum(1)), {1, 3, 6, 4, 9, 15});
  Check((a.Cumsum(0)), {1, 2, 3, 5, 7, 9});
  Check((a.Cumsum(-1)), {1, 3, 6, 4, 9, 15});
  const int n = 37;
  std::vector<int32_t> v(n);
  std::vector<double> want;
  int32_t acc = 0;
  for (int i = 0; i < n; ++i) {
    v[i] = (i * 13) % 7 - 3;
    want.push_back(acc += v[i]);
  }
  Tensor c = I32(v, {1, n}).Cumsum(1);
  EXPECT_EQ(c.dtype(), dtypes::kInt32);
  Check(c, want);
  Check((T({5}, {1}).Cumsum(0)), {5});
  // Long rows go through blocked prefix sums (one and two levels).
  for (int len : {65, 300, 4500}) {
    std::vector<int32_t> lv(2 * len);
    for (int i = 0; i < 2 * len; ++i) lv[i] = (i * 31) % 17 - 8;
    std::vector<double> lw;
    for (int r = 0; r < 2; ++r) {
      int64_t s = 0;
      for (int i = 0; i < len; ++i) lw.push_back(static_cast<double>(s += lv[r * len + i]));
    }
    Check((I32(lv, {2, len}).Cumsum(-1)), lw);
    Check((I32(lv, {2, len}).Transpose().Cast(dtypes::kFloat32).Cumsum(0).Transpose()), lw);
  }
  Tensor bc = T({1, 0, 1, 1}, {4}).Cast(dtypes::kBool).Cumsum(0);
  EXPECT_EQ(bc.dtype(), dtypes::kInt32);
  Check(bc, {1, 1, 2, 3});
  EXPECT_EQ(T({}, {0, 3}).Cumsum(0).shape(), (Shape{0, 3}));
  EXPECT_FALSE(a.Cumsum(2).ok());
}

INSTANTIATE_TEST_SUITE_P(Devices, IndexTest, ::testing::ValuesIn(TestDevices()), DeviceParamName);

}  // namespace
}  // namespace kiln

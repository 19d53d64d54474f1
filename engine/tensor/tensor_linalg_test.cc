// Constructors, random numbers, matmul / linear, softmax, layer and batch
// norm, and error-state propagation on CPU and INTERP.
#include <cmath>

#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

std::vector<float> Grid(int64_t n, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 5 + seed * 3) % 9) / 4.0f - 1;
  return v;
}

// Naive batched matmul of (B, M, K) x (B, K, N).
std::vector<double> RefBmm(const std::vector<float>& a, const std::vector<float>& b, int64_t bs,
                           int64_t m, int64_t k, int64_t n) {
  std::vector<double> r(bs * m * n, 0);
  for (int64_t z = 0; z < bs; ++z)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t x = 0; x < k; ++x)
          r[(z * m + i) * n + j] +=
              static_cast<double>(a[(z * m + i) * k + x]) * b[(z * k + x) * n + j];
  return r;
}

class LinalgTest : public DeviceTest {
 protected:

  Tensor T(const std::vector<float>& v, Shape s) { return Tensor::FromFloats(e, v, s, dev); }
};

TEST_P(LinalgTest, Constructors) {
  Tensor z = Tensor::Zeros(e, {2, 3}, dtypes::kFloat32, dev);
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  Check(z, std::vector<double>(6, 0));
  Tensor o = Tensor::Ones(e, {3}, dtypes::kInt64, dev);
  EXPECT_EQ(o.dtype(), dtypes::kInt64);
  Check(o, {1, 1, 1});
  Check((Tensor::Full(e, {2}, 2.5, dtypes::kFloat16, dev)), {2.5, 2.5});
  Check((Tensor::Full(e, {2}, int64_t{-7}, dtypes::kInt8, dev)), {-7, -7});
  Check((Tensor::Full(e, {}, int64_t{1}, dtypes::kBool, dev)), {1});
  EXPECT_EQ(Tensor::Zeros(e, {0, 4}, dtypes::kFloat32, dev).numel(), 0);
  Check((Tensor::Arange(e, 0, 5, 1, dtypes::kInt32, dev)), {0, 1, 2, 3, 4});
  Check((Tensor::Arange(e, 1, 3, 0.5, dtypes::kFloat32, dev)), {1, 1.5, 2, 2.5});
  Check((Tensor::Arange(e, 5, 0, -2, dtypes::kInt64, dev)), {5, 3, 1});
  Check((Tensor::Arange(e, 0, 1, 0.3, dtypes::kFloat64, dev)), {0, 0.3, 0.6, 0.9});
  EXPECT_EQ(Tensor::Arange(e, 3, 3, 1, dtypes::kInt32, dev).numel(), 0);
  EXPECT_FALSE(Tensor::Arange(e, 0, 3, 0, dtypes::kInt32, dev).ok());
  Check((Tensor::Eye(e, 3, dtypes::kFloat32, dev)), {1, 0, 0, 0, 1, 0, 0, 0, 1});
  Tensor t = T({1, 2}, {2});
  Check((t.FullLike(int64_t{4})), {4, 4});
  Check((t.OnesLike() + t.ZerosLike()), {1, 1});
  EXPECT_EQ(t.Const(1.5, dtypes::kFloat64).shape(), Shape{});
  Check((t + t.Scalar(0.25)), {1.25, 2.25});
  Tensor bad = Tensor::FromFloats(e, {1, 2, 3}, {2, 2}, dev);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(2,2)"), std::string::npos) << bad.status();
  EXPECT_FALSE(Tensor::Empty(e, {-1}, dtypes::kFloat32, dev).ok());
}

TEST_P(LinalgTest, RandAndRandn) {
  const int64_t n = 10000;
  Tensor r = Tensor::Rand(e, {100, 100}, 42, dtypes::kFloat32, dev);
  std::vector<double> v = Values(r);
  ASSERT_EQ(v.size(), static_cast<size_t>(n));
  double sum = 0, lo = 1, hi = 0;
  for (double x : v) sum += x, lo = std::min(lo, x), hi = std::max(hi, x);
  EXPECT_GE(lo, 0);
  EXPECT_LT(hi, 1);
  EXPECT_NEAR(sum / n, 0.5, 0.02);
  EXPECT_EQ(Values(Tensor::Rand(e, {100, 100}, 42, dtypes::kFloat32, dev)), v);
  std::vector<double> other = Values(Tensor::Rand(e, {100, 100}, 43, dtypes::kFloat32, dev));
  int same = 0;
  for (int64_t i = 0; i < n; ++i) same += other[i] == v[i];
  EXPECT_LT(same, 50);
  // Element i depends only on (seed, i).
  std::vector<double> flat = Values(Tensor::Rand(e, {n}, 42, dtypes::kFloat32, dev));
  EXPECT_EQ(flat, v);
  std::vector<double> g = Values(Tensor::Randn(e, {n}, 7, dtypes::kFloat32, dev));
  double m = 0, s2 = 0;
  for (double x : g) m += x;
  m /= n;
  for (double x : g) s2 += (x - m) * (x - m);
  EXPECT_NEAR(m, 0, 0.05);
  EXPECT_NEAR(std::sqrt(s2 / n), 1, 0.05);
  for (double x : g) ASSERT_TRUE(std::isfinite(x));
  Tensor h = Tensor::Rand(e, {8}, 1, dtypes::kFloat16, dev);
  EXPECT_EQ(h.dtype(), dtypes::kFloat16);
  for (double x : Values(h)) EXPECT_TRUE(x >= 0 && x <= 1);
}

TEST_P(LinalgTest, MatmulShapes) {
  Tensor v = T({1, 2, 3}, {3});
  Tensor dot = v.Matmul(T({4, 5, 6}, {3}));
  EXPECT_EQ(dot.shape(), Shape{});
  Check(dot, {32});
  Tensor m = T({1, 0, 2, -1, 3, 1}, {3, 2});
  Tensor vm = v.Matmul(m);
  EXPECT_EQ(vm.shape(), (Shape{2}));
  Check(vm, {1 * 1 + 2 * 2 + 3 * 3, 0 - 2 + 3});
  Tensor mv = m.Transpose().Matmul(v);
  EXPECT_EQ(mv.shape(), (Shape{2}));
  Check(mv, {14, 1});
  // Batched with broadcasting: (2, 1, 3, 4) x (5, 4, 2) -> (2, 5, 3, 2).
  std::vector<float> a = Grid(2 * 3 * 4, 1), b = Grid(5 * 4 * 2, 2);
  Tensor r = T(a, {2, 1, 3, 4}).Matmul(T(b, {5, 4, 2}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r.shape(), (Shape{2, 5, 3, 2}));
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j) {
      std::vector<float> ai(a.begin() + i * 12, a.begin() + i * 12 + 12);
      std::vector<float> bj(b.begin() + j * 8, b.begin() + j * 8 + 8);
      std::vector<double> p = RefBmm(ai, bj, 1, 3, 4, 2);
      want.insert(want.end(), p.begin(), p.end());
    }
  Check(r, want);
  // Odd sizes, batched, non-contiguous operand.
  std::vector<float> x = Grid(3 * 7 * 13, 3), y = Grid(3 * 9 * 13, 4);
  Tensor yt = T(y, {3, 9, 13}).Transpose();  // (3, 13, 9)
  std::vector<float> yv(3 * 13 * 9);
  for (int z = 0; z < 3; ++z)
    for (int i = 0; i < 13; ++i)
      for (int j = 0; j < 9; ++j) yv[(z * 13 + i) * 9 + j] = y[(z * 9 + j) * 13 + i];
  Check((T(x, {3, 7, 13}).Matmul(yt)), RefBmm(x, yv, 3, 7, 13, 9));
  Tensor bad = T(a, {2, 3, 4}).Matmul(T(b, {5, 8}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(2,3,4)"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("(5,8)"), std::string::npos) << bad.status();
  EXPECT_FALSE(T({1}, {}).Matmul(v).ok());
  EXPECT_FALSE(T(a, {2, 3, 4}).Matmul(T(b, {5, 4, 2})).ok());  // batch 2 vs 5
}

// Attention heads merged back, (H, S, D) -> (S, H * D), then a linear
// layer: the operand is read through two views, so it is copied first (one
// more kernel) and the matmul reads it plainly.
TEST_P(LinalgTest, MatmulCopiesAnOperandOfStackedViews) {
  const int64_t h = 2, s = 5, d = 4, n = 3;
  std::vector<float> x = Grid(h * s * d, 5), w = Grid(h * d * n, 6);
  Tensor heads = T(x, {h, s, d}), wt = T(w, {h * d, n});
  ASSERT_TRUE(heads.Realize().ok());
  ASSERT_TRUE(wt.Realize().ok());
  Tensor merged = heads.Permute({1, 0, 2}).Reshape({s, h * d});
  ASSERT_GT(StOf(*merged.uop())->views().size(), 1u);
  Tensor r = merged.Matmul(wt);
  uint64_t before = e->stats().kernels_run;
  ASSERT_TRUE(r.Realize().ok()) << r.status();
  EXPECT_EQ(e->stats().kernels_run - before, 2u) << "copy, then matmul";
  std::vector<float> m(s * h * d);
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < h; ++j)
      for (int64_t k = 0; k < d; ++k) m[(i * h + j) * d + k] = x[(j * s + i) * d + k];
  Check(r, RefBmm(m, w, 1, s, h * d, n));
}

// A right operand read across its rows (Q K^T: K's rows are the output
// columns) pays for a copy into (K, N) rows when A has 16 rows or more;
// copied or not, the product is the same.
TEST_P(LinalgTest, TransposedCopyPays) {
  const int64_t heads = 2, d = 8, s = 12, m = 16;
  std::vector<float> qv = Grid(heads * m * d, 9), kv = Grid(heads * s * d, 10);
  Tensor q = T(qv, {heads, m, d}), k = T(kv, {heads, s, d});
  ASSERT_TRUE(Tensor::RealizeAll({&q, &k}).ok());
  Tensor kt = k.Transpose(-1, -2);
  EXPECT_TRUE(Tensor::TransposedCopyPays(m, kt));
  EXPECT_FALSE(Tensor::TransposedCopyPays(4, kt)) << "4 rows: dot products";
  EXPECT_FALSE(Tensor::TransposedCopyPays(m, k)) << "rows already";
  std::vector<float> ktv(heads * d * s);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < s; ++j)
      for (int64_t c = 0; c < d; ++c) ktv[(h * d + c) * s + j] = kv[(h * s + j) * d + c];
  for (const Tensor& b : {kt, kt.Contiguous()}) Check(q.Matmul(b), RefBmm(qv, ktv, heads, m, d, s));
}

// A long reduction (K >= 4096, M and N >= 32) is reduced in chunks of K
// (partial sums realized, then summed: two kernels); a K with no chunking
// into multiples of 16 stays one kernel. Both match the naive product.
TEST_P(LinalgTest, MatmulSplitsALongReduction) {
  for (int64_t k : {4096, 4100}) {
    const int64_t m = 32, n = 33;
    std::vector<float> x = Grid(m * k, 7), w = Grid(k * n, 8);
    Tensor a = T(x, {m, k}), b = T(w, {k, n});
    ASSERT_TRUE(Tensor::RealizeAll({&a, &b}).ok());
    Tensor r = a.Matmul(b);
    uint64_t before = e->stats().kernels_run;
    ASSERT_TRUE(r.Realize().ok()) << r.status();
    EXPECT_EQ(e->stats().kernels_run - before, k == 4096 ? 2u : 1u) << "K " << k;
    Check(r, RefBmm(x, w, 1, m, k, n));
  }
}

TEST_P(LinalgTest, MatmulDtypesAndLinear) {
  Tensor a = Tensor::FromVector<int32_t>(e, {1, 2, 3, 4, 5, 6}, {2, 3}, dtypes::kInt32, dev);
  Tensor b = Tensor::FromVector<int32_t>(e, {1, -1, 2, 0, 0, 3}, {3, 2}, dtypes::kInt32, dev);
  Tensor r = a.Matmul(b);
  EXPECT_EQ(r.dtype(), dtypes::kInt32);
  Check(r, {5, 8, 14, 14});
  Tensor h = a.Cast(dtypes::kFloat16).Matmul(b.Cast(dtypes::kFloat16));
  EXPECT_EQ(h.dtype(), dtypes::kFloat16);
  Check(h, {5, 8, 14, 14});
  Tensor x = T({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor w = T({1, 0, 0, 0, 1, 1}, {2, 3});  // (out, in)
  Tensor bias = T({0.5, -1}, {2});
  Check((x.Linear(w, &bias)), {1.5, 4, 4.5, 10});
  Check((x.Linear(w)), {1, 5, 4, 11});
}

TEST_P(LinalgTest, SoftmaxAndLogSoftmax) {
  Tensor t = T({1, 2, 3, 1000, 1001, 1002, -5, 0, 5}, {3, 3});
  auto soft = [](std::vector<double> v) {
    double m = *std::max_element(v.begin(), v.end()), s = 0;
    for (double& x : v) s += std::exp(x - m);
    for (double& x : v) x = std::exp(x - m) / s;
    return v;
  };
  std::vector<double> want;
  for (auto row : {soft({1, 2, 3}), soft({1000, 1001, 1002}), soft({-5, 0, 5})})
    want.insert(want.end(), row.begin(), row.end());
  Check((t.Softmax()), want);
  std::vector<double> lw = want;
  for (double& x : lw) x = std::log(x);
  Check((t.LogSoftmax(-1)), lw, 1e-5, 1e-5);
  std::vector<double> col = soft({1, 1000, -5});
  std::vector<double> s0 = Values(t.Softmax(0));
  EXPECT_NEAR(s0[0], col[0], 1e-6);
  EXPECT_NEAR(s0[3], col[1], 1e-6);
  std::vector<double> sums = Values(t.Softmax(0).Sum({0}));
  ExpectNear(sums, {1, 1, 1});
  Tensor i = Tensor::FromVector<int32_t>(e, {0, 0}, {2}, dtypes::kInt32, dev);
  Check((i.Softmax()), {0.5, 0.5});
  // The exponentials are stored once, not recomputed by the normalization:
  // the max, the exponentials, their sum, the division.
  ASSERT_TRUE(t.Realize().ok());
  Tensor sm = t.Softmax();
  uint64_t before = e->stats().kernels_run;
  ASSERT_TRUE(sm.Realize().ok());
  EXPECT_EQ(e->stats().kernels_run - before, 4u);
}

TEST_P(LinalgTest, LayerNormAndBatchNorm) {
  Tensor x = T({1, 2, 3, 4, 2, 4, 6, 8}, {2, 4});
  auto ln = [](std::vector<double> v) {
    double m = 0, s = 0;
    for (double a : v) m += a;
    m /= v.size();
    for (double a : v) s += (a - m) * (a - m);
    s /= v.size();
    for (double& a : v) a = (a - m) / std::sqrt(s + 1e-5);
    return v;
  };
  std::vector<double> want = ln({1, 2, 3, 4}), w2 = ln({2, 4, 6, 8});
  want.insert(want.end(), w2.begin(), w2.end());
  Check((x.LayerNorm({-1})), want);
  Check((x.LayerNorm({0, 1})), ln({1, 2, 3, 4, 2, 4, 6, 8}));
  // Batch norm over channel axis 1 of (N=2, C=2, 2).
  Tensor b = T({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  Tensor scale = T({2, 0.5}, {2}), bias = T({1, -1}, {2});
  Tensor mean = T({1, 2}, {2}), var = T({4, 0.25}, {2});
  std::vector<double> bw;
  double bv[] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (int i = 0; i < 8; ++i) {
    int c = (i / 2) % 2;
    double sc = c ? 0.5 : 2, bi = c ? -1 : 1, mu = c ? 2 : 1, va = c ? 0.25 : 4;
    bw.push_back((bv[i] - mu) / std::sqrt(va + 1e-5) * sc + bi);
  }
  Check((b.BatchNorm(scale, bias, mean, var)), bw);
  EXPECT_FALSE(T({1}, {1}).BatchNorm(scale, bias, mean, var).ok());
  EXPECT_FALSE(b.BatchNorm(T({1, 2, 3}, {3}), bias, mean, var).ok());
}

TEST_P(LinalgTest, ErrorStatesPropagate) {
  Tensor a = T({1, 2, 3}, {3}), b = T({1, 2}, {2});
  Tensor bad = a * b;
  ASSERT_FALSE(bad.ok());
  std::string msg(bad.status().message());
  EXPECT_NE(msg.find("(3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(2)"), std::string::npos) << msg;
  // Every op on an error tensor keeps the first error; nothing crashes.
  std::vector<Tensor> derived = {bad.Exp(),
                                 bad.Sum(),
                                 bad.Reshape({6}),
                                 bad.Permute({0}),
                                 bad.Pad({{1, 1}}),
                                 bad.Matmul(a),
                                 a.Matmul(bad),
                                 bad.Softmax(),
                                 bad.Cast(dtypes::kInt32),
                                 bad.Cumsum(0),
                                 bad.Argmax(0),
                                 Tensor::Cat({a, bad}, 0),
                                 bad.Flip({0}),
                                 bad.Conv(a, nullptr, {}),
                                 Tensor::Where(bad, a, a),
                                 a.Gather(0, bad),
                                 bad.Repeat({2})};
  for (Tensor& d : derived) {
    EXPECT_FALSE(d.ok());
    EXPECT_EQ(d.status(), bad.status());
    EXPECT_FALSE(d.Realize().ok());
    EXPECT_FALSE(d.ToDoubles().ok());
  }
  Tensor uninit;
  EXPECT_FALSE(uninit.ok());
  EXPECT_FALSE((uninit + 1.0).ok());
  EXPECT_FALSE(uninit.ToVector<float>().ok());
  EXPECT_FALSE(Tensor::Error(absl::InternalError("x")).ok());
  auto wrong = a.ToVector<double>();  // element size mismatch
  EXPECT_FALSE(wrong.ok());
  EXPECT_FALSE(a.Bitcast(dtypes::kFloat16).ok());
}

INSTANTIATE_TEST_SUITE_P(Devices, LinalgTest, ::testing::ValuesIn(TestDevices()), DeviceParamName);

}  // namespace
}  // namespace kiln

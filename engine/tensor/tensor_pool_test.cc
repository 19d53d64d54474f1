// Pool windows / MaxPool / AvgPool / global pools / Resize, checked on CPU,
// INTERP and the GPU devices present against naive C++ references (ONNX semantics).
#include <algorithm>
#include <cmath>
#include <functional>

#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

class PoolTest : public DeviceTest {
 protected:
  Tensor T(const std::vector<float>& v, Shape s) { return Tensor::FromFloats(e, v, s, dev); }
};

TEST_P(PoolTest, PoolWindows) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i);
  Tensor x = T(v, {1, 4, 4});
  Tensor w = x.Pool({2, 2}, {1, 1}, {1, 1}, {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w.shape(), (Shape{1, 3, 3, 2, 2}));
  std::vector<double> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) want.push_back((i + a) * 4 + j + b);
  Check(w, want);
  // Stride 2, dilation 2, asymmetric padding with a pad value: 1-D windows.
  Tensor p = T({1, 2, 3, 4, 5}, {5}).Pool({2}, {2}, {2}, {{1, 2}}, 9);
  ASSERT_TRUE(p.ok()) << p.status();
  // padded: 9 1 2 3 4 5 9 9 -> windows start 0,2,4: (9,2) (2,4) (4,9)
  EXPECT_EQ(p.shape(), (Shape{3, 2}));
  Check(p, {9, 2, 2, 4, 4, 9});
  // Non-contiguous input (transposed).
  Tensor t = x.Reshape({4, 4}).Transpose().Pool({3}, {}, {}, {});
  Check((t.Sum({-1})), {0 + 4 + 8, 4 + 8 + 12, 1 + 5 + 9, 5 + 9 + 13, 2 + 6 + 10, 6 + 10 + 14,
                        3 + 7 + 11, 7 + 11 + 15});
}

TEST_P(PoolTest, PoolErrors) {
  Tensor x = T({1, 2, 3}, {3});
  Tensor big = x.Pool({4}, {1}, {1}, {});
  EXPECT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("larger"), std::string::npos) << big.status();
  EXPECT_FALSE(x.Pool({1, 1}, {}, {}, {}).ok());
  EXPECT_FALSE(x.Pool({0}, {}, {}, {}).ok());
  EXPECT_FALSE(x.Pool({2}, {0}, {}, {}).ok());
}

// Naive ONNX MaxPool / AvgPool over the trailing dims of x.
std::vector<double> RefPool(bool max, const Shape& xs, const std::vector<float>& x,
                            const Tensor::PoolOptions& o, Shape* out_shape) {
  size_t nk = o.kernel.size(), lead = xs.size() - nk;
  std::vector<int64_t> s = o.stride.empty() ? o.kernel : o.stride;
  std::vector<int64_t> d = o.dilation.empty() ? std::vector<int64_t>(nk, 1) : o.dilation;
  Pads p = o.padding.empty() ? Pads(nk, {0, 0}) : o.padding;
  Shape out(xs.begin(), xs.begin() + lead);
  for (size_t i = 0; i < nk; ++i) {
    int64_t in = xs[lead + i], span = d[i] * (o.kernel[i] - 1) + 1;
    int64_t num = in + p[i].first + p[i].second - span;
    int64_t n = o.ceil_mode ? (num + s[i] - 1) / s[i] + 1 : num / s[i] + 1;
    if (o.ceil_mode && (n - 1) * s[i] >= in + p[i].first) --n;
    out.push_back(n);
  }
  *out_shape = out;
  std::vector<double> r;
  ForEachIndex(out, [&](const std::vector<int64_t>& oi) {
    double acc = max ? -INFINITY : 0;
    int64_t count = 0;
    ForEachIndex(Shape(o.kernel.begin(), o.kernel.end()), [&](const std::vector<int64_t>& k) {
      std::vector<int64_t> xi(oi.begin(), oi.begin() + lead);
      bool inside = true, in_pad = true;
      for (size_t i = 0; i < nk; ++i) {
        int64_t q = oi[lead + i] * s[i] - p[i].first + k[i] * d[i];
        inside &= q >= 0 && q < xs[lead + i];
        in_pad &= q >= -p[i].first && q < xs[lead + i] + p[i].second;
        xi.push_back(q);
      }
      if (inside || (o.count_include_pad && in_pad)) ++count;
      if (!inside) return;
      double v = x[RavelIndex(xi, xs)];
      acc = max ? std::max(acc, v) : acc + v;
    });
    r.push_back(max ? acc : acc / std::max<int64_t>(count, 1));
  });
  return r;
}

TEST_P(PoolTest, MaxAndAvgPool) {
  struct Case {
    Shape xs;
    Tensor::PoolOptions o;
  };
  std::vector<Case> cases = {
      {{1, 1, 5, 5}, {{2, 2}, {}, {}, {}, false, false}},
      {{1, 1, 5, 5}, {{2, 2}, {}, {}, {}, true, false}},
      {{2, 1, 5, 6}, {{3, 3}, {2, 2}, {}, {{1, 1}, {1, 0}}, false, false}},
      {{2, 1, 5, 6}, {{3, 3}, {2, 2}, {}, {{1, 1}, {1, 0}}, true, true}},
      {{1, 2, 6, 7}, {{2, 3}, {2, 2}, {}, {{1, 0}, {0, 1}}, true, false}},
      {{1, 1, 7, 6}, {{2, 2}, {1, 2}, {2, 2}, {{1, 1}, {0, 0}}, false, true}},
      {{1, 1, 8}, {{3}, {3}, {}, {{1, 1}}, true, false}},  // last window in pad only: dropped
      {{3, 10}, {{4}, {3}, {}, {{2, 2}}, true, true}},
  };
  for (const Case& c : cases) {
    std::vector<float> x = GridValues(Prod(c.xs), 11);
    for (float& v : x) v -= 3;  // all negative: padding must never win a max
    for (bool max : {true, false}) {
      Shape want_shape;
      std::vector<double> want = RefPool(max, c.xs, x, c.o, &want_shape);
      Tensor r = max ? T(x, c.xs).MaxPool(c.o) : T(x, c.xs).AvgPool(c.o);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r.shape(), want_shape) << (max ? "max" : "avg");
      Check(r, want);
    }
  }
}

TEST_P(PoolTest, PoolDtypesAndErrors) {
  Tensor xi =
      Tensor::FromVector<int32_t>(e, {-5, -3, -9, -1, -7, -2}, {1, 1, 6}, dtypes::kInt32, dev);
  Tensor m = xi.MaxPool({{2}, {2}, {}, {{1, 0}}, true, false});
  EXPECT_EQ(m.dtype(), dtypes::kInt32);
  Check(m, {-5, -3, -1, -2});
  Tensor h = T({1, 2, 3, 4}, {1, 1, 4}).Cast(dtypes::kFloat16);
  Tensor a = h.AvgPool({{2}, {}, {}, {}, false, false});
  EXPECT_EQ(a.dtype(), dtypes::kFloat16);
  Check(a, {1.5, 3.5});
  EXPECT_FALSE(h.MaxPool({{5}, {}, {}, {}, false, false}).ok());
  EXPECT_FALSE(h.AvgPool({{2}, {}, {}, {{-1, 0}}, false, false}).ok());
  EXPECT_FALSE(h.AvgPool({{}, {}, {}, {}, false, false}).ok());
}

TEST_P(PoolTest, GlobalPools) {
  std::vector<float> v = GridValues(2 * 3 * 5, 4);
  Tensor x = T(v, {2, 3, 5, 1});
  Tensor avg = x.GlobalAvgPool(), mx = x.GlobalMaxPool();
  EXPECT_EQ(avg.shape(), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(mx.shape(), (Shape{2, 3, 1, 1}));
  std::vector<double> wa, wm;
  for (int c = 0; c < 6; ++c) {
    double s = 0, m = -INFINITY;
    for (int i = 0; i < 5; ++i) s += v[c * 5 + i], m = std::max<double>(m, v[c * 5 + i]);
    wa.push_back(s / 5);
    wm.push_back(m);
  }
  Check(avg, wa);
  Check(mx, wm);
  EXPECT_EQ(T({1, 2}, {1, 2}).GlobalAvgPool().shape(), (Shape{1, 2}));
  EXPECT_FALSE(T({1}, {1}).GlobalMaxPool().ok());
}

// ONNX Resize reference for one axis, applied axis by axis.
std::vector<double> RefResize(const Shape& xs, std::vector<double> x, const Shape& sizes,
                              Tensor::ResizeMode mode, Tensor::CoordMode cm,
                              Tensor::NearestMode nm) {
  Shape cur = xs;
  for (size_t ax = 0; ax < xs.size(); ++ax) {
    int64_t in = cur[ax], out = sizes[ax];
    if (in == out) continue;
    Shape next = cur;
    next[ax] = out;
    std::vector<double> y(Prod(next));
    double scale = static_cast<double>(out) / in;
    ForEachIndex(next, [&](const std::vector<int64_t>& oi) {
      double o = static_cast<double>(oi[ax]), c = 0;
      switch (cm) {
        case Tensor::CoordMode::kHalfPixel:
          c = (o + 0.5) / scale - 0.5;
          break;
        case Tensor::CoordMode::kPytorchHalfPixel:
          c = out > 1 ? (o + 0.5) / scale - 0.5 : -0.5;
          break;
        case Tensor::CoordMode::kAlignCorners:
          c = out == 1 ? 0 : o * (in - 1) / (out - 1);
          break;
        case Tensor::CoordMode::kAsymmetric:
          c = o / scale;
          break;
      }
      auto at = [&](int64_t i) {
        std::vector<int64_t> xi = oi;
        xi[ax] = std::clamp<int64_t>(i, 0, in - 1);
        return x[RavelIndex(xi, cur)];
      };
      double v;
      if (mode == Tensor::ResizeMode::kNearest) {
        double f = std::floor(c);
        int64_t i =
            nm == Tensor::NearestMode::kFloor  ? static_cast<int64_t>(f)
            : nm == Tensor::NearestMode::kCeil ? static_cast<int64_t>(std::ceil(c))
            : c - f == 0.5
                ? static_cast<int64_t>(nm == Tensor::NearestMode::kRoundPreferCeil ? f + 1 : f)
                : static_cast<int64_t>(std::round(c));
        v = at(i);
      } else {
        double f = std::floor(c), r = c - f;
        v = at(static_cast<int64_t>(f)) * (1 - r) + at(static_cast<int64_t>(f) + 1) * r;
      }
      y[RavelIndex(oi, next)] = v;
    });
    x = std::move(y);
    cur = next;
  }
  return x;
}

TEST_P(PoolTest, ResizeKnownValues) {
  Tensor x = T({1, 2, 3, 4}, {1, 1, 2, 2});
  using M = Tensor::ResizeMode;
  using C = Tensor::CoordMode;
  // PyTorch bilinear, align_corners=False (half_pixel).
  Check((x.Resize({1, 1, 4, 4}, M::kLinear)),
        {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  Check((x.Resize({1, 1, 3, 3}, M::kLinear, C::kAlignCorners)), {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  // ONNX resize_upsample_sizes_nearest: 2x2 -> 7x8.
  Tensor n = x.Resize({1, 1, 7, 8}, M::kNearest);
  std::vector<double> want;
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 8; ++j) want.push_back((i < 4 ? 1 : 3) + (j < 4 ? 0 : 1));
  Check(n, want);
  Tensor f = T({1, 2}, {2}).Resize({4}, M::kNearest, C::kAsymmetric, Tensor::NearestMode::kFloor);
  Check(f, {1, 1, 2, 2});
}

TEST_P(PoolTest, ResizeMatchesReference) {
  using M = Tensor::ResizeMode;
  using C = Tensor::CoordMode;
  using N = Tensor::NearestMode;
  Shape xs = {1, 2, 3, 5};
  std::vector<float> v = GridValues(Prod(xs), 12);
  for (Shape sizes : {Shape{1, 2, 7, 2}, Shape{1, 2, 1, 9}, Shape{1, 2, 6, 5}}) {
    for (C cm : {C::kHalfPixel, C::kAsymmetric, C::kAlignCorners, C::kPytorchHalfPixel}) {
      Tensor lin = T(v, xs).Resize(sizes, M::kLinear, cm);
      ASSERT_TRUE(lin.ok()) << lin.status();
      EXPECT_EQ(lin.shape(), sizes);
      Check(lin, RefResize(xs, Doubles(v), sizes, M::kLinear, cm, N::kFloor));
      for (N nm : {N::kRoundPreferFloor, N::kRoundPreferCeil, N::kFloor, N::kCeil}) {
        Tensor near = T(v, xs).Resize(sizes, M::kNearest, cm, nm);
        Check(near, RefResize(xs, Doubles(v), sizes, M::kNearest, cm, nm));
      }
    }
  }
}

TEST_P(PoolTest, ResizeDtypesAndErrors) {
  Tensor u = Tensor::FromVector<uint8_t>(e, {10, 20, 30}, {3}, dtypes::kUInt8, dev);
  Tensor n = u.Resize({6}, Tensor::ResizeMode::kNearest);
  EXPECT_EQ(n.dtype(), dtypes::kUInt8);
  Check(n, {10, 10, 20, 20, 30, 30});
  Tensor l = u.Resize({5}, Tensor::ResizeMode::kLinear, Tensor::CoordMode::kAlignCorners);
  EXPECT_EQ(l.dtype(), dtypes::kUInt8);
  Check(l, {10, 15, 20, 25, 30});
  // Infinities do not leak into neighbours (no 0 * inf).
  Tensor inf = T({1, INFINITY, 3}, {3}).Resize({6}, Tensor::ResizeMode::kNearest);
  Check(inf, {1, 1, INFINITY, INFINITY, 3, 3});
  EXPECT_EQ(T({1, 2}, {2}).Resize({0}, Tensor::ResizeMode::kLinear).numel(), 0);
  EXPECT_FALSE(T({1, 2}, {2}).Resize({2, 2}, Tensor::ResizeMode::kLinear).ok());
  EXPECT_FALSE(T({1, 2}, {2}).Resize({-1}, Tensor::ResizeMode::kLinear).ok());
}

INSTANTIATE_TEST_SUITE_P(Devices, PoolTest, ::testing::ValuesIn(TestDevices()), DeviceParamName);

}  // namespace
}  // namespace kiln

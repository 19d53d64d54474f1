// Elementwise ops (unary math, activations, rounding, binary ops with
// broadcasting, where, casts, dtypes) on CPU and INTERP against <cmath>
// references and hand-computed values.
#include <cmath>
#include <functional>

#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

const std::vector<float> kGeneral = {-10,   -3.7f, -2.5f, -1, -0.5f, -0.01f, 0,
                                     0.01f, 0.3f,  0.5f,  1,  2.5f,  3.7f,   10};
const std::vector<float> kPositive = {0.001f, 0.01f, 0.3f, 0.5f, 1, 2, 3.7f, 10, 1000};

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  const std::vector<float>* inputs;
  double atol = 1e-6, rtol = 1e-5;
};

double Erf(double x) { return std::erf(x); }
double HardSig(double x) { return std::clamp(x / 6 + 0.5, 0.0, 1.0); }

std::vector<UnaryCase> UnaryCases() {
  using T = const Tensor&;
  return {
      {"neg", [](T x) { return -x; }, [](double x) { return -x; }, &kGeneral},
      {"exp", [](T x) { return x.Exp(); }, [](double x) { return std::exp(x); }, &kGeneral},
      {"exp2", [](T x) { return x.Exp2(); }, [](double x) { return std::exp2(x); }, &kGeneral},
      {"log", [](T x) { return x.Log(); }, [](double x) { return std::log(x); }, &kPositive},
      {"log2", [](T x) { return x.Log2(); }, [](double x) { return std::log2(x); }, &kPositive},
      {"sqrt", [](T x) { return x.Sqrt(); }, [](double x) { return std::sqrt(x); }, &kPositive},
      {"rsqrt", [](T x) { return x.Rsqrt(); }, [](double x) { return 1 / std::sqrt(x); },
       &kPositive},
      {"sin", [](T x) { return x.Sin(); }, [](double x) { return std::sin(x); }, &kGeneral},
      {"cos", [](T x) { return x.Cos(); }, [](double x) { return std::cos(x); }, &kGeneral},
      {"tan", [](T x) { return x.Tan(); }, [](double x) { return std::tan(x); }, &kGeneral, 1e-5},
      {"tanh", [](T x) { return x.Tanh(); }, [](double x) { return std::tanh(x); }, &kGeneral},
      {"sigmoid", [](T x) { return x.Sigmoid(); }, [](double x) { return 1 / (1 + std::exp(-x)); },
       &kGeneral},
      {"relu", [](T x) { return x.Relu(); }, [](double x) { return x > 0 ? x : 0; }, &kGeneral},
      {"leaky_relu", [](T x) { return x.LeakyRelu(0.1); },
       [](double x) { return x > 0 ? x : 0.1 * x; }, &kGeneral},
      {"elu", [](T x) { return x.Elu(1.5); },
       [](double x) { return x > 0 ? x : 1.5 * (std::exp(x) - 1); }, &kGeneral},
      {"gelu", [](T x) { return x.Gelu(); },
       [](double x) { return 0.5 * x * (1 + Erf(x / std::sqrt(2.0))); }, &kGeneral},
      {"gelu_tanh", [](T x) { return x.GeluTanh(); },
       [](double x) {
         return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
       },
       &kGeneral},
      {"erf", [](T x) { return x.Erf(); }, Erf, &kGeneral, 3e-7},
      {"hardsigmoid", [](T x) { return x.HardSigmoid(); }, HardSig, &kGeneral},
      {"hardsigmoid_ab", [](T x) { return x.HardSigmoid(0.2, 0.4); },
       [](double x) { return std::clamp(0.2 * x + 0.4, 0.0, 1.0); }, &kGeneral},
      {"hardswish", [](T x) { return x.HardSwish(); }, [](double x) { return x * HardSig(x); },
       &kGeneral},
      {"softplus", [](T x) { return x.Softplus(); },
       [](double x) { return std::log1p(std::exp(x)); }, &kGeneral},
      {"abs", [](T x) { return x.Abs(); }, [](double x) { return std::abs(x); }, &kGeneral},
      {"sign", [](T x) { return x.Sign(); }, [](double x) { return (x > 0) - (x < 0); }, &kGeneral},
      {"floor", [](T x) { return x.Floor(); }, [](double x) { return std::floor(x); }, &kGeneral},
      {"ceil", [](T x) { return x.Ceil(); }, [](double x) { return std::ceil(x); }, &kGeneral},
      {"round", [](T x) { return x.Round(); }, [](double x) { return std::nearbyint(x); },
       &kGeneral},
      {"trunc", [](T x) { return x.Trunc(); }, [](double x) { return std::trunc(x); }, &kGeneral},
      {"reciprocal", [](T x) { return x.Reciprocal(); }, [](double x) { return 1 / x; },
       &kPositive},
      {"square", [](T x) { return x.Square(); }, [](double x) { return x * x; }, &kGeneral},
      {"clip", [](T x) { return x.Clip(-1.0, 2.0); },
       [](double x) { return std::clamp(x, -1.0, 2.0); }, &kGeneral},
      {"clip_lo", [](T x) { return x.Clip(0.4, std::nullopt); },
       [](double x) { return std::max(x, 0.4); }, &kGeneral},
      {"clip_hi", [](T x) { return x.Clip(std::nullopt, -0.2); },
       [](double x) { return std::min(x, -0.2); }, &kGeneral},
  };
}

class ElementwiseTest : public DeviceTest {
 protected:


  Tensor T(const std::vector<float>& v, Shape s) { return Tensor::FromFloats(e, v, s, dev); }
  Tensor T(const std::vector<float>& v) { return T(v, {static_cast<int64_t>(v.size())}); }
  template <typename V>
  Tensor Of(const std::vector<V>& v, DType dt) {
    return Tensor::FromVector(e, v, {static_cast<int64_t>(v.size())}, dt, dev);
  }
};

TEST_P(ElementwiseTest, UnaryMatchesCmath) {
  for (const UnaryCase& c : UnaryCases()) {
    Tensor r = c.op(T(*c.inputs, {static_cast<int64_t>(c.inputs->size())}));
    EXPECT_EQ(r.dtype(), dtypes::kFloat32) << c.name;
    std::vector<double> want;
    for (float x : *c.inputs) want.push_back(c.ref(x));
    Check(r, want, c.atol, c.rtol, c.name);
  }
}

TEST_P(ElementwiseTest, UnarySpecialValues) {
  Tensor s = T({-INFINITY, INFINITY, 0, -1});
  Check((s.Exp()), {0, INFINITY, 1, std::exp(-1.0)});
  Check((s.Log()), {NAN, INFINITY, -INFINITY, NAN});
  Check((s.Sqrt()), {NAN, INFINITY, 0, NAN});
  Check((s.Sigmoid()), {0, 1, 0.5, 1 / (1 + std::exp(1.0))});
  Check((s.Tanh()), {-1, 1, 0, std::tanh(-1.0)});
  Check((s.Relu()), {0, INFINITY, 0, 0});
  Check((T({0}).Reciprocal()), {INFINITY});
  // exp2 over the whole float range (16 lanes: the CPU's vector exp2), with
  // denormal results, overflow and NaN.
  std::vector<float> e2 = {-150, -149, -140.3f, -126.5f, -100.25f, -1.5f, 0,    0.5f,
                           1,    3,    10,      127.9f,  128,      200,    NAN, -INFINITY};
  std::vector<double> e2want;
  for (float x : e2) e2want.push_back(std::exp2(x));  // float: 2^128 is inf
  Check((T(e2).Exp2()), e2want, 1e-44, 3e-7);
  // 8 lanes (AVX-512 scales them like 16; other hosts build 2^n in halves).
  std::vector<float> e8 = {-149, -140.3f, -126.5f, 0.5f, 127.9f, 128, NAN, -INFINITY};
  std::vector<double> e8want;
  for (float x : e8) e8want.push_back(std::exp2(x));
  Check((T(e8).Exp2()), e8want, 1e-44, 3e-7);
  Check((T({-100, 100}).Softplus()), {0, 100}, 1e-6);
  // Round: ties to even.
  Check((T({-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3.5f, 2.4999f}).Round()),
        {-2, -2, -0.0, 0, 2, 2, 4, 2});
  Tensor n = T({NAN, INFINITY, -INFINITY, 1, 0});
  Check((n.IsNan()), {1, 0, 0, 0, 0});
  Check((n.IsInf()), {0, 1, 1, 0, 0});
  Check((n.IsInf(true, false)), {0, 1, 0, 0, 0});
  Check((n.IsInf(false, true)), {0, 0, 1, 0, 0});
  EXPECT_EQ(n.IsNan().dtype(), dtypes::kBool);
  Check((Of<int32_t>({1, 2}, dtypes::kInt32).IsNan()), {0, 0});
}

// Erf (a rational function on [-4, 4], then +-1) on a fine grid through
// and past the clamps, and its special values: within 5e-7 of std::erf,
// never past +-1, NaN kept.
TEST_P(ElementwiseTest, ErfOnAFineGrid) {
  std::vector<float> x;
  for (int i = -6000; i <= 6000; i += 7) x.push_back(static_cast<float>(i) / 1000);
  std::vector<double> want;
  for (float v : x) want.push_back(std::erf(v));
  Tensor r = T(x).Erf();
  Check(r, want, 5e-7, 0);
  Check(r.Abs().Max({0}), {1.0}, 0, 0);
  Check(T({-INFINITY, INFINITY, NAN, -0.0f, 4.0f, -4.0f}).Erf(),
        {-1, 1, NAN, 0, std::erf(4.0f), std::erf(-4.0f)}, 1e-7, 0);
}

// a * b + c is one fused multiply-add in the kernel (engine/codegen/
// float_rules.h): (1 + 2^-13)(1 - 2^-13) - 1 is -2^-26 with one rounding,
// 0 with two. A division by a constant is a multiply by its reciprocal
// (within 1 ulp); by 0 it stays a division.
TEST_P(ElementwiseTest, MultiplyAddRoundsOnceAndConstantDivisors) {
  const float e = std::ldexp(1.0f, -13);
  Tensor a = T({1 + e, 3, -2}), b = T({1 - e, 0.5f, 4});
  Check(a * b + T({-1, 1, 1}), {-std::ldexp(1.0, -26), 2.5, -7}, 0, 0);
  Check(a * b - 1.0, {-std::ldexp(1.0, -26), 0.5, -9}, 0, 0);
  Check(T({1, 1, 1}) - a * b, {std::ldexp(1.0, -26), -0.5, 9}, 0, 0);
  Tensor x = T({1, -7, 1e-30f, 0, INFINITY});
  const double tiny = 1e-30f;
  Check(x / 3.0, {1 / 3.0, -7 / 3.0, tiny / 3, 0, INFINITY}, 0, 2.4e-7);
  Check(x / 0.0, {INFINITY, -INFINITY, INFINITY, NAN, INFINITY}, 0, 0);
}

TEST_P(ElementwiseTest, UnaryOnIntegers) {
  Tensor i = Of<int32_t>({-7, -1, 0, 4, 9}, dtypes::kInt32);
  EXPECT_EQ(i.Sqrt().dtype(), dtypes::kFloat32);
  Check((i.Abs().Sqrt()), {std::sqrt(7.0), 1, 0, 2, 3});
  Check((i.Exp()), {std::exp(-7.0), std::exp(-1.0), 1, std::exp(4.0), std::exp(9.0)}, 1e-6, 1e-5);
  EXPECT_EQ(i.Abs().dtype(), dtypes::kInt32);
  Check((i.Abs()), {7, 1, 0, 4, 9});
  Check((i.Sign()), {-1, -1, 0, 1, 1});
  Check((i.Neg()), {7, 1, 0, -4, -9});
  Check((i.Floor()), {-7, -1, 0, 4, 9});
  Check((i.Relu()), {0, 0, 0, 4, 9});
  Check((i.Clip(-2.0, 5.0)), {-2, -1, 0, 4, 5});
  Check((i.Sigmoid()), {1 / (1 + std::exp(7.0)), 1 / (1 + std::exp(1.0)), 0.5,
                        1 / (1 + std::exp(-4.0)), 1 / (1 + std::exp(-9.0))});
  Tensor u = Of<uint8_t>({0, 5, 255}, dtypes::kUInt8);
  Check((u.Abs()), {0, 5, 255});
  Check((u.BitwiseNot()), {255, 250, 0});
  Check((i.BitwiseNot()), {6, 0, -1, -5, -10});
  Tensor b = T({0, 2, -0.5f, NAN}).Cast(dtypes::kBool);
  Check(b, {0, 1, 1, 1});
  Check((b.LogicalNot()), {1, 0, 0, 0});
  Check((b.BitwiseNot()), {1, 0, 0, 0});
  Check((T({0, 3}).LogicalNot()), {1, 0});
}

// Naive numpy broadcasting of two shapes for binary reference values.
std::vector<double> Broadcast2(const std::vector<float>& a, const Shape& as,
                               const std::vector<float>& b, const Shape& bs, const Shape& out,
                               const std::function<double(double, double)>& f) {
  std::vector<double> r;
  int64_t n = Prod(out);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t rem = flat, ia = 0, ib = 0, sa = 1, sb = 1;
    for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
      int64_t i = rem % out[d];
      rem /= out[d];
      int da = d - static_cast<int>(out.size() - as.size());
      int db = d - static_cast<int>(out.size() - bs.size());
      if (da >= 0) ia += (as[da] == 1 ? 0 : i) * sa, sa *= as[da];
      if (db >= 0) ib += (bs[db] == 1 ? 0 : i) * sb, sb *= bs[db];
    }
    r.push_back(f(a[ia], b[ib]));
  }
  return r;
}

TEST_P(ElementwiseTest, BinaryBroadcasting) {
  Shape as = {2, 1, 3}, bs = {4, 1}, out = {2, 4, 3};
  std::vector<float> a = {1, -2, 3.5f, 0.25f, 5, -6}, b = {2, -0.5f, 4, 1.5f};
  Tensor ta = T(a, as), tb = T(b, bs);
  using F = std::function<double(double, double)>;
  std::vector<std::pair<Tensor, F>> cases = {
      {ta + tb, [](double x, double y) { return x + y; }},
      {ta - tb, [](double x, double y) { return x - y; }},
      {ta * tb, [](double x, double y) { return x * y; }},
      {ta / tb, [](double x, double y) { return x / y; }},
      {ta.Maximum(tb), [](double x, double y) { return std::max(x, y); }},
      {ta.Minimum(tb), [](double x, double y) { return std::min(x, y); }},
      {ta.Lt(tb), [](double x, double y) { return x < y; }},
      {ta.Le(tb), [](double x, double y) { return x <= y; }},
      {ta.Gt(tb), [](double x, double y) { return x > y; }},
      {ta.Ge(tb), [](double x, double y) { return x >= y; }},
      {ta.Eq(tb * 0.5), [](double x, double y) { return x == y * 0.5; }},
      {ta.Ne(tb * 0.5), [](double x, double y) { return x != y * 0.5; }},
      {ta.Pow(tb.Abs()), [](double x, double y) { return std::pow(x, std::abs(y)); }},
  };
  for (auto& [t, f] : cases) {
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t.shape(), out);
    Check(t, Broadcast2(a, as, b, bs, out, f));
  }
  EXPECT_EQ(ta.Lt(tb).dtype(), dtypes::kBool);
  Tensor bad = T({1, 2, 3}).Add(T({1, 2}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(3)"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("(2)"), std::string::npos) << bad.status();
  EXPECT_FALSE((bad * 2.0).ok());  // errors propagate
  Check((T({1, 2}) * 3.0 + 1.0), {4, 7});
}

TEST_P(ElementwiseTest, DivisionVariants) {
  Tensor a = Of<int32_t>({-7, 7, -7, 7, 6, -6, 0}, dtypes::kInt32);
  Tensor b = Of<int32_t>({2, -2, -2, 2, -3, 3, 5}, dtypes::kInt32);
  Check(a / b, {-3, -3, 3, 3, -2, -2, 0});
  Check((a.FloorDiv(b)), {-4, -4, 3, 3, -2, -2, 0});
  Check((a.Mod(b)), {1, -1, -1, 1, 0, 0, 0});
  Check((a.Fmod(b)), {-1, 1, -1, 1, 0, 0, 0});
  EXPECT_EQ(a.Mod(b).dtype(), dtypes::kInt32);
  Tensor x = T({-7.5f, 7.5f, -7.5f, 7.5f, 1});
  Tensor y = T({2, -2, -2, 2, 0.3f});
  Check(x / y, {-3.75, -3.75, 3.75, 3.75, 1 / 0.3});
  Check((x.FloorDiv(y)), {-4, -4, 3, 3, 3});
  Check((x.Mod(y)), {0.5, -0.5, -1.5, 1.5, std::fmod(1.0f, 0.3f)}, 1e-5);
  Check((x.Fmod(y)), {-1.5, 1.5, -1.5, 1.5, std::fmod(1.0f, 0.3f)}, 1e-5);
  Tensor u = Of<uint8_t>({7, 200}, dtypes::kUInt8), v = Of<uint8_t>({2, 7}, dtypes::kUInt8);
  Check((u.FloorDiv(v)), {3, 28});
  Check((u.Mod(v)), {1, 4});
}

TEST_P(ElementwiseTest, PowVariants) {
  Tensor i = Of<int32_t>({3, -2, 2, 5, 0, 7}, dtypes::kInt32);
  Tensor p = Of<int32_t>({4, 3, 10, 0, 0, 1}, dtypes::kInt32);
  Tensor r = i.Pow(p);
  EXPECT_EQ(r.dtype(), dtypes::kInt32);
  Check(r, {81, -8, 1024, 1, 1, 7});
  Tensor big = Of<int64_t>({3}, dtypes::kInt64).Pow(Of<int64_t>({30}, dtypes::kInt64));
  auto bv = big.ToVector<int64_t>();
  ASSERT_TRUE(bv.ok());
  EXPECT_EQ((*bv)[0], 205891132094649LL);
  Tensor f = T({2, -2, 0, 4, -8, 9});
  Check((f.Pow(T({0.5f, 3, 0, -0.5f, 1.0f / 3, 0}))), {std::sqrt(2.0), -8, 1, 0.5, NAN, 1});
  Check((T({2, 3}).Pow(Of<int32_t>({2, 3}, dtypes::kInt32))), {4, 27});
}

TEST_P(ElementwiseTest, LogicalAndBitwise) {
  Tensor a = T({0, 1, 0, 2.5f}), b = T({0, 0, -1, 3});
  Check((a.LogicalAnd(b)), {0, 0, 0, 1});
  Check((a.LogicalOr(b)), {0, 1, 1, 1});
  Check((a.LogicalXor(b)), {0, 1, 1, 0});
  EXPECT_EQ(a.LogicalAnd(b).dtype(), dtypes::kBool);
  Tensor x = Of<int32_t>({12, -1, 5, 0x0f0f}, dtypes::kInt32);
  Tensor y = Of<int32_t>({10, 7, 1, 0x00ff}, dtypes::kInt32);
  Check((x.BitwiseAnd(y)), {8, 7, 1, 0x000f});
  Check((x.BitwiseOr(y)), {14, -1, 5, 0x0fff});
  Check((x.BitwiseXor(y)), {6, -8, 4, 0x0ff0});
  Tensor s = Of<int32_t>({1, 3, 0, 4}, dtypes::kInt32);
  Check((x.ShiftLeft(s)), {24, -8, 5, 0xf0f0});
  Check((Of<int32_t>({12, 256, 5, 1024}, dtypes::kInt32).ShiftRight(s)), {6, 32, 5, 64});
  Tensor u = Of<uint8_t>({0xf0, 0x81}, dtypes::kUInt8);
  Check((u.ShiftLeft(Of<uint8_t>({1, 1}, dtypes::kUInt8))), {0xe0, 0x02});
  Check((u.ShiftRight(Of<uint8_t>({4, 7}, dtypes::kUInt8))), {0x0f, 0x01});
  Check((u.BitwiseXor(Of<uint8_t>({0xff, 0x01}, dtypes::kUInt8))), {0x0f, 0x80});
  // Float operands are an error with a message, not a kernel the device
  // compiler refuses.
  for (Tensor bad : {a.BitwiseAnd(b), a.BitwiseOr(x), x.BitwiseXor(a), a.ShiftLeft(s),
                     s.ShiftRight(a), a.BitwiseNot()}) {
    EXPECT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("needs integer or bool operands"), std::string::npos)
        << bad.status();
  }
}

TEST_P(ElementwiseTest, Where) {
  Tensor c = T({1, 0, 1}, {3, 1});
  Tensor a = T({1, 2, 3, 4}, {1, 4});
  Tensor r = Tensor::Where(c, a, T({-1}, {}));
  EXPECT_EQ(r.shape(), (Shape{3, 4}));
  Check(r, {1, 2, 3, 4, -1, -1, -1, -1, 1, 2, 3, 4});
  // Mixed dtypes promote; NaN in the unselected branch does not leak.
  Tensor m = Tensor::Where(T({0, 1}), Of<int32_t>({5, 6}, dtypes::kInt32), T({NAN, 0.5f}));
  EXPECT_EQ(m.dtype(), dtypes::kFloat32);
  Check(m, {NAN, 6});
  Check((Tensor::Where(T({0, 1}), T({NAN, 1}), T({2, NAN}))), {2, 1});
  EXPECT_FALSE(Tensor::Where(T({1, 0}), T({1, 2, 3}), T({1})).ok());
}

TEST_P(ElementwiseTest, Casts) {
  Tensor f = T({-2.7f, -0.5f, 0, 0.9f, 2.7f, 200.9f});
  Check((f.Cast(dtypes::kInt32)), {-2, 0, 0, 0, 2, 200});
  Check((f.Cast(dtypes::kInt64)), {-2, 0, 0, 0, 2, 200});
  Check((f.Abs().Cast(dtypes::kUInt8)), {2, 0, 0, 0, 2, 200});
  Check((f.Cast(dtypes::kBool)), {1, 1, 0, 1, 1, 1});
  Check((f.Cast(dtypes::kBool).Cast(dtypes::kFloat32)), {1, 1, 0, 1, 1, 1});
  Check((f.Cast(dtypes::kBool).Cast(dtypes::kInt32)), {1, 1, 0, 1, 1, 1});
  Tensor i = Of<int32_t>({-3, 0, 16777217, 7}, dtypes::kInt32);
  Check((i.Cast(dtypes::kFloat32)), {-3, 0, 16777216, 7});
  Check((i.Cast(dtypes::kFloat64)), {-3, 0, 16777217, 7});
  Check((i.Cast(dtypes::kBool)), {1, 0, 1, 1});
  Tensor l = Of<int64_t>({(1LL << 32) + 5, -1}, dtypes::kInt64);
  Check((l.Cast(dtypes::kInt32)), {5, -1});
  Check((Of<int32_t>({300, -1}, dtypes::kInt32).Cast(dtypes::kUInt8)), {44, 255});
  // float16: 10-bit mantissa, round to nearest even, overflow to inf.
  double u = std::ldexp(1.0, -11);
  Tensor h = T({1 + static_cast<float>(u), 1 + static_cast<float>(3 * u), 65504, 65520, 1e-8f,
                -2.5f, 0.1f})
                 .Cast(dtypes::kFloat16);
  EXPECT_EQ(h.dtype(), dtypes::kFloat16);
  Check(h, {1, 1 + 4 * u, 65504, INFINITY, 0, -2.5, 0.0999755859375}, 0, 0);
  // bfloat16: 7-bit mantissa.
  double w = std::ldexp(1.0, -8);
  Tensor bf = T({1 + static_cast<float>(w), 1 + static_cast<float>(3 * w), 3.14159f, -1e30f})
                  .Cast(dtypes::kBFloat16);
  Check(bf, {1, 1 + 4 * w, 3.140625, BFloat16ToFloat(FloatToBFloat16(-1e30f))}, 0, 0);
  // float16 -> bfloat16 rounds again (65504 -> 65536, 0.09997... -> 0.10009...).
  Check((h.Cast(dtypes::kBFloat16)), {1, 1, 65536, INFINITY, 0, -2.5, 0.10009765625}, 0, 0);
  Check((T({1.5f, -2.25f}).Cast(dtypes::kFloat16).Cast(dtypes::kInt32)), {1, -2});
  // Bitcast float32 <-> int32.
  Check((T({1.0f}).Bitcast(dtypes::kInt32)), {0x3f800000});
  EXPECT_FALSE(T({1.0f}).Bitcast(dtypes::kInt64).ok());
}

// Representative ops across dtypes (values exact in every type).
TEST_P(ElementwiseTest, DtypeMatrix) {
  const std::vector<float> a = {1, 0, 3, 2, 5, 4}, b = {2, 0, 1, 2, 3, 6};
  for (DType dt : {dtypes::kFloat16, dtypes::kBFloat16, dtypes::kInt32, dtypes::kInt64,
                   dtypes::kUInt8, dtypes::kFloat64}) {
    Tensor x = T(a, {2, 3}).Cast(dt), y = T(b, {2, 3}).Cast(dt);
    Tensor row = T({1, 2, 3}, {3}).Cast(dt);
    EXPECT_EQ((x + y).dtype(), dt) << dt.Name();
    EXPECT_EQ(x.Sum().dtype(), dt) << dt.Name();
    Check(x + y, {3, 0, 4, 4, 8, 10}, 1e-5, 1e-4, dt.Name());
    Check(x * row, {1, 0, 9, 2, 10, 12}, 1e-5, 1e-4, dt.Name());
    Check(x.Maximum(y), {2, 0, 3, 2, 5, 6}, 1e-5, 1e-4, dt.Name());
    Check(x.Minimum(y), {1, 0, 1, 2, 3, 4}, 1e-5, 1e-4, dt.Name());
    Check(x.Lt(y), {1, 0, 0, 0, 0, 1}, 1e-5, 1e-4, dt.Name());
    Check(x.Eq(y), {0, 1, 0, 1, 0, 0}, 1e-5, 1e-4, dt.Name());
    Check(x.Ge(y), {0, 1, 1, 1, 1, 0}, 1e-5, 1e-4, dt.Name());
    Check(Tensor::Where(x.Gt(y), x, y), {2, 0, 3, 2, 5, 6}, 1e-5, 1e-4, dt.Name());
    Check(x.Sum(), {15}, 1e-5, 1e-4, dt.Name());
    Check(x.Sum({1}), {4, 11}, 1e-5, 1e-4, dt.Name());
    Check(x.Max({0}), {2, 5, 4}, 1e-5, 1e-4, dt.Name());
    Check(x.Cast(dtypes::kFloat32), {1, 0, 3, 2, 5, 4}, 1e-5, 1e-4, dt.Name());
  }
  // bool: + is or, * is and, sum counts.
  Tensor p = T({1, 1, 0, 0}).Cast(dtypes::kBool), q = T({1, 0, 1, 0}).Cast(dtypes::kBool);
  EXPECT_EQ((p + q).dtype(), dtypes::kBool);
  Check(p + q, {1, 1, 1, 0});
  Check(p * q, {1, 0, 0, 0});
  Check((p.Maximum(q)), {1, 1, 1, 0});
  Check((p.Eq(q)), {1, 0, 0, 1});
  Check((p.Sum()), {2});
  Check((p.Max()), {1});
  Check((p.Min()), {0});
  Check((Tensor::Where(p, q, q.LogicalNot())), {1, 0, 0, 1});
  // Integer wrap-around and large int64 values.
  Tensor u = Of<uint8_t>({200, 255}, dtypes::kUInt8);
  Check((u + Of<uint8_t>({100, 1}, dtypes::kUInt8)), {44, 0});
  Tensor big = Of<int64_t>({(1LL << 40) + 1, -(1LL << 41)}, dtypes::kInt64);
  auto bv = (big * big.Const(int64_t{3}, dtypes::kInt64)).ToVector<int64_t>();
  ASSERT_TRUE(bv.ok());
  EXPECT_EQ(*bv, (std::vector<int64_t>{3 * ((1LL << 40) + 1), -3 * (1LL << 41)}));
  // Mixed-type promotion.
  EXPECT_EQ((Of<int32_t>({1}, dtypes::kInt32) + T({0.5f})).dtype(), dtypes::kFloat32);
  EXPECT_EQ((Of<uint8_t>({1}, dtypes::kUInt8) + Of<int8_t>({1}, dtypes::kInt8)).dtype(),
            dtypes::kInt16);
  EXPECT_EQ((T({1}).Cast(dtypes::kFloat16) + T({1}).Cast(dtypes::kBFloat16)).dtype(),
            dtypes::kFloat32);
  Check((T({1.5f}).Cast(dtypes::kFloat16) * T({2}).Cast(dtypes::kFloat16)), {3});
}

INSTANTIATE_TEST_SUITE_P(Devices, ElementwiseTest, ::testing::ValuesIn(TestDevices()),
                         DeviceParamName);

}  // namespace
}  // namespace kiln

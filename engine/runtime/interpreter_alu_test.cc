// Every ALU op and cast of the interpreter on int32, uint8, float32 and
// float16 (plus a few on other types), against hand-computed results.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/dtype.h"
#include "engine/runtime/interpreter.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A host array of `t` elements.
struct Arr {
  DType t;
  size_t n = 0;
  std::vector<unsigned char> bytes;
};

void Put(Arr& a, size_t i, int64_t iv, double fv) {
  unsigned char* p = a.bytes.data() + i * a.t.ScalarSize();
  switch (a.t.scalar) {
    case ScalarType::kFloat16: { uint16_t h = FloatToHalf(static_cast<float>(fv)); std::memcpy(p, &h, 2); break; }
    case ScalarType::kBFloat16: { uint16_t h = FloatToBFloat16(static_cast<float>(fv)); std::memcpy(p, &h, 2); break; }
    case ScalarType::kFloat32: { float f = static_cast<float>(fv); std::memcpy(p, &f, 4); break; }
    case ScalarType::kFloat64: std::memcpy(p, &fv, 8); break;
    default: std::memcpy(p, &iv, a.t.ScalarSize()); break;  // little-endian truncation
  }
}

Arr Ints(DType t, const std::vector<int64_t>& v) {
  Arr a{t, v.size(), std::vector<unsigned char>(v.size() * t.ScalarSize())};
  for (size_t i = 0; i < v.size(); ++i) Put(a, i, v[i], 0);
  return a;
}

Arr Floats(DType t, const std::vector<double>& v) {
  Arr a{t, v.size(), std::vector<unsigned char>(v.size() * t.ScalarSize())};
  for (size_t i = 0; i < v.size(); ++i) Put(a, i, 0, v[i]);
  return a;
}

std::vector<int64_t> AsInts(const Arr& a) {
  std::vector<int64_t> r;
  for (size_t i = 0; i < a.n; ++i) {
    const unsigned char* p = a.bytes.data() + i * a.t.ScalarSize();
    switch (a.t.scalar) {
      case ScalarType::kBool: r.push_back(p[0]); break;
      case ScalarType::kInt8: r.push_back(static_cast<int8_t>(p[0])); break;
      case ScalarType::kUInt8: r.push_back(p[0]); break;
      case ScalarType::kInt32: { int32_t v; std::memcpy(&v, p, 4); r.push_back(v); break; }
      case ScalarType::kUInt32: { uint32_t v; std::memcpy(&v, p, 4); r.push_back(v); break; }
      default: { int64_t v; std::memcpy(&v, p, 8); r.push_back(v); break; }
    }
  }
  return r;
}

std::vector<double> AsFloats(const Arr& a) {
  std::vector<double> r;
  for (size_t i = 0; i < a.n; ++i) {
    const unsigned char* p = a.bytes.data() + i * a.t.ScalarSize();
    uint16_t h;
    std::memcpy(&h, p, 2);
    switch (a.t.scalar) {
      case ScalarType::kFloat16: r.push_back(HalfToFloat(h)); break;
      case ScalarType::kBFloat16: r.push_back(BFloat16ToFloat(h)); break;
      case ScalarType::kFloat32: { float f; std::memcpy(&f, p, 4); r.push_back(f); break; }
      default: { double d; std::memcpy(&d, p, 8); r.push_back(d); break; }
    }
  }
  return r;
}

// Runs out[i] = OP(in0[i], in1[i], ...) through the interpreter.
Arr RunOp(const std::string& op, DType out_t, const std::vector<Arr>& ins,
          const std::string& arg = "") {
  const size_t n = ins[0].n;
  std::vector<std::string> lines = {"kernel alu", absl::StrCat("%0 = DEFINE_GLOBAL ", out_t.Name(), "* () 0")};
  for (size_t i = 0; i < ins.size(); ++i) {
    lines.push_back(absl::StrCat("%", i + 1, " = DEFINE_GLOBAL ", ins[i].t.Name(), "* () ", i + 1));
  }
  lines.push_back("%10 = CONST int32 () 0");
  lines.push_back(absl::StrCat("%11 = CONST int32 () ", n));
  lines.push_back("%12 = RANGE int32 (%10, %11) 0 parallel");
  std::vector<std::string> srcs;
  for (size_t i = 0; i < ins.size(); ++i) {
    lines.push_back(absl::StrCat("%", 20 + i, " = LOAD ", ins[i].t.Name(), " (%", i + 1, ", %12)"));
    srcs.push_back(absl::StrCat("%", 20 + i));
  }
  lines.push_back(absl::StrCat("%30 = ", op, " ", out_t.Name(), " (", absl::StrJoin(srcs, ", "),
                               ") ", arg));
  lines.push_back("%31 = STORE void (%0, %12, %30)");
  lines.push_back("%32 = ENDRANGE void (%12)");
  lines.push_back("end");
  const std::string text = absl::StrJoin(lines, "\n");

  Arr out{out_t, n, std::vector<unsigned char>(n * out_t.ScalarSize() + 1)};
  std::vector<void*> bufs = {out.bytes.data()};
  std::vector<size_t> nbytes = {n * out_t.ScalarSize()};
  std::vector<Arr> copies = ins;
  for (Arr& a : copies) {
    bufs.push_back(a.bytes.data());
    nbytes.push_back(a.bytes.size());
  }
  InterpreterDevice dev;
  absl::StatusOr<std::string> bin = dev.compiler().Compile(text);
  EXPECT_TRUE(bin.ok()) << bin.status() << "\n" << text;
  if (!bin.ok()) return out;
  auto prog = dev.LoadProgram("alu", *bin);
  EXPECT_TRUE(prog.ok()) << prog.status();
  LaunchDims dims;
  dims.global[0] = static_cast<int64_t>(n);
  absl::Status s = (*prog)->LaunchChecked(bufs, nbytes, {}, dims);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

void ExpectFloatsEq(const std::vector<double>& got, const std::vector<double>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    bool same = (std::isnan(got[i]) && std::isnan(want[i])) ||
                (got[i] == want[i] && std::signbit(got[i]) == std::signbit(want[i]));
    EXPECT_TRUE(same) << what << " lane " << i << ": got " << got[i] << ", want " << want[i];
  }
}

using I = std::vector<int64_t>;
using F = std::vector<double>;
const DType i32 = dtypes::kInt32, u8 = dtypes::kUInt8, f32 = dtypes::kFloat32,
            f16 = dtypes::kFloat16, b = dtypes::kBool;

I Int2(const std::string& op, DType t, const I& x, const I& y, DType out = dtypes::kVoid) {
  return AsInts(RunOp(op, out.IsVoid() ? t : out, {Ints(t, x), Ints(t, y)}));
}
F Flt2(const std::string& op, DType t, const F& x, const F& y) {
  return AsFloats(RunOp(op, t, {Floats(t, x), Floats(t, y)}));
}
F Flt1(const std::string& op, DType t, const F& x) { return AsFloats(RunOp(op, t, {Floats(t, x)})); }

TEST(InterpreterAluTest, Int32) {
  const int64_t kMin = INT32_MIN, kMax = INT32_MAX;
  EXPECT_EQ(Int2("ADD", i32, {1, kMax, -5}, {2, 1, -7}), (I{3, kMin, -12}));
  EXPECT_EQ(Int2("SUB", i32, {0, kMin}, {1, 1}), (I{-1, kMax}));
  EXPECT_EQ(Int2("MUL", i32, {65536, -3, 46341}, {65536, 7, 46341}), (I{0, -21, -2147479015}));
  EXPECT_EQ(Int2("IDIV", i32, {7, -7, 7, -7, 5, kMin, 0}, {2, 2, -2, -2, 0, -1, 3}),
            (I{3, -3, -3, 3, 0, kMin, 0}));
  EXPECT_EQ(Int2("MOD", i32, {7, -7, 7, -7, 5, kMin}, {2, 2, -2, -2, 0, -1}),
            (I{1, -1, 1, -1, 0, 0}));
  EXPECT_EQ(Int2("MAX", i32, {1, -5, kMin}, {2, -9, kMax}), (I{2, -5, kMax}));
  EXPECT_EQ(Int2("CMPLT", i32, {1, 2, -3}, {2, 2, 3}, b), (I{1, 0, 1}));
  EXPECT_EQ(Int2("CMPNE", i32, {1, 2}, {2, 2}, b), (I{1, 0}));
  EXPECT_EQ(Int2("CMPEQ", i32, {1, 2}, {2, 2}, b), (I{0, 1}));
  EXPECT_EQ(Int2("AND", i32, {12, -1}, {10, 5}), (I{8, 5}));
  EXPECT_EQ(Int2("OR", i32, {12, -1}, {10, 5}), (I{14, -1}));
  EXPECT_EQ(Int2("XOR", i32, {12, -1}, {10, 5}), (I{6, -6}));
  EXPECT_EQ(Int2("SHL", i32, {1, 1, -1, 3}, {4, 31, 1, 32}), (I{16, kMin, -2, 0}));
  EXPECT_EQ(Int2("SHR", i32, {256, -256, -1, 5, -5}, {4, 4, 31, 40, 40}), (I{16, -16, -1, 0, -1}));
  EXPECT_EQ(AsInts(RunOp("NEG", i32, {Ints(i32, {5, kMin, 0})})), (I{-5, kMin, 0}));
  EXPECT_EQ(AsInts(RunOp("TRUNC", i32, {Ints(i32, {5, -7})})), (I{5, -7}));
  EXPECT_EQ(AsInts(RunOp("MULACC", i32, {Ints(i32, {3, 65536}), Ints(i32, {4, 65536}),
                                         Ints(i32, {5, 1})})),
            (I{17, 1}));
  EXPECT_EQ(AsInts(RunOp("WHERE", i32, {Ints(b, {1, 0}), Ints(i32, {1, 2}), Ints(i32, {3, 4})})),
            (I{1, 4}));
}

TEST(InterpreterAluTest, UInt8) {
  EXPECT_EQ(Int2("ADD", u8, {200, 1}, {100, 2}), (I{44, 3}));
  EXPECT_EQ(Int2("SUB", u8, {1, 0}, {2, 255}), (I{255, 1}));
  EXPECT_EQ(Int2("MUL", u8, {16, 3}, {16, 5}), (I{0, 15}));
  EXPECT_EQ(Int2("IDIV", u8, {200, 7}, {3, 0}), (I{66, 0}));
  EXPECT_EQ(Int2("MOD", u8, {200, 7}, {3, 0}), (I{2, 0}));
  EXPECT_EQ(Int2("MAX", u8, {200, 3}, {100, 250}), (I{200, 250}));
  EXPECT_EQ(Int2("CMPLT", u8, {200, 3}, {100, 250}, b), (I{0, 1}));
  EXPECT_EQ(Int2("CMPNE", u8, {200, 3}, {200, 250}, b), (I{0, 1}));
  EXPECT_EQ(Int2("CMPEQ", u8, {200, 3}, {200, 250}, b), (I{1, 0}));
  EXPECT_EQ(Int2("AND", u8, {0xF0, 0x0F}, {0x3C, 0xFF}), (I{0x30, 0x0F}));
  EXPECT_EQ(Int2("OR", u8, {0xF0, 0x0F}, {0x3C, 0xFF}), (I{0xFC, 0xFF}));
  EXPECT_EQ(Int2("XOR", u8, {0xF0, 0x0F}, {0x3C, 0xFF}), (I{0xCC, 0xF0}));
  EXPECT_EQ(Int2("SHL", u8, {0x81, 1}, {1, 7}), (I{0x02, 0x80}));
  EXPECT_EQ(Int2("SHR", u8, {0x80, 0xFF, 0xFF}, {7, 4, 8}), (I{1, 0x0F, 0}));
  EXPECT_EQ(AsInts(RunOp("NEG", u8, {Ints(u8, {1, 0, 128})})), (I{255, 0, 128}));
  EXPECT_EQ(AsInts(RunOp("MULACC", u8, {Ints(u8, {16}), Ints(u8, {16}), Ints(u8, {7})})), (I{7}));
}

TEST(InterpreterAluTest, Float32) {
  const float third = 1.0f / 3.0f;
  ExpectFloatsEq(Flt2("ADD", f32, {1, 16777216, 0.1f}, {2, 1, 0.2f}),
                 {3, 16777216, 0.1f + 0.2f}, "ADD");
  ExpectFloatsEq(Flt2("SUB", f32, {1, 1e-8}, {3, 1}), {-2, 1e-8f - 1.0f}, "SUB");
  ExpectFloatsEq(Flt2("MUL", f32, {1.1f, 1e30, -2}, {1.1f, 1e30, 0}),
                 {1.1f * 1.1f, kInf, -0.0}, "MUL");
  ExpectFloatsEq(Flt2("FDIV", f32, {1, 1, -1, 0}, {3, 0, 0, 0}), {third, kInf, -kInf, kNaN},
                 "FDIV");
  ExpectFloatsEq(Flt2("MOD", f32, {5.5, -5.5}, {2, 2}), {1.5, -1.5}, "MOD");
  ExpectFloatsEq(Flt2("IDIV", f32, {7, -7}, {2, 2}), {3, -3}, "IDIV");
  ExpectFloatsEq(Flt2("MAX", f32, {1, kNaN, 2, -0.0}, {2, 1, kNaN, 0.0}), {2, 1, kNaN, 0.0},
                 "MAX");
  ExpectFloatsEq(Flt2("POW", f32, {2, 9, -8}, {10, 0.5, 1.0 / 3}), {1024, 3, kNaN}, "POW");
  EXPECT_EQ(AsInts(RunOp("CMPLT", b, {Floats(f32, {1, kNaN, 2}), Floats(f32, {2, 1, 2})})),
            (I{1, 0, 0}));
  EXPECT_EQ(AsInts(RunOp("CMPNE", b, {Floats(f32, {kNaN, 1}), Floats(f32, {kNaN, 1})})),
            (I{1, 0}));
  EXPECT_EQ(AsInts(RunOp("CMPEQ", b, {Floats(f32, {kNaN, 1}), Floats(f32, {kNaN, 1})})),
            (I{0, 1}));
  ExpectFloatsEq(Flt1("NEG", f32, {1.5, 0.0}), {-1.5, -0.0}, "NEG");
  ExpectFloatsEq(Flt1("EXP2", f32, {3, -1, 0.5, 200}), {8, 0.5, static_cast<float>(M_SQRT2), kInf},
                 "EXP2");
  ExpectFloatsEq(Flt1("LOG2", f32, {8, 1, 0, -1}), {3, 0, -kInf, kNaN}, "LOG2");
  ExpectFloatsEq(Flt1("SIN", f32, {0, static_cast<float>(M_PI / 2)}), {0, 1}, "SIN");
  ExpectFloatsEq(Flt1("SQRT", f32, {4, 2, -1}), {2, std::sqrt(2.0f), kNaN}, "SQRT");
  ExpectFloatsEq(Flt1("RECIP", f32, {4, 0, 3}), {0.25, kInf, third}, "RECIP");
  ExpectFloatsEq(Flt1("TRUNC", f32, {2.7, -2.7, 1e10}), {2, -2, 1e10f}, "TRUNC");
  // MULACC is a fused multiply-add, rounded once as the renderers' fma():
  // (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24 (with the product rounded first, the
  // 2^-24 would be lost: 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11).
  const double a = 1 + std::ldexp(1.0, -12);
  ExpectFloatsEq(AsFloats(RunOp("MULACC", f32, {Floats(f32, {a, 2}), Floats(f32, {a, 3}),
                                                Floats(f32, {-1, 1})})),
                 {std::ldexp(1.0, -11) + std::ldexp(1.0, -24), 7}, "MULACC");
  ExpectFloatsEq(AsFloats(RunOp("WHERE", f32, {Ints(b, {1, 0}), Floats(f32, {1, 2}),
                                               Floats(f32, {3, 4})})),
                 {1, 4}, "WHERE");
}

TEST(InterpreterAluTest, Float16) {
  // 2048 + 1 = 2049 is a tie between 2048 and 2050: even wins.
  // 65504 + 8 stays below the overflow tie (65520), 65504 + 16 reaches it.
  ExpectFloatsEq(Flt2("ADD", f16, {2048, 0.1, 65504}, {1, 0.2, 8}),
                 {2048, 0.2998046875, 65504}, "ADD");
  ExpectFloatsEq(Flt2("ADD", f16, {65504}, {16}), {kInf}, "ADD overflow");
  // 2050 + 3 = 2053: tie between 2052 (even) and 2054.
  ExpectFloatsEq(Flt2("SUB", f16, {1, 2050}, {0.25, -3}), {0.75, 2052}, "SUB");
  // 1.099609375^2 = 1.20914... -> 1238 * 2^-10.
  ExpectFloatsEq(Flt2("MUL", f16, {300, 0.5, 1.1}, {300, 3, 1.1}), {kInf, 1.5, 1.208984375},
                 "MUL");
  ExpectFloatsEq(Flt2("FDIV", f16, {1, 1}, {3, 0}), {0.333251953125, kInf}, "FDIV");
  ExpectFloatsEq(Flt2("MAX", f16, {1, -2}, {0.5, -1}), {1, -1}, "MAX");
  ExpectFloatsEq(Flt2("MOD", f16, {5.5}, {2}), {1.5}, "MOD");
  ExpectFloatsEq(Flt2("POW", f16, {2}, {0.5}), {1.4140625}, "POW");
  EXPECT_EQ(AsInts(RunOp("CMPLT", b, {Floats(f16, {1, 2}), Floats(f16, {2, 2})})), (I{1, 0}));
  ExpectFloatsEq(Flt1("NEG", f16, {1.5}), {-1.5}, "NEG");
  ExpectFloatsEq(Flt1("SQRT", f16, {2, 4}), {1.4140625, 2}, "SQRT");
  ExpectFloatsEq(Flt1("EXP2", f16, {0.5, 16}), {1.4140625, kInf}, "EXP2");
  ExpectFloatsEq(Flt1("LOG2", f16, {1024}), {10}, "LOG2");
  ExpectFloatsEq(Flt1("RECIP", f16, {3}), {0.333251953125}, "RECIP");
  ExpectFloatsEq(Flt1("SIN", f16, {0}), {0}, "SIN");
  ExpectFloatsEq(Flt1("TRUNC", f16, {-2.5}), {-2}, "TRUNC");
  // 1.099609375^2 rounds to 1.208984375, + 0.300048828125 = 1545.25 * 2^-10.
  ExpectFloatsEq(AsFloats(RunOp("MULACC", f16, {Floats(f16, {1.1}), Floats(f16, {1.1}),
                                                Floats(f16, {0.3})})),
                 {1.5087890625}, "MULACC");
}

TEST(InterpreterAluTest, BFloat16AndWideInts) {
  // bfloat16 has 8 significant bits: 256 + 1 ties to 256, 256 + 3 to 260.
  ExpectFloatsEq(Flt2("ADD", dtypes::kBFloat16, {256, 256}, {1, 3}), {256, 260}, "bf16 ADD");
  const DType i64 = dtypes::kInt64, u64 = dtypes::kUInt64;
  EXPECT_EQ(Int2("IDIV", i64, {INT64_MIN, -9}, {-1, 2}), (I{INT64_MIN, -4}));
  EXPECT_EQ(Int2("ADD", i64, {INT64_MAX}, {1}), (I{INT64_MIN}));
  // uint64 compares and shifts as unsigned.
  EXPECT_EQ(Int2("CMPLT", u64, {-1, 1}, {1, -1}, b), (I{0, 1}));
  EXPECT_EQ(Int2("SHR", u64, {-1}, {60}), (I{15}));
  EXPECT_EQ(Int2("IDIV", u64, {-2}, {2}), (I{INT64_MAX}));
  EXPECT_EQ(AsInts(RunOp("NEG", b, {Ints(b, {0, 1})})), (I{1, 0}));
  EXPECT_EQ(Int2("ADD", b, {0, 1, 1}, {0, 0, 1}), (I{0, 1, 1}));
  EXPECT_EQ(Int2("MUL", b, {0, 1, 1}, {1, 0, 1}), (I{0, 0, 1}));
}

TEST(InterpreterAluTest, Casts) {
  // float -> int: truncation toward zero, saturation, NaN -> 0.
  EXPECT_EQ(AsInts(RunOp("CAST", i32, {Floats(f32, {2.9, -2.9, 3e9, -3e9, kNaN, kInf})})),
            (I{2, -2, INT32_MAX, INT32_MIN, 0, INT32_MAX}));
  EXPECT_EQ(AsInts(RunOp("CAST", u8, {Floats(f32, {300, -5, 255.9, 7.99})})), (I{255, 0, 255, 7}));
  EXPECT_EQ(AsInts(RunOp("CAST", dtypes::kInt64, {Floats(dtypes::kFloat64, {1e19, -1e19})})),
            (I{INT64_MAX, INT64_MIN}));
  EXPECT_EQ(AsInts(RunOp("CAST", dtypes::kUInt64, {Floats(dtypes::kFloat64, {1e19, 2e19})})),
            (I{static_cast<int64_t>(10000000000000000000ULL), -1}));
  // Integer -> integer wraps.
  EXPECT_EQ(AsInts(RunOp("CAST", dtypes::kInt8, {Ints(i32, {200, -129, 127})})), (I{-56, 127, 127}));
  EXPECT_EQ(AsInts(RunOp("CAST", u8, {Ints(i32, {-1, 256})})), (I{255, 0}));
  EXPECT_EQ(AsInts(RunOp("CAST", i32, {Ints(u8, {255})})), (I{255}));
  // bool conversions.
  EXPECT_EQ(AsInts(RunOp("CAST", b, {Floats(f32, {0, -0.0, 0.5, kNaN})})), (I{0, 0, 1, 1}));
  EXPECT_EQ(AsInts(RunOp("CAST", b, {Ints(i32, {0, -7})})), (I{0, 1}));
  ExpectFloatsEq(AsFloats(RunOp("CAST", f32, {Ints(b, {1, 0})})), {1, 0}, "bool->f32");
  // int -> half rounds to nearest even; 65520 is the overflow tie.
  ExpectFloatsEq(AsFloats(RunOp("CAST", f16, {Ints(i32, {2049, 2051, 65519, 65520, -100000})})),
                 {2048, 2052, 65504, kInf, -kInf}, "i32->f16");
  // float -> half ties.
  const double t = std::ldexp(1.0, -11);
  ExpectFloatsEq(AsFloats(RunOp("CAST", f16, {Floats(f32, {1 + 2 * t, 1 + t, 1 + 3 * t,
                                                           1 + t + std::ldexp(1.0, -20)})})),
                 {1 + 2 * t, 1, 1 + 4 * t, 1 + 2 * t}, "f32->f16");
  // float64 -> half without double rounding: 1 + 2^-11 + 2^-40 is above the
  // tie (via float it would collapse onto the tie and round down).
  ExpectFloatsEq(AsFloats(RunOp("CAST", f16, {Floats(dtypes::kFloat64,
                                                     {1 + t + std::ldexp(1.0, -40)})})),
                 {1 + 2 * t}, "f64->f16");
  // int64 -> float32 rounds once: 2^60 + 2^36 + 1 is just above a float
  // tie (via double it would land on the tie and round down to 2^60).
  const int64_t big = (int64_t{1} << 60) + (int64_t{1} << 36) + 1;
  ExpectFloatsEq(AsFloats(RunOp("CAST", f32, {Ints(dtypes::kInt64, {big})})),
                 {std::ldexp(1.0, 60) + std::ldexp(1.0, 37)}, "i64->f32");
  ExpectFloatsEq(AsFloats(RunOp("CAST", f32, {Ints(dtypes::kUInt64, {-1})})),
                 {18446744073709551616.0}, "u64->f32");
  ExpectFloatsEq(AsFloats(RunOp("CAST", dtypes::kFloat64, {Floats(f16, {0.1})})),
                 {0.0999755859375}, "f16->f64");
  // BITCAST reinterprets bits.
  EXPECT_EQ(AsInts(RunOp("BITCAST", i32, {Floats(f32, {1.0, -2.0})})),
            (I{0x3f800000, static_cast<int32_t>(0xc0000000u)}));
  ExpectFloatsEq(AsFloats(RunOp("BITCAST", f16, {Ints(dtypes::kInt16, {0x3c00})})), {1.0},
                 "i16->f16");
}

}  // namespace
}  // namespace kiln

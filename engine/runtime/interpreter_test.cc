#include "engine/runtime/interpreter.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// Compiles (validates), loads and launches `text` over [0, global).
absl::Status RunKernel(const std::string& name, const std::string& text, std::vector<void*> bufs,
                 std::vector<int64_t> vars, int64_t global,
                 const std::vector<size_t>* nbytes = nullptr) {
  InterpreterDevice dev;
  absl::StatusOr<std::string> bin = dev.compiler().Compile(text);
  if (!bin.ok()) return bin.status();
  absl::StatusOr<std::unique_ptr<Program>> prog = dev.LoadProgram(name, *bin);
  if (!prog.ok()) return prog.status();
  LaunchDims dims;
  dims.global[0] = global;
  if (nbytes != nullptr) return (*prog)->LaunchChecked(bufs, *nbytes, vars, dims);
  return (*prog)->Launch(bufs, vars, dims, true, nullptr);
}

const char* kExample = R"(
kernel E_4
%0 = DEFINE_GLOBAL float32* () 0
%1 = DEFINE_GLOBAL float32* () 1
%2 = CONST int32 () 0
%3 = CONST int32 () 4
%4 = RANGE int32 (%2, %3) 0 parallel
%5 = LOAD float32 (%1, %4)
%6 = CONST float32 () 1.5
%7 = ADD float32 (%5, %6)
%8 = STORE void (%0, %4, %7)
%9 = ENDRANGE void (%4)
end
)";

TEST(InterpreterTest, Example) {
  std::vector<float> out(4, 0), in = {1, 2, 3, 4.25f};
  ASSERT_TRUE(RunKernel("E_4", kExample, {out.data(), in.data()}, {}, 4).ok());
  EXPECT_EQ(out, (std::vector<float>{2.5f, 3.5f, 4.5f, 5.75f}));
  // The parallel loop is intersected with the launch range.
  std::vector<float> part(4, 0);
  ASSERT_TRUE(RunKernel("E_4", kExample, {part.data(), in.data()}, {}, 2).ok());
  EXPECT_EQ(part, (std::vector<float>{2.5f, 3.5f, 0, 0}));
  // Empty launch range: the loop body never runs.
  std::vector<float> none(4, 0);
  ASSERT_TRUE(RunKernel("E_4", kExample, {none.data(), in.data()}, {}, 0).ok());
  EXPECT_EQ(none, (std::vector<float>(4, 0)));
}

TEST(InterpreterTest, DeviceBasics) {
  InterpreterDevice dev;
  EXPECT_EQ(dev.name(), "INTERP");
  EXPECT_EQ(dev.renderer(), "bytecode");
  EXPECT_EQ(*dev.compiler().Compile(kExample), kExample);
  absl::StatusOr<std::unique_ptr<Program>> wrong = dev.LoadProgram("other", kExample);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<std::unique_ptr<Program>> prog = dev.LoadProgram("E_4", kExample);
  ASSERT_TRUE(prog.ok());
  EXPECT_EQ((*prog)->name(), "E_4");
  // Too few buffers is an error, not a crash.
  LaunchDims dims;
  dims.global[0] = 4;
  std::vector<float> out(4);
  EXPECT_EQ((*prog)->Launch({out.data()}, {}, dims, true, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

// out[i] = sum_j sum_k in[i*12 + j*4 + k] over nested loops, with an
// accumulator placed before its loops (its range sources follow it).
TEST(InterpreterTest, ReductionWithAccumulator) {
  const char* text = R"(
kernel r_3_12
# out: 3 sums; in: 36 values
%0 = DEFINE_GLOBAL float32* () 0
%1 = DEFINE_GLOBAL float32* () 1
%2 = CONST int32 () 0
%3 = CONST int32 () 3
%4 = RANGE int32 (%2, %3) 0 parallel
%5 = CONST float32 () 0
%6 = CONST int32 () 3
%7 = CONST int32 () 4
%8 = DEFINE_ACC float32 (%5, %9, %10)
%9 = RANGE int32 (%2, %6) 1
%10 = RANGE int32 (%2, %7) 2
%11 = CONST int32 () 12
%12 = MUL int32 (%4, %11)
%13 = MUL int32 (%9, %7)
%14 = ADD int32 (%12, %13)
%15 = ADD int32 (%14, %10)
%16 = LOAD float32 (%1, %15)
%17 = ADD float32 (%8, %16)
%18 = ASSIGN float32 (%8, %17)
%19 = ENDRANGE void (%10)
%20 = ENDRANGE void (%9)
%21 = STORE void (%0, %4, %18)
%22 = ENDRANGE void (%4)
end
)";
  std::vector<float> in(36), out(3, -1);
  for (int i = 0; i < 36; ++i) in[i] = static_cast<float>(i);
  absl::Status s = RunKernel("r_3_12", text, {out.data(), in.data()}, {}, 3);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out, (std::vector<float>{66, 210, 354}));
  // The informational range sources may be omitted, but must be RANGEs.
  std::string bare = text;
  bare.replace(bare.find("(%5, %9, %10)"), 13, "(%5) 0");
  out.assign(3, -1);
  ASSERT_TRUE(RunKernel("r_3_12", bare, {out.data(), in.data()}, {}, 3).ok());
  EXPECT_EQ(out, (std::vector<float>{66, 210, 354}));
  std::string bad = text;
  bad.replace(bad.find("(%5, %9, %10)"), 13, "(%5, %11)");
  absl::Status e = RunKernel("r_3_12", bad, {out.data(), in.data()}, {}, 3);
  EXPECT_NE(e.message().find("line 12: accumulator range %11 is not a RANGE"), std::string::npos)
      << e;
}

TEST(InterpreterTest, VectorLoadStoreGepVectorize) {
  const char* text = R"(
kernel v4
%0 = DEFINE_GLOBAL float32* () 0
%1 = DEFINE_GLOBAL float32* () 1
%2 = CONST int32 () 0
%3 = CONST int32 () 2
%4 = RANGE int32 (%2, %3) 0 parallel
%5 = CONST int32 () 4
%6 = MUL int32 (%4, %5)
%7 = LOAD float32x4 (%1, %6)
%8 = CONST float32x4 () 2
%9 = MUL float32x4 (%7, %8)
%10 = GEP float32 (%9) 3
%11 = GEP float32 (%9) 0
%12 = VECTORIZE float32x4 (%10, %11, %10, %11)
%13 = ADD float32x4 (%9, %12)
%14 = STORE void (%0, %6, %13)
%15 = ENDRANGE void (%4)
end
)";
  std::vector<float> in = {1, 2, 3, 4, 5, 6, 7, 8}, out(8, 0);
  absl::Status s = RunKernel("v4", text, {out.data(), in.data()}, {}, 2);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out, (std::vector<float>{2 + 8, 4 + 2, 6 + 8, 8 + 2, 10 + 16, 12 + 10, 14 + 16,
                                     16 + 10}));
}

TEST(InterpreterTest, GatedLoadsAndStoresAndIf) {
  // out[i] = i < 3 ? in[i] : -1 (gated load); out2[i] written only for odd i;
  // out3[i] = 9 inside IF (i == 2).
  const char* text = R"(
kernel g
%0 = DEFINE_GLOBAL int32* () 0
%1 = DEFINE_GLOBAL int32* () 1
%2 = DEFINE_GLOBAL int32* () 2
%3 = DEFINE_GLOBAL int32* () 3
%4 = CONST int32 () 0
%5 = CONST int32 () 6
%6 = RANGE int32 (%4, %5) 0 parallel
%7 = CONST int32 () 3
%8 = CMPLT bool (%6, %7)
%9 = CONST int32 () -1
%10 = LOAD int32 (%1, %6, %8, %9)
%11 = STORE void (%0, %6, %10)
%12 = CONST int32 () 2
%13 = MOD int32 (%6, %12)
%14 = CONST int32 () 1
%15 = CMPEQ bool (%13, %14)
%16 = STORE void (%2, %6, %6, %15)
%17 = CMPEQ bool (%6, %12)
%18 = IF void (%17)
%19 = CONST int32 () 9
%20 = STORE void (%3, %6, %19)
%21 = ENDIF void (%18)
%22 = ENDRANGE void (%6)
end
)";
  std::vector<int> in = {10, 11, 12}, out(6, 0), out2(6, 0), out3(6, 0);
  // Checked: the gated-off loads (i >= 3) must not touch the 3-element input.
  std::vector<size_t> nbytes = {24, 12, 24, 24};
  absl::Status s = RunKernel("g", text, {out.data(), in.data(), out2.data(), out3.data()}, {}, 6,
                       &nbytes);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out, (std::vector<int>{10, 11, 12, -1, -1, -1}));
  EXPECT_EQ(out2, (std::vector<int>{0, 1, 0, 3, 0, 5}));
  EXPECT_EQ(out3, (std::vector<int>{0, 0, 9, 0, 0, 0}));
}

TEST(InterpreterTest, DefineVarValuesAndRangeCheck) {
  const char* text = R"(
kernel vars
%0 = DEFINE_GLOBAL int64* () 0
%1 = CONST int64 () 1
%2 = CONST int64 () 16
%3 = DEFINE_VAR int64 (%1, %2) n
%4 = CONST int64 () -5
%5 = CONST int64 () 5
%6 = DEFINE_VAR int64 (%4, %5) k
%7 = CONST int64 () 0
%8 = RANGE int64 (%7, %3) 0
%9 = MUL int64 (%8, %6)
%10 = STORE void (%0, %8, %9)
%11 = ENDRANGE void (%8)
end
)";
  std::vector<int64_t> out(16, 0);
  ASSERT_TRUE(RunKernel("vars", text, {out.data()}, {4, -3}, 1).ok());
  EXPECT_EQ(out[3], -9);
  EXPECT_EQ(out[4], 0);
  absl::Status bad = RunKernel("vars", text, {out.data()}, {17, 0}, 1);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("'n'"), std::string::npos) << bad;
  EXPECT_EQ(RunKernel("vars", text, {out.data()}, {4}, 1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(InterpreterTest, LaunchCheckedOutOfBounds) {
  std::vector<float> out(4, 0), in = {1, 2, 3};
  std::vector<size_t> nbytes = {16, 12};
  absl::Status s = RunKernel("E_4", kExample, {out.data(), in.data()}, {}, 4, &nbytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("%5"), std::string::npos) << s;
  EXPECT_NE(s.message().find("index 3"), std::string::npos) << s;
  EXPECT_NE(s.message().find("12 bytes"), std::string::npos) << s;
  // Stores are checked too.
  nbytes = {12, 16};
  std::vector<float> in4 = {1, 2, 3, 4};
  s = RunKernel("E_4", kExample, {out.data(), in4.data()}, {}, 4, &nbytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("STORE %8"), std::string::npos) << s;
  // In bounds: fine.
  nbytes = {16, 16};
  EXPECT_TRUE(RunKernel("E_4", kExample, {out.data(), in4.data()}, {}, 4, &nbytes).ok());
}

void ExpectParseError(const std::string& text, int line, const std::string& fragment) {
  InterpreterDevice dev;
  absl::StatusOr<std::string> r = dev.compiler().Compile(text);
  ASSERT_FALSE(r.ok()) << text;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  if (line > 0) {
    EXPECT_NE(r.status().message().find(absl::StrCat("line ", line, ":")), std::string::npos)
        << r.status();
  }
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status();
}

TEST(InterpreterTest, MalformedBytecode) {
  const std::string head = "kernel k\n%0 = DEFINE_GLOBAL float32* () 0\n%1 = CONST int32 () 0\n";
  ExpectParseError(head + "%2 = FROB float32 (%1)\nend\n", 4, "unknown op 'FROB'");
  ExpectParseError(head + "%2 = NEG int32 (%7)\nend\n", 4, "undefined source %7");
  ExpectParseError(head + "%2 = CONST float32x4 () 1\n%3 = CONST float32 () 2\n"
                          "%4 = ADD float32x4 (%2, %3)\nend\n", 6, "lane");
  ExpectParseError(head + "%2 = CONST float32 () 1\n%3 = ADD float32 (%1, %2)\nend\n", 5,
                   "should be float32");
  ExpectParseError(head + "%2 = CONST flaot32 () 1\nend\n", 4, "unknown dtype");
  ExpectParseError(head + "%1 = CONST int32 () 1\nend\n", 4, "duplicate id %1");
  ExpectParseError(head + "%2 = CONST int32 () abc\nend\n", 4, "bad int32 constant");
  ExpectParseError(head + "%2 = CONST uint8 () 256\nend\n", 4, "bad uint8 constant");
  ExpectParseError(head + "%2 = RANGE int32 (%1, %1) 0\nend\n", 4, "never closed");
  ExpectParseError(head + "%2 = ENDRANGE void (%1)\nend\n", 4, "ENDRANGE must close a RANGE");
  ExpectParseError(head + "end\n%5 = CONST int32 () 0\n", 5, "after 'end'");
  ExpectParseError(head, 0, "missing 'end'");
  ExpectParseError("%0 = CONST int32 () 0\nend\n", 1, "kernel <name>");
  ExpectParseError(head + "%2 = CONST float32 () 1\n%3 = AND float32 (%2, %2)\nend\n", 5,
                   "bitwise");
  ExpectParseError(head + "%2 = LOAD float32 (%0, %1, %1)\nend\n", 4, "LOAD");
  ExpectParseError(head + "%2 = GEP int32 (%1) 1\nend\n", 4, "GEP");
  ExpectParseError(head + "%2 = CAST float64 (%1)\n%3 = BITCAST float64 (%1)\nend\n", 5,
                   "changes the size");
  ExpectParseError(head + "%2 = = CONST\nend\n", 4, "expected");
}

// 64x64 matmul through the interpreter: correctness and speed.
TEST(InterpreterTest, Matmul64) {
  const char* text = R"(
kernel matmul
%0 = DEFINE_GLOBAL float32* () 0
%1 = DEFINE_GLOBAL float32* () 1
%2 = DEFINE_GLOBAL float32* () 2
%3 = CONST int32 () 0
%4 = CONST int32 () 64
%5 = RANGE int32 (%3, %4) 0 parallel
%6 = RANGE int32 (%3, %4) 1
%7 = CONST float32 () 0
%8 = DEFINE_ACC float32 (%7)
%9 = RANGE int32 (%3, %4) 2
%10 = MUL int32 (%5, %4)
%11 = ADD int32 (%10, %9)
%12 = LOAD float32 (%1, %11)
%13 = MUL int32 (%9, %4)
%14 = ADD int32 (%13, %6)
%15 = LOAD float32 (%2, %14)
%16 = MULACC float32 (%12, %15, %8)
%17 = ASSIGN float32 (%8, %16)
%18 = ENDRANGE void (%9)
%19 = ADD int32 (%10, %6)
%20 = STORE void (%0, %19, %17)
%21 = ENDRANGE void (%6)
%22 = ENDRANGE void (%5)
end
)";
  const int n = 64;
  std::vector<float> a(n * n), b(n * n), c(n * n, 0), ref(n * n, 0);
  for (int i = 0; i < n * n; ++i) {
    a[i] = static_cast<float>((i * 7) % 13) - 6.0f;
    b[i] = static_cast<float>((i * 5) % 11) * 0.25f;
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      float acc = 0;
      for (int k = 0; k < n; ++k) {
        float prod = a[i * n + k] * b[k * n + j];
        acc = acc + prod;
      }
      ref[i * n + j] = acc;
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<size_t> nbytes(3, n * n * 4);
  absl::Status s = RunKernel("matmul", text, {c.data(), a.data(), b.data()}, {}, n, &nbytes);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c, ref);
  std::printf("64x64 matmul (checked): %.1f ms, %.1f M instructions/s\n", secs * 1e3,
              64.0 * 64 * 64 * 10 / secs / 1e6);
}

}  // namespace
}  // namespace kiln

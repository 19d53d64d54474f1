#include "engine/base/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/base/flags.h"
#include "engine/base/status.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(dtypes::kFloat32.ItemSize(), 4);
  EXPECT_EQ(dtypes::kFloat16.ItemSize(), 2);
  EXPECT_EQ(dtypes::kBFloat16.ItemSize(), 2);
  EXPECT_EQ(dtypes::kInt64.ItemSize(), 8);
  EXPECT_EQ(dtypes::kBool.ItemSize(), 1);
  EXPECT_EQ(dtypes::kFloat32.Vec(8).ItemSize(), 32);
  EXPECT_EQ(dtypes::kFloat32.Vec(8).Name(), "float32x8");
  EXPECT_EQ(dtypes::kUInt8.Ptr().Name(), "uint8*");
  EXPECT_EQ(dtypes::kFloat16.KServeName(), "FP16");
  EXPECT_EQ(*DTypeFromName("FP32"), dtypes::kFloat32);
  EXPECT_EQ(*DTypeFromName("bfloat16"), dtypes::kBFloat16);
  EXPECT_FALSE(DTypeFromName("complex64").has_value());
  int n;
  const DType* all = AllDTypes(&n);
  EXPECT_EQ(n, 13);
  for (int i = 0; i < n; ++i) EXPECT_EQ(*DTypeFromName(all[i].Name()), all[i]);
}

TEST(DTypeTest, Promotion) {
  EXPECT_EQ(PromoteTypes(dtypes::kBool, dtypes::kInt8), dtypes::kInt8);
  EXPECT_EQ(PromoteTypes(dtypes::kInt32, dtypes::kFloat16), dtypes::kFloat16);
  EXPECT_EQ(PromoteTypes(dtypes::kInt32, dtypes::kInt64), dtypes::kInt64);
  EXPECT_EQ(PromoteTypes(dtypes::kUInt8, dtypes::kInt8), dtypes::kInt16);
  EXPECT_EQ(PromoteTypes(dtypes::kUInt32, dtypes::kInt32), dtypes::kInt64);
  EXPECT_EQ(PromoteTypes(dtypes::kUInt64, dtypes::kInt64), dtypes::kFloat64);
  EXPECT_EQ(PromoteTypes(dtypes::kFloat16, dtypes::kBFloat16), dtypes::kFloat32);
  EXPECT_EQ(PromoteTypes(dtypes::kFloat32, dtypes::kFloat64), dtypes::kFloat64);
  EXPECT_EQ(PromoteTypes(dtypes::kUInt16, dtypes::kInt32), dtypes::kInt32);
}

float FromBits(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

TEST(DTypeTest, HalfConversions) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  EXPECT_EQ(FloatToHalf(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(2.9802322387695312e-08f), 0x0000);  // half of it: ties to even
  EXPECT_EQ(FloatToHalf(8.940696716308594e-08f), 0x0002);   // 1.5 ulp: ties to even
  EXPECT_FLOAT_EQ(HalfToFloat(0x0001), 5.960464477539063e-08f);
  EXPECT_FLOAT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  // 1 + 2^-11 is a tie between 1 and 1+2^-10: rounds to even (1.0).
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048), 0x3c02);
  // Round trip of every half value (except NaNs).
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t v = static_cast<uint16_t>(h);
    if ((v & 0x7c00) == 0x7c00 && (v & 0x3ff)) continue;
    ASSERT_EQ(FloatToHalf(HalfToFloat(v)), v) << h;
  }
}

TEST(DTypeTest, BFloat16Conversions) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
}

absl::StatusOr<int> Half(int x) {
  if (x % 2) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::Status UseMacros(int x, int* out) {
  ASSIGN_OR_RETURN(int h, Half(x));
  RETURN_IF_ERROR(h > 100 ? absl::OutOfRangeError("big") : absl::OkStatus());
  *out = h;
  return absl::OkStatus();
}

TEST(StatusTest, Macros) {
  int out = 0;
  EXPECT_TRUE(UseMacros(8, &out).ok());
  EXPECT_EQ(out, 4);
  EXPECT_EQ(UseMacros(7, &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UseMacros(400, &out).code(), absl::StatusCode::kOutOfRange);
  EXPECT_DEATH(KILN_CHECK(1 == 2, "numbers ", 3), "numbers 3");
}

TEST(FlagsTest, Env) {
  setenv("KILN_TEST_FLAG", "17", 1);
  EXPECT_EQ(GetEnvInt("KILN_TEST_FLAG", 3), 17);
  EXPECT_EQ(GetEnvInt("KILN_TEST_FLAG_UNSET", 3), 3);
  EXPECT_EQ(GetEnvString("KILN_TEST_FLAG_UNSET", "x"), "x");
}

}  // namespace
}  // namespace kiln

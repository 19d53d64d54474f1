#include "engine/base/dtype.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

namespace kiln {
namespace {

struct Info {
  ScalarType t;
  int size;
  const char* name;
  const char* kserve;
};

constexpr Info kInfo[kNumScalarTypes] = {
    {ScalarType::kVoid, 0, "void", "VOID"},
    {ScalarType::kBool, 1, "bool", "BOOL"},
    {ScalarType::kInt8, 1, "int8", "INT8"},
    {ScalarType::kInt16, 2, "int16", "INT16"},
    {ScalarType::kInt32, 4, "int32", "INT32"},
    {ScalarType::kInt64, 8, "int64", "INT64"},
    {ScalarType::kUInt8, 1, "uint8", "UINT8"},
    {ScalarType::kUInt16, 2, "uint16", "UINT16"},
    {ScalarType::kUInt32, 4, "uint32", "UINT32"},
    {ScalarType::kUInt64, 8, "uint64", "UINT64"},
    {ScalarType::kFloat16, 2, "float16", "FP16"},
    {ScalarType::kBFloat16, 2, "bfloat16", "BF16"},
    {ScalarType::kFloat32, 4, "float32", "FP32"},
    {ScalarType::kFloat64, 8, "float64", "FP64"},
};

const Info& InfoOf(ScalarType t) { return kInfo[static_cast<int>(t)]; }

std::string Lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// Rank inside a kind, for promotion.
int IntBits(ScalarType t) { return InfoOf(t).size * 8; }

}  // namespace

int DType::ScalarSize() const { return InfoOf(scalar).size; }

bool DType::IsFloat() const {
  return scalar == ScalarType::kFloat16 || scalar == ScalarType::kBFloat16 ||
         scalar == ScalarType::kFloat32 || scalar == ScalarType::kFloat64;
}

bool DType::IsInt() const {
  return scalar >= ScalarType::kInt8 && scalar <= ScalarType::kUInt64;
}

bool DType::IsUnsigned() const {
  return scalar >= ScalarType::kUInt8 && scalar <= ScalarType::kUInt64;
}

std::string DType::Name() const {
  std::string n = InfoOf(scalar).name;
  if (count > 1) n += "x" + std::to_string(count);
  if (ptr) n += "*";
  return n;
}

std::string DType::KServeName() const { return InfoOf(scalar).kserve; }

const DType* AllDTypes(int* n) {
  static constexpr DType kAll[] = {
      dtypes::kBool,   dtypes::kInt8,    dtypes::kInt16,    dtypes::kInt32,   dtypes::kInt64,
      dtypes::kUInt8,  dtypes::kUInt16,  dtypes::kUInt32,   dtypes::kUInt64,  dtypes::kFloat16,
      dtypes::kBFloat16, dtypes::kFloat32, dtypes::kFloat64};
  *n = 13;
  return kAll;
}

std::optional<DType> DTypeFromName(std::string_view name) {
  std::string n = Lower(name);
  for (const Info& i : kInfo) {
    if (i.t == ScalarType::kVoid) continue;
    if (n == i.name || n == Lower(i.kserve)) return DType(i.t);
  }
  if (n == "float" || n == "f32") return dtypes::kFloat32;
  if (n == "double" || n == "f64") return dtypes::kFloat64;
  if (n == "half" || n == "f16") return dtypes::kFloat16;
  if (n == "int" || n == "i32") return dtypes::kInt32;
  if (n == "long" || n == "i64") return dtypes::kInt64;
  if (n == "uchar" || n == "u8") return dtypes::kUInt8;
  return std::nullopt;
}

DType PromoteTypes(DType a, DType b) {
  ScalarType x = a.scalar, y = b.scalar;
  if (x == y) return DType(x);
  if (x == ScalarType::kBool) return DType(y);
  if (y == ScalarType::kBool) return DType(x);
  DType da(x), db(y);
  if (da.IsFloat() || db.IsFloat()) {
    if (!db.IsFloat()) return da;
    if (!da.IsFloat()) return db;
    bool half_pair = (x == ScalarType::kFloat16 && y == ScalarType::kBFloat16) ||
                     (x == ScalarType::kBFloat16 && y == ScalarType::kFloat16);
    if (half_pair) return dtypes::kFloat32;
    return da.ScalarSize() >= db.ScalarSize() ? da : db;
  }
  // Both integers.
  if (da.IsUnsigned() == db.IsUnsigned()) return IntBits(x) >= IntBits(y) ? da : db;
  DType s = da.IsUnsigned() ? db : da;
  DType u = da.IsUnsigned() ? da : db;
  if (s.ScalarSize() > u.ScalarSize()) return s;
  switch (u.ScalarSize()) {
    case 1: return dtypes::kInt16;
    case 2: return dtypes::kInt32;
    case 4: return dtypes::kInt64;
    default: return dtypes::kFloat64;
  }
}

double DTypeMin(DType t) {
  switch (t.scalar) {
    case ScalarType::kBool: return 0;
    case ScalarType::kInt8: return -128;
    case ScalarType::kInt16: return -32768;
    case ScalarType::kInt32: return -2147483648.0;
    case ScalarType::kInt64: return -9223372036854775808.0;
    case ScalarType::kFloat16: return -65504.0;
    case ScalarType::kBFloat16: return -3.3895313892515355e38;
    case ScalarType::kFloat32: return -std::numeric_limits<float>::max();
    case ScalarType::kFloat64: return -std::numeric_limits<double>::max();
    default: return 0;  // unsigned
  }
}

double DTypeMax(DType t) {
  switch (t.scalar) {
    case ScalarType::kBool: return 1;
    case ScalarType::kInt8: return 127;
    case ScalarType::kInt16: return 32767;
    case ScalarType::kInt32: return 2147483647.0;
    case ScalarType::kInt64: return 9223372036854775807.0;
    case ScalarType::kUInt8: return 255;
    case ScalarType::kUInt16: return 65535;
    case ScalarType::kUInt32: return 4294967295.0;
    case ScalarType::kUInt64: return 18446744073709551615.0;
    case ScalarType::kFloat16: return 65504.0;
    case ScalarType::kBFloat16: return 3.3895313892515355e38;
    case ScalarType::kFloat32: return std::numeric_limits<float>::max();
    case ScalarType::kFloat64: return std::numeric_limits<double>::max();
    default: return 0;
  }
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) {  // inf / nan
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  }
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (e <= 0) {
    // Subnormal half (or zero): shift the full mantissa into place with RNE.
    if (e < -10) return static_cast<uint16_t>(sign);
    uint32_t m = mant | 0x800000u;
    int shift = 14 - e;  // 24-bit mantissa -> (10 + e) bits
    uint32_t half_m = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1u))) half_m++;
    return static_cast<uint16_t>(sign | half_m);
  }
  uint32_t half_m = mant >> 13;
  uint32_t rem = mant & 0x1fffu;
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | half_m;
  if (rem > 0x1000u || (rem == 0x1000u && (half_m & 1u))) h++;  // may carry into exp: correct
  return static_cast<uint16_t>(h);
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        e++;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // nan
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

float BFloat16ToFloat(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace kiln

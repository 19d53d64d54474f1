// DType: the element types of kiln tensors and kernels.
//
// A DType is a small value: a scalar type, a vector width (count > 1 only in
// generated kernels) and a pointer flag (kernel buffer parameters). All ONNX /
// KServe numeric types are covered: bool, int8..64, uint8..64, float16,
// bfloat16, float32, float64. Thread-safe (immutable value type).
#ifndef KILN_ENGINE_BASE_DTYPE_H_
#define KILN_ENGINE_BASE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

enum class ScalarType : uint8_t {
  kVoid = 0,
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
};
inline constexpr int kNumScalarTypes = 14;

struct DType {
  ScalarType scalar = ScalarType::kVoid;
  uint16_t count = 1;  // vector width
  bool ptr = false;    // pointer to `scalar` elements (buffer parameter)

  constexpr DType() = default;
  constexpr DType(ScalarType s, uint16_t c = 1, bool p = false)  // NOLINT
      : scalar(s), count(c), ptr(p) {}

  // Size of one scalar element in bytes (0 for void).
  int ScalarSize() const;
  // Size of a (vector) value in bytes; pointers report the element size.
  int ItemSize() const { return ScalarSize() * count; }

  DType Scalar() const { return DType(scalar); }
  DType Vec(int n) const { return DType(scalar, static_cast<uint16_t>(n), false); }
  DType Ptr() const { return DType(scalar, 1, true); }

  bool IsFloat() const;
  bool IsInt() const;       // signed or unsigned integer (not bool)
  bool IsUnsigned() const;  // unsigned integer
  bool IsBool() const { return scalar == ScalarType::kBool; }
  bool IsVoid() const { return scalar == ScalarType::kVoid; }

  // Short lowercase name: "float32", "int64", "bool"; vectors "float32x8",
  // pointers "float32*".
  std::string Name() const;
  // ONNX-style upper name used by KServe: "FP32", "INT64", "BOOL"...
  std::string KServeName() const;

  bool operator==(const DType& o) const {
    return scalar == o.scalar && count == o.count && ptr == o.ptr;
  }
  bool operator!=(const DType& o) const { return !(*this == o); }
  size_t Hash() const {
    return static_cast<size_t>(scalar) * 131 + count * 7 + (ptr ? 1 : 0);
  }
};

namespace dtypes {
inline constexpr DType kVoid{ScalarType::kVoid};
inline constexpr DType kBool{ScalarType::kBool};
inline constexpr DType kInt8{ScalarType::kInt8};
inline constexpr DType kInt16{ScalarType::kInt16};
inline constexpr DType kInt32{ScalarType::kInt32};
inline constexpr DType kInt64{ScalarType::kInt64};
inline constexpr DType kUInt8{ScalarType::kUInt8};
inline constexpr DType kUInt16{ScalarType::kUInt16};
inline constexpr DType kUInt32{ScalarType::kUInt32};
inline constexpr DType kUInt64{ScalarType::kUInt64};
inline constexpr DType kFloat16{ScalarType::kFloat16};
inline constexpr DType kBFloat16{ScalarType::kBFloat16};
inline constexpr DType kFloat32{ScalarType::kFloat32};
inline constexpr DType kFloat64{ScalarType::kFloat64};
// The type of index arithmetic in kernels.
inline constexpr DType kIndex = kInt32;
}  // namespace dtypes

// All 13 numeric scalar types, in ScalarType order.
const DType* AllDTypes(int* n);

// Parses "float32" / "FP32" / "float" style names (case-insensitive).
std::optional<DType> DTypeFromName(std::string_view name);

// Type promotion for binary ops (numpy-like lattice): bool < ints < floats;
// mixing signed and unsigned of the same width goes one size up, int64 with
// uint64 goes to float64; float16 with bfloat16 goes to float32.
DType PromoteTypes(DType a, DType b);

// The smallest / largest finite value of a scalar type, as double.
double DTypeMin(DType t);
double DTypeMax(DType t);

// IEEE half and bfloat16 conversions, round-to-nearest-even, with correct
// handling of subnormals, infinities and NaN.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBFloat16(float f);
float BFloat16ToFloat(uint16_t b);

}  // namespace kiln

#endif  // KILN_ENGINE_BASE_DTYPE_H_

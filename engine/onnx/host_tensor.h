// HostTensor: a small dense array in host memory (dtype + shape + bytes).
//
// The ONNX importer keeps host copies of constants and of values computed
// from shapes (Shape -> Slice -> Concat -> Reshape, ...), so ops that need
// static values (a Reshape target, Slice starts, Pad pads, ...) get them at
// graph-build time without running kernels. Elements are row-major and
// little-endian, `dtype.ItemSize()` bytes each; float16 / bfloat16 are stored
// as their 16-bit patterns, bool as one byte (0 / 1).
//
// Thread-compatible value type.
#ifndef KILN_ENGINE_ONNX_HOST_TENSOR_H_
#define KILN_ENGINE_ONNX_HOST_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/base/dtype.h"
#include "engine/shape/view.h"
#include "engine/tensor/tensor.h"

namespace kiln {

// Largest host value (in elements) the importer computes from data: a
// Range, a NonZero result, interpolation / sampling weights, ... (shape
// arithmetic itself is capped lower, by kHostKeepLimit in graph_builder.h).
inline constexpr int64_t kMaxHostElements = int64_t{1} << 26;
// The engine's limit on the elements of a tensor's shape (engine/tensor
// refuses larger shapes; checking first gives a clearer message).
inline constexpr int64_t kMaxTensorShapeElements = int64_t{1} << 48;

// The element count of `shape`, never overflowing: INVALID_ARGUMENT for a
// negative dimension, RESOURCE_EXHAUSTED when the count (or the product of
// the non-zero dims, which bounds the strides) exceeds `limit`. `what`
// names the value in the message ("a host value", "ConstantOfShape", ...).
absl::StatusOr<int64_t> CheckedNumel(const Shape& shape, int64_t limit,
                                     const std::string& what = "a tensor");

struct HostTensor {
  DType dtype = dtypes::kFloat32;
  Shape shape;
  std::vector<uint8_t> data;

  HostTensor() = default;
  // Zero-filled. The caller has checked the shape (CheckedNumel): this
  // allocates Prod(s) elements.
  HostTensor(DType t, Shape s);
  // A copy of `bytes`, which hold exactly Prod(s) elements of t (checked by
  // the caller); no zero fill first.
  static HostTensor FromBytes(DType t, Shape s, const void* bytes);
  // Zero-filled, after CheckedNumel(s, limit).
  static absl::StatusOr<HostTensor> Zeros(DType t, Shape s, int64_t limit = kMaxHostElements,
                                          const std::string& what = "a host value");

  int64_t numel() const { return kiln::Prod(shape); }
  int ndim() const { return static_cast<int>(shape.size()); }

  // Element i converted to double / int64 (floats truncate toward zero,
  // uint64 above INT64_MAX wraps).
  double GetDouble(int64_t i) const;
  int64_t GetInt(int64_t i) const;
  // Stores v converted to this tensor's dtype (C conversion rules; float16 /
  // bfloat16 round to nearest even; bool is v != 0).
  void SetDouble(int64_t i, double v);
  void SetInt(int64_t i, int64_t v);

  std::vector<int64_t> Int64s() const;
  std::vector<double> Doubles() const;

  static HostTensor FromInt64s(const std::vector<int64_t>& v, Shape shape,
                               DType dtype = dtypes::kInt64);
  static HostTensor FromDoubles(const std::vector<double>& v, Shape shape,
                                DType dtype = dtypes::kFloat64);
  // A 1-D int64 tensor.
  static HostTensor Vector(const std::vector<int64_t>& v) {
    return FromInt64s(v, {static_cast<int64_t>(v.size())});
  }

  // Converts every element to `t` (numpy astype semantics: float -> int
  // truncates; int -> bool is != 0).
  HostTensor Cast(DType t) const;

  // Uploads to `device` (a constant view for one element, a buffer otherwise).
  Tensor ToTensor(Engine* e, const std::string& device) const;

  std::string DebugString() const;
};

// Reads a tensor's data back to the host (realizes it; runs kernels if the
// tensor is not a buffer yet).
absl::StatusOr<HostTensor> ReadBack(Tensor t);

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_HOST_TENSOR_H_

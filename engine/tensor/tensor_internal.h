// Internals shared by the tensor_*.cc files (not part of the API).
#ifndef KILN_ENGINE_TENSOR_TENSOR_INTERNAL_H_
#define KILN_ENGINE_TENSOR_TENSOR_INTERNAL_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"

namespace kiln {

struct Tensor::State {
  Engine* engine = nullptr;
  std::string device;
  UOpRef uop;
  Shape shape;
  DType dtype;
  absl::Status error;
};

struct TensorInternal {
  static Tensor Wrap(std::shared_ptr<Tensor::State> s) { return Tensor(std::move(s)); }
  static Tensor ErrorLike(const Tensor& like, absl::Status s) {
    return Tensor::FromError(like, std::move(s));
  }
};

std::string ShapeStr(const Shape& s);
// An INVALID_ARGUMENT error tensor in place of `t`.
inline Tensor Fail(const Tensor& t, const std::string& msg) {
  return TensorInternal::ErrorLike(t, absl::InvalidArgumentError(msg));
}
// "[1,2,3]".
std::string VecStr(const std::vector<int64_t>& v);
// `v`, or `n` copies of `def` when `v` is empty (per-spatial-dim options).
std::vector<int64_t> OrDefault(const std::vector<int64_t>& v, size_t n, int64_t def);
// Images per batch slice (Tensor::ChunkBatch) of a convolution whose
// intermediates (im2col's copied windows, Winograd's transformed planes)
// take `bytes_per_image`: as many as keep them within kBatchSliceBytes, at
// least 1 -- past that they leave the cache between the kernel that writes
// them and the one that reads them.
inline constexpr double kBatchSliceBytes = 8 << 20;
inline int64_t ImagesPerSlice(double bytes_per_image) {
  if (!(bytes_per_image > 0)) return int64_t{1} << 40;
  const double n = kBatchSliceBytes / bytes_per_image;
  return n < 1 ? 1 : n > 1e12 ? int64_t{1} << 40 : static_cast<int64_t>(n);
}
// Axes [first, first + n).
std::vector<int64_t> AxisRange(int64_t first, int64_t n);
// Checks a per-spatial-dim option: `n` entries, each >= `min`.
absl::Status CheckOption(const char* op, const char* name, const std::vector<int64_t>& v, size_t n,
                         int64_t min);
// Largest element count of a tensor shape (counting only its non-zero dims,
// which also bounds every stride of a view of it): sizes beyond this are
// hostile input, and their products would overflow int64 arithmetic.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 48;
// OK when `s` can be a tensor's shape: INVALID_ARGUMENT for a negative dim,
// RESOURCE_EXHAUSTED beyond kMaxTensorElements. `op` prefixes the message.
absl::Status CheckShape(const Shape& s, const char* op);
// Largest host-built index vector (Arange, iotas): 2^28 elements.
inline constexpr int64_t kMaxHostIota = int64_t{1} << 28;
// The float type float-valued ops compute in (float32 for integer inputs).
DType FloatType(DType t);

}  // namespace kiln

#endif  // KILN_ENGINE_TENSOR_TENSOR_INTERNAL_H_

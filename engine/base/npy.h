// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0):
// the one codec behind the engine's HostTensor files (engine/onnx/npy.h) and
// the client's tensors (clients/npy.h).
//
// Supported: C-order arrays of bool, int8..64, uint8..64, float16, float32 and
// float64, little-endian or byte-order-free ('|'); big-endian files are
// byte-swapped on read. Fortran-order arrays, structured / object / string
// dtypes and truncated or malformed files are rejected with a clear error.
// Writing uses version 1.0 (2.0 when the header needs it), little-endian, the
// data 64-byte aligned. bfloat16 has no NumPy type and cannot be written.
//
// Thread safety: pure functions.
#ifndef KILN_ENGINE_BASE_NPY_H_
#define KILN_ENGINE_BASE_NPY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/base/dtype.h"

namespace kiln {

// A dense row-major little-endian array: `dtype.ItemSize()` bytes per
// element, bool as one byte (0 / 1).
struct NpyArray {
  DType dtype = dtypes::kFloat32;
  std::vector<int64_t> shape;
  std::string data;
};

absl::StatusOr<NpyArray> ParseNpyArray(std::string_view bytes);
absl::StatusOr<NpyArray> ReadNpyArray(const std::string& path);

absl::StatusOr<std::string> SerializeNpyArray(DType dtype, const std::vector<int64_t>& shape,
                                              std::string_view data);
absl::Status WriteNpyArray(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
                           std::string_view data);

}  // namespace kiln

#endif  // KILN_ENGINE_BASE_NPY_H_

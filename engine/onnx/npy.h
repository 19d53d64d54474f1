// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// Supported: C-order arrays of bool, int8..64, uint8..64, float16, float32 and
// float64, little-endian or byte-order-free ('|'); big-endian files are
// byte-swapped on read. Fortran-order arrays, structured / object / string
// dtypes and truncated or malformed files are rejected with a clear error.
// Writing uses version 1.0 (2.0 when the header needs it), little-endian.
// bfloat16 has no NumPy type and cannot be written.
#ifndef KILN_ENGINE_ONNX_NPY_H_
#define KILN_ENGINE_ONNX_NPY_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/onnx/host_tensor.h"

namespace kiln {

absl::StatusOr<HostTensor> ParseNpy(std::string_view bytes);
absl::StatusOr<HostTensor> ReadNpy(const std::string& path);

absl::StatusOr<std::string> SerializeNpy(const HostTensor& t);
absl::Status WriteNpy(const std::string& path, const HostTensor& t);

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_NPY_H_

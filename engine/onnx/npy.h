// NumPy .npy files <-> HostTensor, through the codec of engine/base/npy.h
// (what it supports and rejects is described there).
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

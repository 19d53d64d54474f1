// NumPy .npy files <-> ClientTensor, through the codec of engine/base/npy.h
// (format 1.0 / 2.0 / 3.0 read, 1.0 / 2.0 written; C-order arrays of bool,
// int8..64, uint8..64, float16/32/64, big-endian ones byte-swapped on read).
// Anything else (Fortran order, structured or object dtypes, truncated files)
// is a clear error; BF16 / BYTES tensors cannot be written.
//
// Thread safety: pure functions.
#ifndef KILN_CLIENTS_NPY_H_
#define KILN_CLIENTS_NPY_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "clients/client.h"

namespace kiln {

absl::StatusOr<ClientTensor> ParseNpyTensor(std::string_view bytes);
absl::StatusOr<ClientTensor> ReadNpyTensor(const std::string& path);
absl::StatusOr<std::string> SerializeNpyTensor(const ClientTensor& t);
absl::Status WriteNpyTensor(const std::string& path, const ClientTensor& t);

}  // namespace kiln

#endif  // KILN_CLIENTS_NPY_H_

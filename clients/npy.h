// NumPy .npy files <-> ClientTensor (format 1.0 / 2.0 / 3.0 read, 1.0 / 2.0
// written; little-endian or byte-order-free C-order arrays of bool, int8..64,
// uint8..64, float16/32/64). Anything else (Fortran order, big-endian,
// structured or object dtypes, truncated files) is a clear error.
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

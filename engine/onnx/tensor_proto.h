// Conversions between ONNX TensorProto messages and HostTensor.
//
// Every numeric ONNX element type is supported, in every storage form:
// raw_data, float_data, int32_data (int8/16/32, uint8/16, bool and the bit
// patterns of float16 / bfloat16), int64_data, double_data, uint64_data
// (uint32 / uint64), and external data files (data_location EXTERNAL with
// location / offset / length, resolved relative to the model's directory).
// Strings and complex numbers are rejected with a clear error.
#ifndef KILN_ENGINE_ONNX_TENSOR_PROTO_H_
#define KILN_ENGINE_ONNX_TENSOR_PROTO_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/base/dtype.h"
#include "engine/onnx/host_tensor.h"

namespace onnx {
class SparseTensorProto;
class TensorProto;
}  // namespace onnx

namespace kiln {

// kiln dtype of an ONNX TensorProto.DataType value; nullopt for types kiln
// cannot hold (string, complex, undefined, unknown).
std::optional<DType> DTypeFromOnnx(int onnx_type);
// ONNX TensorProto.DataType of a kiln dtype.
int OnnxTypeOf(DType t);
// "FLOAT", "STRING", ... ("type 42" for unknown values).
std::string OnnxTypeName(int onnx_type);

// Decodes `proto`. `base_dir` is the directory external data paths are
// relative to (the model file's directory; empty: the current directory);
// their location must stay inside it ("..", absolute paths are refused) and
// name a regular file. A tensor larger than this machine's physical memory
// is refused (RESOURCE_EXHAUSTED) before anything is allocated.
absl::StatusOr<HostTensor> HostTensorFromProto(const onnx::TensorProto& proto,
                                               const std::string& base_dir = "");

// The stored bytes of a raw_data or external-data tensor, checked against
// its element type and shape like HostTensorFromProto checks them: a view
// into the proto for raw_data, the file's bytes read into `owned` for
// external data. Uploading these directly skips a host copy of large
// weights. nullopt for a tensor stored in typed fields (float_data, ...).
struct TensorBytes {
  DType dtype;
  Shape shape;
  absl::string_view bytes;
  std::unique_ptr<char[]> owned;  // what `bytes` points into, for external data
};
absl::StatusOr<std::optional<TensorBytes>> TensorBytesFromProto(const onnx::TensorProto& proto,
                                                                const std::string& base_dir = "");

// The dense value of a sparse tensor (a sparse initializer or a Constant's
// sparse_value): indices [NNZ] (linear) or [NNZ, rank]. The dense form is
// built on the host, so its size is bounded by kMaxHostElements before
// anything is allocated (an 89-byte model once asked for 16 GiB of zeros).
// Messages do not name the tensor: callers say which one it is.
absl::StatusOr<HostTensor> DenseFromSparse(const onnx::SparseTensorProto& sparse,
                                           const std::string& base_dir = "");

// Reads a serialized TensorProto file (the test_data_set_*/input_*.pb files
// of ONNX's test suite). `name` (may be null) gets the proto's name field.
absl::StatusOr<HostTensor> ReadTensorProtoFile(const std::string& path,
                                               std::string* name = nullptr);

// Encodes `t` as a TensorProto with raw_data.
void HostTensorToProto(const HostTensor& t, const std::string& name, onnx::TensorProto* proto);

// The largest file ReadFileToString reads by default: protobuf parses at
// most 2 GiB, so a bigger model.onnx could never load (weights beyond that
// belong in external data files).
inline constexpr int64_t kMaxModelFileBytes = (int64_t{1} << 31) - 1;

// Reads a whole regular file into a string, with a bounded read: anything
// else (a FIFO, a device such as /dev/zero, a directory; also through a
// symlink) is refused without blocking (INVALID_ARGUMENT), and so is a file
// larger than `max_bytes` (RESOURCE_EXHAUSTED) -- also one that grows past
// it while being read.
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             int64_t max_bytes = kMaxModelFileBytes);

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_TENSOR_PROTO_H_

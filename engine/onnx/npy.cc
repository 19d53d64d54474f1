#include "engine/onnx/npy.h"

#include "engine/base/npy.h"
#include "engine/base/status.h"

namespace kiln {
namespace {

HostTensor FromArray(NpyArray a) {
  HostTensor t(a.dtype, {});
  t.shape = Shape(a.shape.begin(), a.shape.end());
  t.data.assign(a.data.begin(), a.data.end());
  return t;
}

std::string_view Bytes(const HostTensor& t) {
  return std::string_view(reinterpret_cast<const char*>(t.data.data()), t.data.size());
}

}  // namespace

absl::StatusOr<HostTensor> ParseNpy(std::string_view bytes) {
  ASSIGN_OR_RETURN(NpyArray a, ParseNpyArray(bytes));
  return FromArray(std::move(a));
}

absl::StatusOr<HostTensor> ReadNpy(const std::string& path) {
  ASSIGN_OR_RETURN(NpyArray a, ReadNpyArray(path));
  return FromArray(std::move(a));
}

absl::StatusOr<std::string> SerializeNpy(const HostTensor& t) {
  return SerializeNpyArray(t.dtype, std::vector<int64_t>(t.shape.begin(), t.shape.end()), Bytes(t));
}

absl::Status WriteNpy(const std::string& path, const HostTensor& t) {
  return WriteNpyArray(path, t.dtype, std::vector<int64_t>(t.shape.begin(), t.shape.end()), Bytes(t));
}

}  // namespace kiln

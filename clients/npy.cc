#include "clients/npy.h"

#include <optional>

#include "engine/base/npy.h"

namespace kiln {
namespace {

ClientTensor FromArray(NpyArray a) {
  ClientTensor t;
  t.datatype = a.dtype.KServeName();
  t.shape = std::move(a.shape);
  t.data = std::move(a.data);
  return t;
}

absl::StatusOr<DType> DTypeOf(const ClientTensor& t) {
  std::optional<DType> d = DTypeFromName(t.datatype);
  if (!d || d->KServeName() != t.datatype)
    return absl::InvalidArgumentError("npy: datatype " + t.datatype + " has no NumPy type");
  return *d;
}

}  // namespace

absl::StatusOr<ClientTensor> ParseNpyTensor(std::string_view bytes) {
  auto a = ParseNpyArray(bytes);
  if (!a.ok()) return a.status();
  return FromArray(std::move(*a));
}

absl::StatusOr<ClientTensor> ReadNpyTensor(const std::string& path) {
  auto a = ReadNpyArray(path);
  if (!a.ok()) return a.status();
  return FromArray(std::move(*a));
}

absl::StatusOr<std::string> SerializeNpyTensor(const ClientTensor& t) {
  auto d = DTypeOf(t);
  if (!d.ok()) return d.status();
  return SerializeNpyArray(*d, t.shape, t.data);
}

absl::Status WriteNpyTensor(const std::string& path, const ClientTensor& t) {
  auto d = DTypeOf(t);
  if (!d.ok()) return d.status();
  return WriteNpyArray(path, *d, t.shape, t.data);
}

}  // namespace kiln

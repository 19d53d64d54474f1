// Tensor data to and from the host: uploads (FromData, FromFill), the
// realized buffer and reads of it (ToBytes, CopyBytesTo, ReadHost,
// ToDoubles). Where a device's memory is host memory (the CPU device),
// FromFill and ReadHost work in it directly instead of through a staging copy.
#include "engine/tensor/tensor.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"
#include "engine/tensor/tensor_internal.h"

namespace kiln {
namespace {

// The storage of a tensor that is a buffer or a view of one.
absl::StatusOr<BufferRef> StorageOfBuffer(Engine* e, const UOpRef& u) {
  return e->StorageOf(u->op() == Op::kBuffer ? u : u->src(0));
}

// A host block of n bytes (at least one), not zeroed: FromFill / ReadHost's
// staging where device memory is not host memory.
absl::StatusOr<std::unique_ptr<char[]>> StagingBlock(size_t n) {
  std::unique_ptr<char[]> host(new (std::nothrow) char[std::max<size_t>(n, 1)]);
  if (host == nullptr)
    return absl::ResourceExhaustedError(absl::StrCat("out of host memory staging ", n, " bytes"));
  return host;
}

}  // namespace

Tensor Tensor::FromData(Engine* e, const void* data, size_t nbytes, Shape shape, DType dtype,
                        const std::string& device) {
  Tensor t = Empty(e, shape, dtype, device);
  if (!t.ok()) return t;
  size_t want = static_cast<size_t>(kiln::Prod(shape)) * dtype.ItemSize();
  if (nbytes != want)
    return FromError(t, absl::InvalidArgumentError(absl::StrCat(
                            "FromData: ", nbytes, " bytes given, shape ", ShapeStr(shape), " of ",
                            dtype.Name(), " needs ", want)));
  auto storage = StorageOfBuffer(e, t.uop());
  if (!storage.ok()) return FromError(t, storage.status());
  absl::Status s = (*storage)->CopyIn(data, nbytes);
  if (!s.ok()) return FromError(t, s);
  return t;
}

Tensor Tensor::FromFill(Engine* e, Shape shape, DType dtype, const std::string& device,
                        const std::function<void(void* dst)>& fill) {
  Tensor t = Empty(e, shape, dtype, device);
  if (!t.ok()) return t;
  auto storage = StorageOfBuffer(e, t.uop());
  if (!storage.ok()) return FromError(t, storage.status());
  const size_t n = t.nbytes();
  if ((*storage)->device()->allocator().host_addressable()) {
    absl::StatusOr<void*> dst = (*storage)->Ptr();
    if (!dst.ok()) return FromError(t, dst.status());
    if (n != 0) fill(*dst);
    return t;
  }
  absl::StatusOr<std::unique_ptr<char[]>> host = StagingBlock(n);
  if (!host.ok()) return FromError(t, host.status());
  if (n != 0) fill(host->get());
  absl::Status s = (*storage)->CopyIn(host->get(), n);
  if (!s.ok()) return FromError(t, s);
  return t;
}

absl::StatusOr<BufferRef> Tensor::Buffer() {
  RETURN_IF_ERROR(Realize());
  return StorageOfBuffer(engine(), uop());
}

absl::StatusOr<std::vector<uint8_t>> Tensor::ToBytes() {
  if (!ok()) return status();
  std::vector<uint8_t> out(nbytes());
  RETURN_IF_ERROR(CopyBytesTo(out.data(), out.size()));
  return out;
}

absl::Status Tensor::CopyBytesTo(void* dst, size_t n) {
  if (!ok()) return status();
  if (n != nbytes())
    return absl::InvalidArgumentError(
        absl::StrCat("CopyBytesTo: ", n, " bytes given, the tensor has ", nbytes()));
  ASSIGN_OR_RETURN(BufferRef b, Buffer());
  if (n > 0) RETURN_IF_ERROR(b->CopyOut(dst, n));
  // A JIT capture replays host-side decisions made on data only when a
  // replay reads the same bytes here.
  if (CaptureScope* c = CaptureScope::Current())
    c->NoteHostRead(b, std::string(static_cast<const char*>(dst), n));
  return absl::OkStatus();
}

absl::Status Tensor::ReadHost(const std::function<void(const void* src)>& read) {
  if (!ok()) return status();
  ASSIGN_OR_RETURN(BufferRef b, Buffer());
  const size_t n = nbytes();
  if (CaptureScope::Current() == nullptr && b->device()->allocator().host_addressable()) {
    ASSIGN_OR_RETURN(void* src, b->Ptr());
    read(src);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<char[]> host, StagingBlock(n));
  RETURN_IF_ERROR(CopyBytesTo(host.get(), n));
  read(host.get());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> Tensor::ToDoubles() {
  // float32 is widened on the host: a cast kernel would be one more kernel
  // to compile (0.2 s of clang after `kiln run`'s cold first call).
  if (dtype() == dtypes::kFloat32) {
    absl::StatusOr<std::vector<float>> f = ToVector<float>();
    if (!f.ok()) return f.status();
    return std::vector<double>(f->begin(), f->end());
  }
  Tensor t = dtype() == dtypes::kFloat64 ? *this : Cast(dtypes::kFloat64);
  return t.ToVector<double>();
}

}  // namespace kiln

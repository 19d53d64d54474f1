// The system shared-memory part of the C++ client (client.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "clients/client.h"

namespace kiln {
namespace {

constexpr char kRegion[] = "shared_memory_region";
constexpr char kOffset[] = "shared_memory_offset";
constexpr char kByteSize[] = "shared_memory_byte_size";

void SetParameters(google::protobuf::Map<std::string, inference::InferParameter>* p,
                   const std::string& region, uint64_t byte_size, uint64_t offset) {
  (*p)[kRegion].set_string_param(region);
  (*p)[kByteSize].set_int64_param(static_cast<int64_t>(byte_size));
  if (offset != 0) (*p)[kOffset].set_int64_param(static_cast<int64_t>(offset));
}

}  // namespace

absl::Status KilnClient::RegisterSystemSharedMemory(const std::string& name,
                                                    const std::string& key, uint64_t byte_size,
                                                    uint64_t offset) {
  inference::SystemSharedMemoryRegisterRequest req;
  req.set_name(name);
  req.set_key(key);
  req.set_offset(offset);
  req.set_byte_size(byte_size);
  inference::SystemSharedMemoryRegisterResponse resp;
  auto ctx = NewContext();
  return FromGrpcStatus(stub_->SystemSharedMemoryRegister(ctx.get(), req, &resp));
}

absl::Status KilnClient::UnregisterSystemSharedMemory(const std::string& name) {
  inference::SystemSharedMemoryUnregisterRequest req;
  req.set_name(name);
  inference::SystemSharedMemoryUnregisterResponse resp;
  auto ctx = NewContext();
  return FromGrpcStatus(stub_->SystemSharedMemoryUnregister(ctx.get(), req, &resp));
}

absl::StatusOr<inference::SystemSharedMemoryStatusResponse> KilnClient::SystemSharedMemoryStatus(
    const std::string& name) {
  inference::SystemSharedMemoryStatusRequest req;
  req.set_name(name);
  inference::SystemSharedMemoryStatusResponse resp;
  auto ctx = NewContext();
  grpc::Status s = stub_->SystemSharedMemoryStatus(ctx.get(), req, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

absl::Status SetInputSharedMemory(inference::ModelInferRequest* request,
                                  const std::string& input, const std::string& region,
                                  uint64_t byte_size, uint64_t offset) {
  int index = -1, raw_index = 0;
  for (int i = 0; i < request->inputs_size() && index < 0; ++i) {
    if (request->inputs(i).name() == input) {
      index = i;
    } else if (!request->inputs(i).parameters().count(kRegion)) {
      ++raw_index;  // inputs before it that keep a raw entry
    }
  }
  if (index < 0)
    return absl::NotFoundError(absl::StrCat("the request has no input '", input, "'"));
  auto* in = request->mutable_inputs(index);
  const bool was_shm = in->parameters().count(kRegion) > 0;
  if (request->raw_input_contents_size() == request->inputs_size()) raw_index = index;
  if (!was_shm && raw_index < request->raw_input_contents_size())
    request->mutable_raw_input_contents()->DeleteSubrange(raw_index, 1);
  in->clear_contents();
  SetParameters(in->mutable_parameters(), region, byte_size, offset);
  return absl::OkStatus();
}

void SetOutputSharedMemory(inference::ModelInferRequest* request, const std::string& output,
                           const std::string& region, uint64_t byte_size, uint64_t offset) {
  inference::ModelInferRequest::InferRequestedOutputTensor* out = nullptr;
  for (auto& o : *request->mutable_outputs())
    if (o.name() == output) out = &o;
  if (out == nullptr) {
    out = request->add_outputs();
    out->set_name(output);
  }
  SetParameters(out->mutable_parameters(), region, byte_size, offset);
}

absl::StatusOr<std::unique_ptr<ClientShm>> ClientShm::Create(const std::string& key,
                                                             uint64_t byte_size) {
  if (byte_size == 0 || byte_size > static_cast<uint64_t>(std::numeric_limits<off_t>::max()))
    return absl::InvalidArgumentError(absl::StrCat("bad shared-memory size ", byte_size));
  int fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    int e = errno;
    std::string msg = absl::StrCat("shm_open ", key, ": ", std::strerror(e));
    if (e == EEXIST) return absl::AlreadyExistsError(msg);
    return absl::FailedPreconditionError(msg);
  }
  std::unique_ptr<ClientShm> shm(new ClientShm());
  shm->key_ = key;
  if (ftruncate(fd, static_cast<off_t>(byte_size)) != 0) {
    int e = errno;
    close(fd);
    return absl::ResourceExhaustedError(absl::StrCat("ftruncate ", key, ": ", std::strerror(e)));
  }
  void* p = mmap(nullptr, static_cast<size_t>(byte_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED)
    return absl::ResourceExhaustedError(absl::StrCat("mmap ", key, ": ", std::strerror(e)));
  shm->size_ = byte_size;
  shm->data_ = static_cast<char*>(p);
  return shm;
}

ClientShm::~ClientShm() {
  if (data_ != nullptr) munmap(data_, static_cast<size_t>(size_));
  if (!key_.empty()) shm_unlink(key_.c_str());
}

}  // namespace kiln

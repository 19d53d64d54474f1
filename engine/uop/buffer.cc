#include "engine/uop/buffer.h"

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"

namespace kiln {
namespace {
std::atomic<int64_t> next_buffer_id{1};
}  // namespace

BufferArg::BufferArg(int64_t size, std::string device)
    : id_(next_buffer_id.fetch_add(1)), size_(size), device_(std::move(device)) {}

std::shared_ptr<void> BufferArg::storage() const {
  std::lock_guard<std::mutex> l(mu_);
  return storage_;
}

void BufferArg::set_storage(std::shared_ptr<void> s) const {
  std::lock_guard<std::mutex> l(mu_);
  storage_ = std::move(s);
}

bool BufferArg::Equals(const OpaqueArg& o) const {
  const auto* b = dynamic_cast<const BufferArg*>(&o);
  return b && b->id_ == id_;
}

std::string BufferArg::ToString() const {
  return absl::StrCat("buf", id_, "[", size_, "]@", device_);
}

UOpRef NewBuffer(DType dtype, int64_t size, const std::string& device) {
  return UOp::Make(Op::kBuffer, dtype, {}, Arg(std::make_shared<BufferArg>(size, device)));
}

const BufferArg& BufferOf(const UOp& u) {
  const BufferArg* b = u.arg().As<BufferArg>();
  KILN_CHECK(u.op() == Op::kBuffer && b, "not a BUFFER: ", u.Describe());
  return *b;
}

}  // namespace kiln

// BufferArg: the identity of a tensor-graph buffer (op kBuffer).
//
// A BUFFER UOp names a flat array of `size` elements on a device. Its arg is
// a BufferArg: a unique id (equality is by id), the size and the device name,
// plus a storage slot that the realize layer fills with the device memory
// once it is allocated, so the graph owns what it references. The slot is
// the one mutable part and is written only by the realize layer.
#ifndef KILN_ENGINE_UOP_BUFFER_H_
#define KILN_ENGINE_UOP_BUFFER_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "engine/uop/uop.h"

namespace kiln {

class BufferArg : public OpaqueArg {
 public:
  BufferArg(int64_t size, std::string device);
  int64_t id() const { return id_; }
  int64_t size() const { return size_; }
  const std::string& device() const { return device_; }

  // The device memory (a runtime buffer, type-erased), or null.
  std::shared_ptr<void> storage() const;
  void set_storage(std::shared_ptr<void> s) const;

  size_t Hash() const override { return std::hash<int64_t>()(id_); }
  bool Equals(const OpaqueArg& o) const override;
  std::string ToString() const override;

 private:
  const int64_t id_;
  const int64_t size_;
  const std::string device_;
  mutable std::mutex mu_;
  mutable std::shared_ptr<void> storage_;
};

// A new BUFFER UOp of `size` elements of `dtype` on `device`.
UOpRef NewBuffer(DType dtype, int64_t size, const std::string& device);
// The BufferArg of a BUFFER UOp (CHECK-fails for other ops).
const BufferArg& BufferOf(const UOp& u);

}  // namespace kiln

#endif  // KILN_ENGINE_UOP_BUFFER_H_

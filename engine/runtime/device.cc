#include "engine/runtime/device.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/runtime/cpu_device.h"
#include "engine/runtime/cuda_device.h"
#include "engine/runtime/interpreter.h"
#include "engine/runtime/opencl_device.h"

namespace kiln {

// ---------------------------------------------------------------- Allocator

Allocator::~Allocator() {
  absl::MutexLock lock(&mu_);
  KILN_CHECK(lru_.empty(), "Allocator subclass destroyed without calling ClearCache(): ",
             lru_.size(), " cached blocks leaked");
}

absl::StatusOr<void*> Allocator::Alloc(size_t nbytes) {
  {
    absl::MutexLock lock(&mu_);
    ++stats_.allocations;
    RETURN_IF_ERROR(CheckRoomLocked(nbytes, "allocating a device buffer"));
    // Counted as in use from here on, so that concurrent Allocs see it.
    stats_.allocated_bytes += nbytes;
    // Equal keys keep insertion order in a multimap, so the last block of
    // this size is the most recently freed one (warmest in the CPU caches).
    auto hi = cache_.upper_bound(nbytes);
    if (hi != cache_.begin() && std::prev(hi)->first == nbytes) {
      auto it = std::prev(hi);
      void* ptr = it->second.second;
      lru_.erase(it->second.first);
      cache_.erase(it);
      stats_.cached_bytes -= nbytes;
      ++stats_.cache_hits;
      return ptr;
    }
    // A new block: cached ones make room for it under the memory limit
    // (CheckRoomLocked made sure that in-use bytes fit).
    if (memory_limit_ != 0 && stats_.cached_bytes > memory_limit_ - stats_.allocated_bytes)
      EvictLocked(memory_limit_ - stats_.allocated_bytes);
  }
  absl::StatusOr<void*> ptr = RawAlloc(nbytes);
  if (!ptr.ok()) {
    // Out of memory (probably): give back everything cached and retry once.
    ClearCache();
    ptr = RawAlloc(nbytes);
  }
  if (!ptr.ok()) {
    absl::MutexLock lock(&mu_);
    stats_.allocated_bytes -= nbytes;
  }
  return ptr;
}

void Allocator::Free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  {
    absl::MutexLock lock(&mu_);
    KILN_CHECK(stats_.allocated_bytes >= nbytes, "Allocator::Free of more bytes than allocated");
    stats_.allocated_bytes -= nbytes;
    if (nbytes <= cache_limit_) {
      uint64_t seq = seq_++;
      cache_.emplace(nbytes, std::make_pair(seq, ptr));
      lru_.emplace(seq, std::make_pair(nbytes, ptr));
      stats_.cached_bytes += nbytes;
      EvictLocked(cache_limit_);
      return;
    }
  }
  RawFree(ptr, nbytes);  // larger than the whole cache: never kept
}

void Allocator::EvictLocked(size_t target) {
  // Besides the byte limit, bound the number of cached blocks (zero-byte
  // buffers still hold real memory).
  constexpr size_t kMaxCachedBlocks = size_t{1} << 16;
  while (!lru_.empty() && (stats_.cached_bytes > target || target == 0 ||
                           lru_.size() > kMaxCachedBlocks)) {
    auto oldest = lru_.begin();
    const uint64_t seq = oldest->first;
    const size_t size = oldest->second.first;
    void* ptr = oldest->second.second;
    lru_.erase(oldest);
    auto range = cache_.equal_range(size);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second.first == seq) {
        cache_.erase(it);
        break;
      }
    }
    stats_.cached_bytes -= size;
    RawFree(ptr, size);
  }
}

void Allocator::ClearCache() {
  absl::MutexLock lock(&mu_);
  EvictLocked(0);
}

Allocator::Stats Allocator::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void Allocator::set_memory_limit(size_t bytes) {
  absl::MutexLock lock(&mu_);
  memory_limit_ = bytes;
}

size_t Allocator::memory_limit() const {
  absl::MutexLock lock(&mu_);
  return memory_limit_;
}

absl::Status Allocator::CheckRoom(size_t nbytes, const std::string& what) {
  absl::MutexLock lock(&mu_);
  return CheckRoomLocked(nbytes, what);
}

absl::Status Allocator::CheckRoomLocked(size_t nbytes, const std::string& what) {
  const size_t used = stats_.allocated_bytes;
  if (memory_limit_ == 0 || (used <= memory_limit_ && nbytes <= memory_limit_ - used))
    return absl::OkStatus();
  ++stats_.refusals;
  return absl::ResourceExhaustedError(absl::StrCat(what, ": ", nbytes,
                                                   " more bytes would exceed the memory limit of ",
                                                   memory_limit_, " bytes (", used, " in use)"));
}

// ------------------------------------------------------------------- Buffer

uint64_t Buffer::NextId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

Buffer::~Buffer() {
  if (ptr_ != nullptr) device_->allocator().Free(ptr_, nbytes_);
}

absl::StatusOr<void*> Buffer::Ptr() {
  if (ptr_ == nullptr) {
    ASSIGN_OR_RETURN(ptr_, device_->allocator().Alloc(nbytes_));
  }
  return ptr_;
}

absl::Status Buffer::CopyIn(const void* host, size_t nbytes) {
  if (nbytes > nbytes_) {
    return absl::InvalidArgumentError(absl::StrCat("Buffer::CopyIn of ", nbytes,
                                                   " bytes into a buffer of ", nbytes_));
  }
  ASSIGN_OR_RETURN(void* ptr, Ptr());
  if (nbytes == 0) return absl::OkStatus();
  return device_->allocator().CopyIn(ptr, host, nbytes);
}

absl::Status Buffer::CopyOut(void* host, size_t nbytes) {
  if (nbytes > nbytes_) {
    return absl::InvalidArgumentError(absl::StrCat("Buffer::CopyOut of ", nbytes,
                                                   " bytes from a buffer of ", nbytes_));
  }
  ASSIGN_OR_RETURN(void* ptr, Ptr());
  if (nbytes == 0) return absl::OkStatus();
  return device_->allocator().CopyOut(host, ptr, nbytes);
}

// ------------------------------------------------------------------ Program

absl::Status Program::LaunchChecked(const std::vector<void*>& bufs,
                                    const std::vector<size_t>& /*nbytes*/,
                                    const std::vector<int64_t>& vars, const LaunchDims& dims) {
  return Launch(bufs, vars, dims, /*wait=*/true, /*seconds=*/nullptr);
}

// ----------------------------------------------------------------- Compiler

absl::StatusOr<std::vector<std::string>> Compiler::CompileMany(
    const std::vector<std::string>& sources) {
  std::vector<std::string> binaries;
  binaries.reserve(sources.size());
  for (const std::string& source : sources) {
    ASSIGN_OR_RETURN(std::string binary, Compile(source));
    binaries.push_back(std::move(binary));
  }
  return binaries;
}

// ----------------------------------------------------------- DeviceRegistry

namespace {

std::string Upper(const std::string& s) {
  std::string r = s;
  for (char& c : r) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return r;
}

}  // namespace

std::unique_ptr<DeviceRegistry> DeviceRegistry::WithDefaults() {
  auto registry = std::make_unique<DeviceRegistry>();
  registry->Register("CPU", []() -> absl::StatusOr<std::unique_ptr<Device>> {
    return std::unique_ptr<Device>(std::make_unique<CpuDevice>());
  });
  registry->Register("INTERP", []() -> absl::StatusOr<std::unique_ptr<Device>> {
    return std::unique_ptr<Device>(std::make_unique<InterpreterDevice>());
  });
  // GPU devices load their libraries with dlopen: Get fails with a clear
  // error where there is no driver / ICD.
  registry->Register("OPENCL", []() -> absl::StatusOr<std::unique_ptr<Device>> {
    ASSIGN_OR_RETURN(std::unique_ptr<OpenClDevice> d, OpenClDevice::Create({}));
    return std::unique_ptr<Device>(std::move(d));
  });
  registry->Register("CUDA", []() -> absl::StatusOr<std::unique_ptr<Device>> {
    ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> d, CudaDevice::Create({}));
    return std::unique_ptr<Device>(std::move(d));
  });
  return registry;
}

void DeviceRegistry::Register(const std::string& name, Factory factory) {
  absl::MutexLock lock(&mu_);
  factories_[Upper(name)] = std::move(factory);
}

absl::StatusOr<Device*> DeviceRegistry::Get(const std::string& name) {
  const std::string key = Upper(name);
  absl::MutexLock lock(&mu_);
  auto dev = devices_.find(key);
  if (dev != devices_.end()) return dev->second.get();
  auto factory = factories_.find(key);
  if (factory == factories_.end()) {
    std::vector<std::string> names;
    for (const auto& [n, f] : factories_) names.push_back(n);
    return absl::NotFoundError(absl::StrCat("unknown device '", name,
                                            "'; registered: ", absl::StrJoin(names, ", ")));
  }
  // Created under the lock so that concurrent first uses create one device.
  absl::StatusOr<std::unique_ptr<Device>> created = factory->second();
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat("creating device '", key, "': ", created.status().message()));
  }
  if (*created == nullptr) {
    return absl::InternalError(absl::StrCat("factory of device '", key, "' returned null"));
  }
  Device* ptr = created->get();
  devices_[key] = std::move(created).value();
  return ptr;
}

std::vector<std::string> DeviceRegistry::Names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& [n, f] : factories_) names.push_back(n);
  return names;
}

}  // namespace kiln

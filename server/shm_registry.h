// ShmRegistry: the server side of Triton's system shared-memory extension.
// A client creates a POSIX shared-memory object (shm_open), registers a
// slice of it under a region name, and then names the region in an infer
// request instead of sending tensor bytes (see infer_codec.h).
//
// Registration is confined by the operator: a key is accepted only if it
// starts with one of ShmRegistryOptions::allowed_prefixes (kilnd's
// --shm-allow); with no prefix, shared memory is off and Register answers
// FAILED_PRECONDITION naming the flag. Everything a client sends is checked
// before use:
//   * name: 1..kMaxShmNameBytes bytes; a second region of the same name is
//     ALREADY_EXISTS; at most max_regions regions (RESOURCE_EXHAUSTED);
//   * key: a POSIX shm name, "/" then 1..kMaxShmKeyBytes-1 bytes, no other
//     '/' and no NUL; not allowed: PERMISSION_DENIED; no such object:
//     NOT_FOUND;
//   * the object: a regular file (fstat) of non-zero size; byte_size > 0,
//     offset + byte_size without overflow and within the object's size
//     (INVALID_ARGUMENT).
// The slice is mapped read-write (MAP_SHARED) from the page below `offset`.
//
// Lifetime: a region is a shared_ptr<const ShmRegion>. Unregister removes
// the name at once; the mapping is unmapped when the last holder (a request
// in flight) drops it, so an unregister never pulls memory from under a
// request.
//
// Bytes move only through ShmRegion::Read / Write, which copy with a
// SIGBUS guard: a client that shrinks (ftruncate) its object after
// registering makes the copy fail with FAILED_PRECONDITION instead of
// killing the process. The guard is the one process-wide effect of this
// file: the first copy installs a SIGBUS handler that unwinds guarded
// copies (sigsetjmp / siglongjmp) and passes every other SIGBUS to the
// handler that was installed before it (or the default action).
//
// Thread safety: ShmRegistry is thread-safe; ShmRegion is immutable after
// construction and safe to share between threads (concurrent writes to the
// same bytes are the client's race, as with any shared memory).
#ifndef KILN_SERVER_SHM_REGISTRY_H_
#define KILN_SERVER_SHM_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace kiln {

inline constexpr size_t kMaxShmNameBytes = 128;  // a region's name
inline constexpr size_t kMaxShmKeyBytes = 255;   // NAME_MAX of /dev/shm, '/' included

struct ShmRegistryOptions {
  // Keys must start with one of these ("/kiln_", or "/" for any). Empty:
  // shared memory is disabled.
  std::vector<std::string> allowed_prefixes;
  int max_regions = 64;
};

// What the status call reports of a region (Triton's RegionStatus).
struct ShmRegionInfo {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

// OK if `key` is a POSIX shm name kiln accepts (see the file comment);
// INVALID_ARGUMENT otherwise. Also checks --shm-allow prefixes (a prefix
// is "/" plus a possibly empty rest).
absl::Status CheckShmKey(absl::string_view key, bool prefix = false);

// One registered slice [offset, offset + byte_size) of a shared-memory
// object, mapped until destruction.
class ShmRegion {
 public:
  ~ShmRegion();
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  const ShmRegionInfo& info() const { return info_; }
  // Whether [offset, offset + size) lies inside the region (no overflow).
  bool Contains(uint64_t offset, uint64_t size) const;
  // Copies `size` bytes at `offset` of the region into `dst`. INVALID_ARGUMENT
  // outside the region; FAILED_PRECONDITION if the object shrank.
  absl::Status Read(uint64_t offset, uint64_t size, char* dst) const;
  // Copies `src` to `offset` of the region (same errors as Read).
  absl::Status Write(uint64_t offset, absl::string_view src) const;

 private:
  friend class ShmRegistry;
  ShmRegion() = default;

  ShmRegionInfo info_;
  void* map_ = nullptr;     // page-aligned start of the mapping
  size_t map_bytes_ = 0;
  char* data_ = nullptr;    // map_ + (offset % page size): the region's byte 0
};

class ShmRegistry {
 public:
  explicit ShmRegistry(ShmRegistryOptions options);

  bool enabled() const { return !options_.allowed_prefixes.empty(); }
  const ShmRegistryOptions& options() const { return options_; }

  absl::Status Register(const std::string& name, const std::string& key, uint64_t offset,
                        uint64_t byte_size);
  // `name` empty: every region. NOT_FOUND for an unknown name.
  absl::Status Unregister(const std::string& name);
  // `name` empty: every region (sorted by name). NOT_FOUND for an unknown name.
  absl::StatusOr<std::vector<ShmRegionInfo>> Status(const std::string& name) const;
  // The region, kept mapped while the caller holds it. NOT_FOUND if unknown.
  absl::StatusOr<std::shared_ptr<const ShmRegion>> Get(const std::string& name) const;
  size_t size() const;

 private:
  absl::Status CheckAllowed(const std::string& key) const;
  // ALREADY_EXISTS for a registered name, RESOURCE_EXHAUSTED when full.
  absl::Status CheckRoom(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ShmRegistryOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<const ShmRegion>> regions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kiln

#endif  // KILN_SERVER_SHM_REGISTRY_H_

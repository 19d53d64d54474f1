// DiskCache: a directory of compiled kernel binaries keyed by content hash,
// shared by the GPU compilers (CUDA cubin / PTX, OpenCL program binaries).
// Entries appear atomically (write to a temporary name, then rename), so
// several processes may share one directory. A directory that cannot be
// created falls back to /tmp/kiln-cache-<uid>/<leaf>; when that fails too
// the cache is disabled (Get misses, Put does nothing). Thread-safe.
#ifndef KILN_ENGINE_RUNTIME_DISK_CACHE_H_
#define KILN_ENGINE_RUNTIME_DISK_CACHE_H_

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace kiln {

class DiskCache {
 public:
  // `dir` is created (with parents) on first use; `leaf` names the fallback.
  DiskCache(std::string dir, std::string leaf);

  // The entry for `key` (any string; hashed), or nullopt.
  std::optional<std::string> Get(const std::string& key);
  // Stores `value` under `key` (best effort: errors only disable caching).
  void Put(const std::string& key, const std::string& value);
  // The directory in use ("" while unused or when disabled).
  std::string dir();

  // 128-bit content hash of `s` as 32 hex digits.
  static std::string Hash(const std::string& s);

 private:
  bool Ready();

  absl::Mutex mu_;
  std::string dir_ ABSL_GUARDED_BY(mu_);
  const std::string leaf_;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  bool enabled_ ABSL_GUARDED_BY(mu_) = false;
};

// A suffix for a temporary file next to its final path (".tmp.PID.SALT.N"),
// unique across processes that share a cache directory even when they run
// in PID namespaces of their own (Bazel's sandboxes give every test a low,
// equal PID): SALT is random per process.
std::string UniqueTempSuffix();

}  // namespace kiln

#endif  // KILN_ENGINE_RUNTIME_DISK_CACHE_H_

// ShmObject: a POSIX shared-memory object a test creates as a client would
// (shm_open + ftruncate + mmap), unlinked and unmapped on destruction.
//
// Thread safety: thread-compatible.
#ifndef KILN_SERVER_TESTING_SHM_OBJECT_H_
#define KILN_SERVER_TESTING_SHM_OBJECT_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kiln::testing {

class ShmObject {
 public:
  // A new object "/<prefix><pid>_<time>_<n>" of `bytes` bytes (zeroed;
  // the time part keeps names apart across runs in a PID namespace).
  ShmObject(const std::string& prefix, size_t bytes) : bytes_(bytes) {
    static std::atomic<int> counter{0};
    key_ = absl::StrCat("/", prefix, getpid(), "_", absl::ToUnixMicros(absl::Now()), "_",
                        counter++);
    int fd = shm_open(key_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
      error_ = absl::StrCat("shm_open ", key_, ": ", std::strerror(errno));
      return;
    }
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      error_ = absl::StrCat("ftruncate ", key_, ": ", std::strerror(errno));
    } else if (bytes > 0) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) data_ = static_cast<char*>(p);
      else error_ = absl::StrCat("mmap ", key_, ": ", std::strerror(errno));
    }
    close(fd);
  }
  ~ShmObject() {
    if (data_ != nullptr) munmap(data_, bytes_);
    Unlink();
  }
  ShmObject(const ShmObject&) = delete;
  ShmObject& operator=(const ShmObject&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& key() const { return key_; }
  char* data() const { return data_; }
  size_t size() const { return bytes_; }
  void Unlink() { shm_unlink(key_.c_str()); }
  // Truncates the object (as a misbehaving client might) to `bytes`.
  bool Truncate(size_t bytes) {
    int fd = shm_open(key_.c_str(), O_RDWR, 0);
    if (fd < 0) return false;
    bool ok = ftruncate(fd, static_cast<off_t>(bytes)) == 0;
    close(fd);
    return ok;
  }

 private:
  std::string key_;
  std::string error_;
  size_t bytes_ = 0;
  char* data_ = nullptr;
};

}  // namespace kiln::testing

#endif  // KILN_SERVER_TESTING_SHM_OBJECT_H_

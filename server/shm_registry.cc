#include "server/shm_registry.h"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "server/echo.h"

namespace kiln {
namespace {

// ---- the SIGBUS guard of Read / Write (see the header) ----

// volatile: the compiler must not drop the store before the memcpy (it
// knows memcpy does not read it, but the signal handler does).
thread_local sigjmp_buf* volatile t_guard = nullptr;
struct sigaction g_previous;

void OnSigbus(int sig, siginfo_t* info, void* context) {
  if (t_guard != nullptr) siglongjmp(*t_guard, 1);
  // Not a guarded copy: what would have happened without us.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) {
      g_previous.sa_sigaction(sig, info, context);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  signal(SIGBUS, SIG_DFL);
  raise(SIGBUS);
}

void InstallGuard() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = &OnSigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_previous);
  });
}

// memcpy that returns false instead of dying when a page of the mapping is
// gone (the object was truncated under it).
bool GuardedCopy(void* dst, const void* src, size_t n) {
  InstallGuard();
  sigjmp_buf jump;
  if (sigsetjmp(jump, 1) != 0) {
    t_guard = nullptr;
    return false;
  }
  t_guard = &jump;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // the copy stays inside
  std::memcpy(dst, src, n);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_guard = nullptr;
  return true;
}

std::string ErrnoText(int e) { return std::strerror(e); }

}  // namespace

absl::Status CheckShmKey(absl::string_view key, bool prefix) {
  const char* what = prefix ? "--shm-allow prefix" : "shared-memory key";
  if (key.empty() || key[0] != '/')
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", Echo(key), "' must start with '/' (a POSIX shm name)"));
  if (key.size() > kMaxShmKeyBytes)
    return absl::InvalidArgumentError(absl::StrCat(what, " '", Echo(key), "' is longer than ",
                                                   kMaxShmKeyBytes, " bytes"));
  if (!prefix && key.size() < 2)
    return absl::InvalidArgumentError(absl::StrCat(what, " '/' names no object"));
  absl::string_view rest = key.substr(1);
  if (rest.find('/') != absl::string_view::npos || rest.find('\0') != absl::string_view::npos)
    return absl::InvalidArgumentError(absl::StrCat(
        what, " '", Echo(key), "' may hold no further '/' or NUL after the leading '/'"));
  if (!prefix && (rest == "." || rest == ".."))
    return absl::InvalidArgumentError(absl::StrCat(what, " '", Echo(key), "' names no object"));
  return absl::OkStatus();
}

ShmRegion::~ShmRegion() {
  if (map_ != nullptr) munmap(map_, map_bytes_);
}

bool ShmRegion::Contains(uint64_t offset, uint64_t size) const {
  return offset <= info_.byte_size && size <= info_.byte_size - offset;
}

absl::Status ShmRegion::Read(uint64_t offset, uint64_t size, char* dst) const {
  if (!Contains(offset, size))
    return absl::InvalidArgumentError(
        absl::StrCat("[", offset, ", ", offset, " + ", size, ") is outside region '",
                     Echo(info_.name), "' of ", info_.byte_size, " bytes"));
  if (size == 0) return absl::OkStatus();
  if (!GuardedCopy(dst, data_ + offset, static_cast<size_t>(size)))
    return absl::FailedPreconditionError(
        absl::StrCat("shared-memory object '", Echo(info_.key), "' of region '",
                     Echo(info_.name), "' shrank below the registered slice"));
  return absl::OkStatus();
}

absl::Status ShmRegion::Write(uint64_t offset, absl::string_view src) const {
  if (!Contains(offset, src.size()))
    return absl::InvalidArgumentError(
        absl::StrCat("[", offset, ", ", offset, " + ", src.size(), ") is outside region '",
                     Echo(info_.name), "' of ", info_.byte_size, " bytes"));
  if (src.empty()) return absl::OkStatus();
  if (!GuardedCopy(data_ + offset, src.data(), src.size()))
    return absl::FailedPreconditionError(
        absl::StrCat("shared-memory object '", Echo(info_.key), "' of region '",
                     Echo(info_.name), "' shrank below the registered slice"));
  return absl::OkStatus();
}

ShmRegistry::ShmRegistry(ShmRegistryOptions options) : options_(std::move(options)) {}

absl::Status ShmRegistry::CheckAllowed(const std::string& key) const {
  if (!enabled())
    return absl::FailedPreconditionError(
        "system shared memory is disabled: start kilnd with --shm-allow=PREFIX (keys such "
        "as /PREFIX... may then be registered)");
  for (const std::string& p : options_.allowed_prefixes)
    if (absl::StartsWith(key, p)) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("shared-memory key '", Echo(key), "' is not allowed (--shm-allow: ",
                   Echo(absl::StrJoin(options_.allowed_prefixes, ",")), ")"));
}

absl::Status ShmRegistry::Register(const std::string& name, const std::string& key,
                                   uint64_t offset, uint64_t byte_size) {
  if (!enabled()) return CheckAllowed(key);
  if (name.empty() || name.size() > kMaxShmNameBytes)
    return absl::InvalidArgumentError(absl::StrCat("region name '", Echo(name), "' must have 1..",
                                                   kMaxShmNameBytes, " bytes"));
  if (absl::Status s = CheckShmKey(key); !s.ok()) return s;
  if (absl::Status s = CheckAllowed(key); !s.ok()) return s;
  if (byte_size == 0)
    return absl::InvalidArgumentError(absl::StrCat("region '", Echo(name), "': byte_size is 0"));
  if (offset > std::numeric_limits<uint64_t>::max() - byte_size ||
      offset + byte_size > static_cast<uint64_t>(std::numeric_limits<off_t>::max()))
    return absl::InvalidArgumentError(absl::StrCat("region '", Echo(name), "': offset ", offset,
                                                   " + byte_size ", byte_size, " overflows"));
  {
    absl::MutexLock l(&mu_);
    RETURN_IF_ERROR(CheckRoom(name));
  }
  int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0) {
    int e = errno;
    std::string msg = absl::StrCat("cannot open shared-memory object '", Echo(key),
                                   "' for region '", Echo(name), "': ", ErrnoText(e));
    if (e == ENOENT) return absl::NotFoundError(msg);
    if (e == EACCES || e == EPERM) return absl::PermissionDeniedError(msg);
    return absl::FailedPreconditionError(msg);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot stat shared-memory object '", Echo(key), "': ", ErrnoText(e)));
  }
  const uint64_t object_size = st.st_size > 0 ? static_cast<uint64_t>(st.st_size) : 0;
  if (!S_ISREG(st.st_mode) || object_size == 0 || offset + byte_size > object_size) {
    close(fd);
    if (!S_ISREG(st.st_mode) || object_size == 0)
      return absl::InvalidArgumentError(absl::StrCat("shared-memory object '", Echo(key),
                                                     "' is not a regular object of non-zero size"));
    return absl::InvalidArgumentError(absl::StrCat(
        "region '", Echo(name), "': [", offset, ", ", offset + byte_size, ") is past the end of '",
        Echo(key), "' (", object_size, " bytes)"));
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t start = offset - offset % page;
  const uint64_t length = offset + byte_size - start;
  if (length > std::numeric_limits<size_t>::max()) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("region '", Echo(name), "' is too large"));
  }
  void* map = mmap(nullptr, static_cast<size_t>(length), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   static_cast<off_t>(start));
  int map_errno = errno;
  close(fd);  // the mapping keeps the object
  if (map == MAP_FAILED)
    return absl::ResourceExhaustedError(absl::StrCat("cannot map shared-memory object '",
                                                     Echo(key), "': ", ErrnoText(map_errno)));
  std::shared_ptr<ShmRegion> region(new ShmRegion());
  region->info_ = {name, key, offset, byte_size};
  region->map_ = map;
  region->map_bytes_ = static_cast<size_t>(length);
  region->data_ = static_cast<char*>(map) + (offset - start);
  absl::MutexLock l(&mu_);
  // Checked again: another Register may have run while this one mapped.
  RETURN_IF_ERROR(CheckRoom(name));
  regions_[name] = std::move(region);
  return absl::OkStatus();
}

absl::Status ShmRegistry::CheckRoom(const std::string& name) const {
  if (regions_.count(name))
    return absl::AlreadyExistsError(
        absl::StrCat("shared-memory region '", Echo(name), "' is already registered"));
  if (regions_.size() >= static_cast<size_t>(std::max(options_.max_regions, 0)))
    return absl::ResourceExhaustedError(absl::StrCat(
        "already ", regions_.size(), " shared-memory regions registered (--shm-max-regions)"));
  return absl::OkStatus();
}

absl::Status ShmRegistry::Unregister(const std::string& name) {
  std::map<std::string, std::shared_ptr<const ShmRegion>> dropped;  // unmapped outside the lock
  absl::MutexLock l(&mu_);
  if (name.empty()) {
    dropped.swap(regions_);
    return absl::OkStatus();
  }
  auto it = regions_.find(name);
  if (it == regions_.end())
    return absl::NotFoundError(
        absl::StrCat("no shared-memory region '", Echo(name), "' is registered"));
  dropped.insert(regions_.extract(it));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ShmRegionInfo>> ShmRegistry::Status(const std::string& name) const {
  std::vector<ShmRegionInfo> out;
  absl::MutexLock l(&mu_);
  if (name.empty()) {
    for (const auto& [n, r] : regions_) out.push_back(r->info());
    return out;
  }
  auto it = regions_.find(name);
  if (it == regions_.end())
    return absl::NotFoundError(
        absl::StrCat("no shared-memory region '", Echo(name), "' is registered"));
  out.push_back(it->second->info());
  return out;
}

absl::StatusOr<std::shared_ptr<const ShmRegion>> ShmRegistry::Get(const std::string& name) const {
  absl::MutexLock l(&mu_);
  auto it = regions_.find(name);
  if (it == regions_.end())
    return absl::NotFoundError(
        absl::StrCat("no shared-memory region '", Echo(name), "' is registered"));
  return it->second;
}

size_t ShmRegistry::size() const {
  absl::MutexLock l(&mu_);
  return regions_.size();
}

}  // namespace kiln

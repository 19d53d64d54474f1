#include "engine/runtime/disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

bool MakeDirs(const std::string& path) {
  if (path.empty()) return false;
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string prefix = path.substr(0, pos);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && access(path.c_str(), W_OK) == 0;
}

// 64-bit FNV-1a, seeded.
uint64_t Fnv(const std::string& s, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  // Final avalanche (splitmix64).
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

}  // namespace

DiskCache::DiskCache(std::string dir, std::string leaf)
    : dir_(std::move(dir)), leaf_(std::move(leaf)) {}

std::string DiskCache::Hash(const std::string& s) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(Fnv(s, 0)),
                static_cast<unsigned long long>(Fnv(s, 0x6b696c6e2d676275ULL)));
  return buf;
}

bool DiskCache::Ready() {
  absl::MutexLock lock(&mu_);
  if (initialized_) return enabled_;
  initialized_ = true;
  if (MakeDirs(dir_)) {
    enabled_ = true;
  } else {
    std::string fallback = absl::StrCat("/tmp/kiln-cache-", getuid(), "/", leaf_);
    enabled_ = MakeDirs(fallback);
    if (enabled_) dir_ = fallback;
  }
  return enabled_;
}

std::string DiskCache::dir() {
  if (!Ready()) return "";
  absl::MutexLock lock(&mu_);
  return dir_;
}

std::optional<std::string> DiskCache::Get(const std::string& key) {
  std::string d = dir();
  if (d.empty()) return std::nullopt;
  std::ifstream in(absl::StrCat(d, "/", Hash(key)), std::ios::binary);
  if (!in.good()) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

std::string UniqueTempSuffix() {
  static const uint64_t salt = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(".tmp.", getpid(), ".", absl::Hex(salt), ".", counter.fetch_add(1));
}

void DiskCache::Put(const std::string& key, const std::string& value) {
  std::string d = dir();
  if (d.empty()) return;
  std::string path = absl::StrCat(d, "/", Hash(key));
  std::string tmp = path + UniqueTempSuffix();
  int fd = open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return;
  size_t done = 0;
  bool ok = true;
  while (done < value.size()) {
    ssize_t w = write(fd, value.data() + done, value.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ok = false;
      break;
    }
    done += static_cast<size_t>(w);
  }
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) unlink(tmp.c_str());
}

}  // namespace kiln

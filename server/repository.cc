#include "server/repository.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/echo.h"

namespace kiln {
namespace {

bool IsDir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::StatusOr<std::vector<std::string>> ListDirs(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr)
    return absl::NotFoundError(absl::StrCat("cannot read directory ", path, ": ",
                                            std::strerror(errno)));
  std::vector<std::string> out;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    if (IsDir(path + "/" + name)) out.push_back(name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

bool ModelRepository::ValidModelName(const std::string& name) {
  if (name.empty() || name.size() > 200 || name[0] == '.') return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
      return false;
  return true;
}

absl::StatusOr<std::vector<std::string>> ModelRepository::ListModels() const {
  auto dirs = ListDirs(root_);
  if (!dirs.ok()) return dirs.status();
  std::vector<std::string> out;
  for (const std::string& d : *dirs)
    if (ValidModelName(d)) out.push_back(d);
  return out;
}

bool ModelRepository::HasModel(const std::string& name) const {
  return ValidModelName(name) && IsDir(root_ + "/" + name);
}

absl::StatusOr<std::vector<int64_t>> ModelRepository::ListVersions(const std::string& model) const {
  if (!ValidModelName(model))
    return absl::NotFoundError("invalid model name '" + Echo(model) + "'");
  auto dirs = ListDirs(root_ + "/" + model);
  if (!dirs.ok()) return dirs.status();
  std::vector<int64_t> out;
  for (const std::string& d : *dirs) {
    int64_t v;
    if (std::all_of(d.begin(), d.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
        absl::SimpleAtoi(d, &v))
      out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ModelRepository::ConfigPath(const std::string& model) const {
  return root_ + "/" + model + "/config.pbtxt";
}

absl::StatusOr<std::optional<std::string>> ModelRepository::ReadConfig(
    const std::string& model) const {
  if (!ValidModelName(model))
    return absl::NotFoundError("invalid model name '" + Echo(model) + "'");
  std::string path = ConfigPath(model);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::optional<std::string>();
  // Non-blocking open: a FIFO without a writer would block a plain open
  // (and with it every later load).
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return absl::PermissionDeniedError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  std::string text;
  absl::Status s;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    s = absl::InvalidArgumentError(path + " is not a regular file");
  } else {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    // Bounded: st_size can lie (it is 0 for many special files), so read at
    // most one byte past the limit.
    char buf[1 << 16];
    while (s.ok()) {
      ssize_t r = ::read(fd, buf, sizeof(buf));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) s = absl::PermissionDeniedError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
      if (r <= 0) break;
      text.append(buf, static_cast<size_t>(r));
      if (static_cast<int64_t>(text.size()) > kMaxConfigBytes)
        s = absl::InvalidArgumentError(absl::StrCat(path, " is larger than ", kMaxConfigBytes >> 20, " MiB"));
    }
  }
  ::close(fd);
  if (!s.ok()) return s;
  return std::optional<std::string>(std::move(text));
}

std::string ModelRepository::ModelFile(const std::string& model, int64_t version,
                                       const std::string& filename) const {
  return absl::StrCat(root_, "/", model, "/", version, "/", filename);
}

}  // namespace kiln

#include "server/repository.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

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
  if (!ValidModelName(model)) return absl::NotFoundError("invalid model name '" + model + "'");
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
  if (!ValidModelName(model)) return absl::NotFoundError("invalid model name '" + model + "'");
  std::string path = ConfigPath(model);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::optional<std::string>();
  if (st.st_size > (1 << 20)) return absl::InvalidArgumentError(path + " is larger than 1 MiB");
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::PermissionDeniedError("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return std::optional<std::string>(ss.str());
}

std::string ModelRepository::ModelFile(const std::string& model, int64_t version,
                                       const std::string& filename) const {
  return absl::StrCat(root_, "/", model, "/", version, "/", filename);
}

}  // namespace kiln

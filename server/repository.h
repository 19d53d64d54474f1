// ModelRepository: a model repository directory in Triton's layout:
//
//   <root>/<model>/config.pbtxt          optional (derived when absent)
//   <root>/<model>/<version>/model.onnx  one directory per numeric version
//
// Model names are restricted to [A-Za-z0-9_.-] (not starting with '.'),
// so names from the API can never escape the repository.
//
// Thread safety: thread-safe (reads the file system on every call).
#ifndef KILN_SERVER_REPOSITORY_H_
#define KILN_SERVER_REPOSITORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

class ModelRepository {
 public:
  static constexpr int64_t kMaxConfigBytes = 1 << 20;

  explicit ModelRepository(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }

  static bool ValidModelName(const std::string& name);

  // Model directories, sorted.
  absl::StatusOr<std::vector<std::string>> ListModels() const;
  bool HasModel(const std::string& name) const;
  // Numeric version directories of `model`, ascending.
  absl::StatusOr<std::vector<int64_t>> ListVersions(const std::string& model) const;
  // The text of <model>/config.pbtxt, or nullopt when there is none. Read
  // with a bounded read (at most kMaxConfigBytes); a config.pbtxt that is not
  // a regular file (a FIFO, /dev/zero, also through a symlink) is refused
  // without blocking.
  absl::StatusOr<std::optional<std::string>> ReadConfig(const std::string& model) const;
  std::string ConfigPath(const std::string& model) const;
  std::string ModelFile(const std::string& model, int64_t version,
                        const std::string& filename) const;

 private:
  std::string root_;
};

}  // namespace kiln

#endif  // KILN_SERVER_REPOSITORY_H_

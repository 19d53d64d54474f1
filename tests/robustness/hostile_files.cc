// Writing hostile cases to disk, and the KServe datatype names the request
// tests send (hostile_models.h).
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "tests/robustness/hostile_models.h"

namespace kiln::hostile {

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) return absl::InternalError("cannot write " + path);
  return absl::OkStatus();
}

absl::Status MakeSpecialFile(const std::string& path, const std::string& what) {
  ::unlink(path.c_str());
  int r = what == "fifo" ? ::mkfifo(path.c_str(), 0644) : ::symlink(what.c_str(), path.c_str());
  if (r != 0)
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

absl::Status WriteCase(const HostileCase& c, const std::string& dir) {
  ::mkdir(dir.c_str(), 0755);
  std::string model = dir + "/model.onnx";
  switch (c.file) {
    case HostileCase::File::kBytes: {
      absl::Status s = WriteFile(model, c.model);
      if (!s.ok()) return s;
      break;
    }
    case HostileCase::File::kFifo: {
      absl::Status s = MakeSpecialFile(model, "fifo");
      if (!s.ok()) return s;
      break;
    }
    case HostileCase::File::kDevZero: {
      absl::Status s = MakeSpecialFile(model, "/dev/zero");
      if (!s.ok()) return s;
      break;
    }
  }
  for (const auto& [name, bytes] : c.files) {
    absl::Status s = WriteFile(dir + "/" + name, bytes);
    if (!s.ok()) return s;
  }
  for (const auto& [name, what] : c.fifos_links) {
    absl::Status s = MakeSpecialFile(dir + "/" + name, what);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string DatatypeOf(DType t) {
  switch (t.scalar) {
    case ScalarType::kBool: return "BOOL";
    case ScalarType::kInt8: return "INT8";
    case ScalarType::kInt16: return "INT16";
    case ScalarType::kInt32: return "INT32";
    case ScalarType::kInt64: return "INT64";
    case ScalarType::kUInt8: return "UINT8";
    case ScalarType::kUInt16: return "UINT16";
    case ScalarType::kUInt32: return "UINT32";
    case ScalarType::kUInt64: return "UINT64";
    case ScalarType::kFloat16: return "FP16";
    case ScalarType::kBFloat16: return "BF16";
    case ScalarType::kFloat32: return "FP32";
    case ScalarType::kFloat64: return "FP64";
    default: return "INVALID";
  }
}

}  // namespace kiln::hostile

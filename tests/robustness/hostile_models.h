// Malformed and hostile ONNX models, built with ONNX's protobuf classes, for
// the robustness tests of every path a model file or a request takes into
// kiln: the engine (OnnxModel), `kiln run` and kilnd.
//
// A HostileCase is one model directory: model.onnx (bytes, a FIFO or a
// symlink to /dev/zero), extra files and symlinks next to it (external
// data), and what must happen:
//   kLoad  the load fails (kilnd: the model is UNAVAILABLE with the reason),
//   kRun   the model loads, and running it on `feeds` fails,
//   kOk    the model loads and runs (valid but nasty input: it must work).
// `error` is a substring the error message must contain.
//
// Thread-compatible (plain data).
#ifndef KILN_TESTS_ROBUSTNESS_HOSTILE_MODELS_H_
#define KILN_TESTS_ROBUSTNESS_HOSTILE_MODELS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/onnx/host_tensor.h"

namespace kiln::hostile {

struct Feed {
  std::string name;
  HostTensor value;
};

struct HostileCase {
  enum class Expect { kLoad, kRun, kOk };
  enum class File { kBytes, kFifo, kDevZero };
  std::string name;  // [a-z0-9_], also the kilnd model name
  Expect expect = Expect::kLoad;
  File file = File::kBytes;
  std::string model;                                // model.onnx bytes (File::kBytes)
  std::map<std::string, std::string> files;         // extra files: name -> bytes
  std::map<std::string, std::string> fifos_links;   // name -> "fifo" or a symlink target
  std::vector<Feed> feeds;                          // inputs for kRun / kOk
  std::string error;                                // substring of the error (kLoad / kRun)
};

// Models the load must refuse: bad files, bad protos, bad graphs.
std::vector<HostileCase> LoadCases();
// Models that load, whose shapes (from initializers or host-folded values)
// are hostile: running them must fail (or, kOk, work).
std::vector<HostileCase> RunCases();

// Models that take a hostile shape from a request input, and the hostile
// values to send. `good` is a request that works.
struct RequestModel {
  std::string name;
  std::string model;             // model.onnx bytes
  std::vector<Feed> good;        // a request that must succeed
  struct Bad {
    std::string what;            // a label for test output
    std::vector<Feed> feeds;
    std::string error;           // substring of the error
  };
  std::vector<Bad> bad;
};
std::vector<RequestModel> RequestModels();

// X float[N] (N dynamic) -> Relu -> Y: a valid model for hostile command lines.
std::string DynamicReluModel();

// Writes `c` into `dir` (created): model.onnx, extra files, FIFOs, symlinks.
absl::Status WriteCase(const HostileCase& c, const std::string& dir);
// Makes `path` a FIFO (`what` == "fifo") or a symlink to `what`.
absl::Status MakeSpecialFile(const std::string& path, const std::string& what);
// Writes `bytes` to `path` (replacing it).
absl::Status WriteFile(const std::string& path, const std::string& bytes);
// The KServe datatype of a dtype ("FP32", "INT64", ...).
std::string DatatypeOf(DType t);

}  // namespace kiln::hostile

#endif  // KILN_TESTS_ROBUSTNESS_HOSTILE_MODELS_H_

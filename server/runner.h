// The backend interfaces the server runs models through. kiln's backend is
// the engine's ONNX importer + JIT (onnx_runner.h); tests plug in fakes.
//
//   ModelBackend  one loaded model file on one device (weights shared);
//                 reports the model's input / output signature.
//   ModelRunner   one executor instance of it: runs whole batches. Each
//                 runner keeps its own JIT captures (one per input-shape
//                 signature), says how each run went (RunStats) and which
//                 shapes it has captured (HasCapture).
//   BackendLoader loads model files.
//
// Thread safety: BackendLoader and ModelBackend are thread-safe. A
// ModelRunner is used by one thread at a time (its executor instance).
#ifndef KILN_SERVER_RUNNER_H_
#define KILN_SERVER_RUNNER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model_spec.h"
#include "server/request.h"

namespace kiln {

struct RunStats {
  // How the run was served: plain (first call of a shape), recorded into a
  // new JIT capture, or replayed from one.
  enum class Path { kPlain, kCapture, kReplay } path = Path::kPlain;
  double flops = 0;  // estimated, summed over the kernels that ran
  double bytes = 0;  // estimated memory traffic
  size_t kernels = 0;
  uint64_t input_ns = 0;   // host -> device
  uint64_t infer_ns = 0;   // graph build / replay and kernels
  uint64_t output_ns = 0;  // device -> host
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  // `inputs`: one per model input, in signature order, with full shapes.
  // Returns every model output, in signature order.
  virtual absl::StatusOr<std::vector<OutputTensor>> Run(const std::vector<InputTensor>& inputs,
                                                        RunStats* stats) = 0;
  // Whether a Run of inputs with these element types and shapes (in
  // signature order) would replay a JIT capture. The executor asks before
  // padding a batch up to a captured size.
  virtual bool HasCapture(const std::vector<DType>& dtypes,
                          const std::vector<std::vector<int64_t>>& shapes) const = 0;
};

// What one executor instance's JIT may keep (engine/jit/jit.h): captures
// by count and by the device bytes they hold.
struct JitLimits {
  size_t max_captures = 16;
  size_t max_capture_bytes = size_t{1} << 30;
};

// One executor instance's options.
struct RunnerOptions {
  JitLimits jit;
  // CPU threads its kernels run on, in a pool of its own (InstanceThreads in
  // model_spec.h); 0: the device's pool, shared by every instance. Other
  // devices than the CPU ignore it.
  int threads = 0;
};

class ModelBackend {
 public:
  virtual ~ModelBackend() = default;
  virtual const ModelSignature& signature() const = 0;
  // A new executor instance (its JIT, its threads).
  virtual absl::StatusOr<std::unique_ptr<ModelRunner>> NewRunner(
      const RunnerOptions& options) = 0;
};

class BackendLoader {
 public:
  virtual ~BackendLoader() = default;
  // `device`: an engine device name ("CPU", "CUDA", ...).
  virtual absl::StatusOr<std::unique_ptr<ModelBackend>> Load(const std::string& path,
                                                             const std::string& device) = 0;
};

}  // namespace kiln

#endif  // KILN_SERVER_RUNNER_H_

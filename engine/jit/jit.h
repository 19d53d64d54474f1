// Jit: capture and replay of the kernels a tensor function runs
// (tinygrad's TinyJit, CacheCollector style).
//
// For each input signature (dtype, shape, device of every input):
//   call 1 runs the function plainly (kernels compile, caches warm);
//   call 2 runs it again while recording every ExecItem it launches;
//   calls 3+ replay the recorded kernels with the new input buffers swapped
//   in and fresh output buffers (outputs never alias earlier results), with
//   no scheduling, codegen or graph building at all. On devices with a
//   GraphExecutor (CUDA) the capture replays as one graph launch, patching
//   only the launches whose arguments changed.
// Several captures are kept side by side (LRU, Options::max_captures).
// A capture that cannot be replayed faithfully is refused with an error:
// reading tensor data on the host during the call (data-dependent control
// flow), or inputs that are not realized buffers of the expected device.
// Thread-safe: calls are serialized per Jit instance.
#ifndef KILN_ENGINE_JIT_JIT_H_
#define KILN_ENGINE_JIT_JIT_H_

#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/realize/engine.h"
#include "engine/tensor/tensor.h"

namespace kiln {

class Jit {
 public:
  using Fn = std::function<absl::StatusOr<std::vector<Tensor>>(const std::vector<Tensor>&)>;
  struct Options {
    size_t max_captures = 16;  // signatures kept (LRU)
    // Replay through the device's GraphExecutor (one CUDA graph per
    // capture) where the device has one; otherwise launch kernel by kernel.
    bool use_graphs = true;
  };
  struct CaptureInfo {
    std::string signature;
    size_t kernels = 0;
    double flops = 0;   // per replay
    double bytes = 0;   // per replay
    uint64_t replays = 0;
  };
  struct Stats {
    uint64_t calls = 0;
    uint64_t captures = 0;  // captures made (incl. evicted)
    uint64_t replays = 0;
    uint64_t plain_runs = 0;
  };

  explicit Jit(Fn fn) : Jit(std::move(fn), Options()) {}
  Jit(Fn fn, Options options);
  ~Jit();

  absl::StatusOr<std::vector<Tensor>> operator()(const std::vector<Tensor>& inputs);

  std::vector<CaptureInfo> captures() const;
  Stats stats() const;
  // The signature string of a list of inputs ("float32[1,3,64,64]@CPU;...").
  static std::string Signature(const std::vector<Tensor>& inputs);

 private:
  struct Capture;
  struct Entry {
    uint64_t calls = 0;
    std::unique_ptr<Capture> capture;
  };

  absl::StatusOr<std::vector<Tensor>> RunPlain(const std::vector<Tensor>& inputs);
  absl::StatusOr<std::unique_ptr<Capture>> Record(const std::vector<Tensor>& inputs,
                                                  const std::vector<BufferRef>& in_bufs,
                                                  std::vector<Tensor>* outputs);
  absl::StatusOr<std::vector<Tensor>> Replay(Capture* c, const std::vector<Tensor>& inputs,
                                             const std::vector<BufferRef>& in_bufs);

  Fn fn_;
  Options options_;
  mutable absl::Mutex mu_;
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kiln

#endif  // KILN_ENGINE_JIT_JIT_H_

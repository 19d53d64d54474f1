// Jit: capture and replay of the kernels a tensor function runs
// (tinygrad's TinyJit, CacheCollector style), with graph breaks at host
// reads (torch.compile style).
//
// For each input signature (dtype, shape, device of every input):
//   call 1 runs the function plainly (kernels compile, caches warm);
//   call 2 runs it again while recording every ExecItem it launches and
//     every read of tensor data back to the host;
//   calls 3+ replay the recorded kernels with the new input buffers swapped
//     in and fresh output buffers (outputs never alias earlier results), with
//     no scheduling, codegen or graph building at all.
// A function that reads data on the host (a NonZero count, an NMS result, a
// Loop trip count) is captured in segments that end at each read: a replay
// runs a segment, reads the same bytes and goes on only if they are what a
// recording read there (the host's decisions then repeat exactly); recordings
// that read other bytes branch off as a tree (engine/jit/capture.h). A read
// no branch matches is a miss: the call runs plainly, and its recording
// joins the tree (at most Options::max_paths paths per signature). A
// signature whose replays mostly miss (data-dependent reads that differ on
// every input) stops trying and runs plainly.
// On devices with a GraphExecutor (CUDA) a capture without reads replays as
// one graph launch, patching only the launches whose arguments changed. On
// a CPU of several threads, a segment whose kernels form independent chains
// of about equal work (a batch built in groups of slices, a bidirectional
// RNN's two directions) replays them side by side, each kernel on one
// thread (engine/jit/parallel.h); any other runs in order, each kernel
// across all threads.
// Several signatures are kept side by side (LRU), bounded by their count
// (Options::max_captures) and by the device bytes their captures keep alive
// (Options::max_capture_bytes: intermediates and outputs). A new capture
// evicts the least recently used others until the total fits; a capture
// that alone holds more than the bound is not kept, and its signature runs
// plainly from then on.
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
namespace jit_internal {
struct Recording;
}  // namespace jit_internal

class Jit {
 public:
  using Fn = std::function<absl::StatusOr<std::vector<Tensor>>(const std::vector<Tensor>&)>;
  struct Options {
    size_t max_captures = 16;  // signatures kept (LRU)
    size_t max_capture_bytes = size_t{1} << 30;  // device bytes captures hold, all together
    // Replay through the device's GraphExecutor (one CUDA graph per
    // capture) where the device has one; otherwise launch kernel by kernel.
    bool use_graphs = true;
    size_t max_paths = 16;  // recorded paths per signature (see above)
  };
  // How a call was served and what it ran.
  enum class Path { kPlain, kCapture, kReplay };
  struct Result {
    std::vector<Tensor> outputs;
    Path path = Path::kPlain;
    size_t kernels = 0;  // kernels launched (segments replayed before a miss included)
    double flops = 0;    // their estimates
    double bytes = 0;
  };
  struct CaptureInfo {
    std::string signature;
    size_t paths = 0;    // recorded paths (leaves of the capture tree)
    size_t kernels = 0;  // of the last path recorded or replayed
    double flops = 0;
    double bytes = 0;
    uint64_t replays = 0;
    uint64_t misses = 0;
    size_t held_bytes = 0;  // device bytes the capture keeps alive
  };
  struct Stats {
    uint64_t calls = 0;
    uint64_t captures = 0;  // paths recorded (incl. evicted)
    uint64_t replays = 0;   // full replays
    uint64_t parallel_replays = 0;  // of them, with kernels side by side (below)
    uint64_t misses = 0;    // replays stopped at a read no path had
    uint64_t plain_runs = 0;
    uint64_t evictions = 0;  // captures dropped for the count or byte bound
    uint64_t too_big = 0;    // captures not kept: bigger than the byte bound alone
  };

  explicit Jit(Fn fn) : Jit(std::move(fn), Options()) {}
  Jit(Fn fn, Options options);
  ~Jit();

  absl::StatusOr<Result> Call(const std::vector<Tensor>& inputs);
  absl::StatusOr<std::vector<Tensor>> operator()(const std::vector<Tensor>& inputs);

  std::vector<CaptureInfo> captures() const;
  Stats stats() const;
  // Whether a call with inputs of these element types and shapes on
  // `device` would replay a capture (it is kept, and not running plainly).
  bool HasCapture(const std::vector<DType>& dtypes, const std::vector<Shape>& shapes,
                  const std::string& device) const;
  // The signature string of a list of inputs ("float32[1,3,64,64]@CPU;...").
  static std::string Signature(const std::vector<Tensor>& inputs);

 private:
  struct Entry;

  // Runs fn_ and realizes its outputs; counts the kernels it ran, and gives
  // them and the host reads to *rec when it is not null.
  absl::StatusOr<Result> RunPlain(const std::vector<Tensor>& inputs, jit_internal::Recording* rec);
  // Drops least recently used captures other than `keep` while the count or
  // the bytes held are over their bounds.
  void Evict(const std::string& keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Fn fn_;
  Options options_;
  mutable absl::Mutex mu_;
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kiln

#endif  // KILN_ENGINE_JIT_JIT_H_

// The realize layer: schedules lazy graphs, compiles their kernels (with a
// cache of compiled kernels keyed by kernel AST), and runs them.
//
// ExecItem = compiled kernel + device buffers + symbolic var values +
// launch dims + cost estimates (FLOPs, bytes). A CaptureScope (used by the
// JIT) records every ExecItem the current thread runs.
//
// DEBUG=2 prints one line per kernel run (name, launch dims, time, GFLOP/s,
// GB/s); DEBUG=3 adds the applied optimizations; DEBUG=4 the source.
// Engine is thread-safe.
#ifndef KILN_ENGINE_REALIZE_ENGINE_H_
#define KILN_ENGINE_REALIZE_ENGINE_H_

#include <atomic>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/codegen/kernel.h"
#include "engine/codegen/lowerer.h"
#include "engine/runtime/device.h"
#include "engine/schedule/schedule.h"
#include "engine/uop/uop.h"

namespace kiln {

struct CompiledKernel {
  std::string name;       // heuristic name + hash of the source (shown)
  std::string symbol;     // the function in the source: k_ + the hash alone
  std::string source;
  std::unique_ptr<Program> program;
  LaunchDims dims;
  int num_bufs = 0;
  std::vector<std::string> vars;
  double flops = 0;  // per launch
  double bytes = 0;  // per launch
  std::vector<std::string> opts;
};

struct ExecItem {
  std::shared_ptr<const CompiledKernel> kernel;
  std::vector<BufferRef> bufs;
  std::vector<int64_t> vars;

  // Runs the kernel; `seconds` (if not null) gets the measured time, which
  // makes the launch synchronous.
  absl::Status Run(double* seconds = nullptr) const;
};

// Tensor data read back to the host while a CaptureScope recorded: what a
// replay must read again at the same point, and compare, before it may
// repeat what the host decided from it.
struct HostRead {
  size_t after_items = 0;  // ExecItems recorded before the read
  BufferRef buffer;        // read from its start
  std::string bytes;       // what was read
};

// Records the ExecItems run by the current thread while alive, and the host
// reads between them (nestable: the innermost scope records).
class CaptureScope {
 public:
  CaptureScope();
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
  const std::vector<ExecItem>& items() const { return items_; }
  std::vector<ExecItem> Take() { return std::move(items_); }
  // The scope recording on this thread, or null.
  static CaptureScope* Current();
  void Add(const ExecItem& e) { items_.push_back(e); }
  // Records that `bytes` were read from the start of `buffer`.
  void NoteHostRead(BufferRef buffer, std::string bytes) {
    reads_.push_back({items_.size(), std::move(buffer), std::move(bytes)});
  }
  const std::vector<HostRead>& reads() const { return reads_; }
  std::vector<HostRead> TakeReads() { return std::move(reads_); }

 private:
  std::vector<ExecItem> items_;
  std::vector<HostRead> reads_;
  CaptureScope* prev_;
};

struct EngineStats {
  uint64_t kernels_compiled = 0;
  uint64_t kernel_cache_hits = 0;
  uint64_t kernels_run = 0;
  double flops_run = 0;
  double bytes_run = 0;
  double compile_seconds = 0;
  uint64_t beam_searches = 0;  // kernels whose BEAM choice was searched or found cached
};

struct EngineOptions {
  size_t kernel_cache_entries = 4096;  // compiled kernels kept (LRU)
  // BEAM rounds for CPU reduce kernels at their first compile (see
  // engine/realize/beam.h); < 0: the BEAM environment variable.
  int beam = -1;
};

class Engine {
 public:
  explicit Engine(DeviceRegistry* registry, EngineOptions options = {});
  ~Engine();

  DeviceRegistry* registry() const { return registry_; }
  absl::StatusOr<Device*> GetDevice(const std::string& name);

  // Computes `roots` (tensor-graph nodes) on `device`. Returns, per root, the
  // BUFFER UOp holding it (allocated, contiguous in the root's shape).
  absl::StatusOr<UOpList> Realize(const UOpList& roots, const std::string& device);
  // Computes `root` into target.buffer through target.st (an assignment into
  // an existing buffer; see ScheduleTarget).
  absl::Status RealizeInto(const UOpRef& root, const ScheduleTarget& target,
                           const std::string& device);

  // The device memory of a BUFFER UOp (allocated on first use).
  absl::StatusOr<BufferRef> StorageOf(const UOpRef& buffer);

  // Compiles (or finds in the cache) the kernels of `asts` for `device`.
  absl::StatusOr<std::vector<std::shared_ptr<const CompiledKernel>>> GetKernels(
      Device* device, const UOpList& asts);

  EngineStats stats() const;

 private:
  struct CacheEntry {
    UOpRef ast;  // keeps the key alive
    std::shared_ptr<const CompiledKernel> kernel;
  };
  using CacheKey = std::pair<const Device*, const UOp*>;

  // A kernel lowered and rendered, not compiled yet.
  struct Prepared {
    size_t index = 0;  // into the asts of GetKernels
    LinearProgram prog;
    std::string symbol;  // the function's name in `source`
    std::string source;
  };

  absl::StatusOr<RendererOptions> OptionsFor(Device* device) const;
  // Lowers and renders `ast`; `optimize` false skips every optimization
  // (the fallback for a kernel the device compiler fails on).
  absl::StatusOr<Prepared> Prepare(Device* device, const UOpRef& ast, const RendererOptions& ropts,
                                   bool optimize);
  // Compiles the pending kernels, replacing any the device compiler rejects
  // by its unoptimized form; returns their binaries.
  absl::StatusOr<std::vector<std::string>> CompileWithFallback(Device* device,
                                                               const UOpList& asts,
                                                               const RendererOptions& ropts,
                                                               std::vector<Prepared>* pending);
  absl::StatusOr<UOpList> Run(const UOpList& roots, const std::string& device,
                              const ScheduleTarget* target);

  DeviceRegistry* registry_;
  EngineOptions options_;
  mutable absl::Mutex mu_;
  std::list<CacheEntry> lru_ ABSL_GUARDED_BY(mu_);
  std::map<CacheKey, std::list<CacheEntry>::iterator> cache_ ABSL_GUARDED_BY(mu_);
  EngineStats stats_ ABSL_GUARDED_BY(mu_);
  mutable std::atomic<uint64_t> kernels_run_{0};
};

// One DEBUG=2 line for a kernel run.
std::string DebugLine(const CompiledKernel& k, double seconds);

// Codegen options for a renderer language ("c", "bytecode", "opencl",
// "cuda"; see Device::renderer()) on the device named `device`. For "cuda",
// `sm` is the GPU's compute capability (90 for sm_90): sm_70 and newer get
// tensor cores (RendererOptions::tensor_cores) unless KILN_WMMA=0.
absl::StatusOr<RendererOptions> CodegenOptions(const std::string& renderer,
                                               const std::string& device, int sm = 0);
// Renders a lowered kernel in a renderer language.
absl::StatusOr<std::string> RenderKernel(const std::string& renderer, const std::string& name,
                                         const UOpList& uops);

}  // namespace kiln

#endif  // KILN_ENGINE_REALIZE_ENGINE_H_

// The "CUDA" device: CUDA C kernels (engine/renderer RenderCuda) compiled by
// NVRTC to a cubin for the card's architecture, run through the driver API.
// Both libraries are loaded with dlopen (engine/runtime/cuda_api.h), so kiln
// runs without a GPU; creating the device then fails with a clear error,
// while CudaCompiler still works wherever NVRTC exists (PTX for compute_XY).
//
//   memory    cuMemAlloc through the LRU Allocator; host <-> device copies
//             staged through a pinned (page-locked) buffer, in order on the
//             device's stream
//   compiler  NVRTC, cached on disk under <cache>/cuda keyed by source,
//             architecture and NVRTC version
//   launches  cuLaunchKernel on one non-blocking stream (asynchronous unless
//             asked to wait); CUDA events time them
//   graphs    NewGraph builds one CUDA graph of kernel nodes (a chain);
//             Update patches one node's arguments in the instantiated graph
//             (cuGraphExecKernelNodeSetParams); Run is one cuGraphLaunch
// Thread-safe (the context is made current on each calling thread).
#ifndef KILN_ENGINE_RUNTIME_CUDA_DEVICE_H_
#define KILN_ENGINE_RUNTIME_CUDA_DEVICE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/runtime/device.h"
#include "engine/runtime/disk_cache.h"

namespace kiln {

// CUDA C -> cubin ("sm_XY") or PTX ("compute_XY"). Thread-safe.
class CudaCompiler : public Compiler {
 public:
  struct Options {
    std::string arch = "compute_90";
    std::string cache_dir;  // binaries go to cache_dir + "/cuda"; empty: Env().cache_dir
  };
  // FailedPrecondition when NVRTC cannot be loaded.
  static absl::StatusOr<std::unique_ptr<CudaCompiler>> Create(const Options& options);

  // Returns the cubin (or the PTX text) of `source`. Compile errors are
  // InvalidArgument with NVRTC's log.
  absl::StatusOr<std::string> Compile(const std::string& source) override;
  Stats stats() const override;
  const std::string& arch() const { return arch_; }
  // "NVRTC 13.0 (libnvrtc.so)".
  std::string version() const;

 private:
  CudaCompiler(std::string arch, std::string dir);
  const std::string arch_;
  DiskCache cache_;
  mutable absl::Mutex mu_;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

class CudaDevice : public Device {
 public:
  struct Options {
    std::string cache_dir;                    // see CudaCompiler::Options
    int ordinal = 0;                          // which GPU
    size_t staging_bytes = size_t{16} << 20;  // pinned staging buffer for copies
  };
  // FailedPrecondition when there is no driver, no GPU or no NVRTC.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(const Options& options);
  ~CudaDevice() override;

  std::string renderer() const override { return "cuda"; }
  Allocator& allocator() override;
  Compiler& compiler() override;
  // `binary` is a cubin or PTX from compiler(); `function` the kernel name.
  absl::StatusOr<std::unique_ptr<Program>> LoadProgram(const std::string& function,
                                                       const std::string& binary) override;
  absl::Status Synchronize() override;
  absl::StatusOr<std::unique_ptr<GraphExecutor>> NewGraph(
      const std::vector<GraphLaunch>& launches) override;

  // Device-to-device copy on the device's stream (benchmarks); waits, and
  // reports the GPU time in *seconds when not null.
  absl::Status CopyOnDevice(void* dst, const void* src, size_t nbytes, double* seconds);
  // "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)".
  const std::string& description() const;
  int sm_count() const;
  int compute_capability() const override;

  struct Impl;

 private:
  explicit CudaDevice(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln

#endif  // KILN_ENGINE_RUNTIME_CUDA_DEVICE_H_

// The "OPENCL" device: OpenCL C kernels (engine/renderer RenderOpenCL) built
// by the platform's compiler, run on the first OpenCL device found (PoCL's
// CPU driver in CI). libOpenCL.so.1 (the ICD loader) is loaded with dlopen,
// so kiln runs where OpenCL is not installed; creating the device then fails
// with a clear error.
//
//   buffers   cl_mem handles (the void* "device pointers" of this device);
//             copies are blocking clEnqueueRead/WriteBuffer
//   compiler  source -> program binary (clGetProgramInfo), cached on disk
//             under <cache>/opencl keyed by source, device, driver and
//             platform; LoadProgram rebuilds from the binary
//   launches  clEnqueueNDRangeKernel with global = dims.global * dims.local
//             and local = dims.local; one in-order queue; timing by
//             profiling events
// Thread-safe.
#ifndef KILN_ENGINE_RUNTIME_OPENCL_DEVICE_H_
#define KILN_ENGINE_RUNTIME_OPENCL_DEVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/runtime/device.h"

namespace kiln {

class OpenClDevice : public Device {
 public:
  struct Options {
    // Cache root; binaries go to cache_dir + "/opencl". Empty: Env().cache_dir.
    std::string cache_dir;
  };
  // Fails (FailedPrecondition) when no OpenCL loader, platform or device exists.
  static absl::StatusOr<std::unique_ptr<OpenClDevice>> Create(const Options& options);
  ~OpenClDevice() override;

  std::string renderer() const override { return "opencl"; }
  Allocator& allocator() override;
  Compiler& compiler() override;
  absl::StatusOr<std::unique_ptr<Program>> LoadProgram(const std::string& function,
                                                       const std::string& binary) override;
  absl::Status Synchronize() override;
  // "<platform> / <device>" of the device in use.
  const std::string& description() const;

  struct Impl;

 private:
  explicit OpenClDevice(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln

#endif  // KILN_ENGINE_RUNTIME_OPENCL_DEVICE_H_

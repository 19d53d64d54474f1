// The parts of the CUDA driver API and NVRTC that kiln uses, declared here
// (ABI-compatible with cuda.h / nvrtc.h of CUDA 12 and 13) and resolved with
// dlopen / dlsym, so no kiln binary links libcuda or libnvrtc: it runs on
// machines without a GPU, and compiles kernels wherever NVRTC exists.
//
// The tables are loaded once per process and immutable afterwards (like the
// dynamic loader's own state); loading failures are reported, not cached as
// crashes. Internal to engine/runtime. Thread-safe.
#ifndef KILN_ENGINE_RUNTIME_CUDA_API_H_
#define KILN_ENGINE_RUNTIME_CUDA_API_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace kiln::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphNode = struct CUgraphNode_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUkernel = struct CUkern_st*;

constexpr CUresult kSuccess = 0;
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr unsigned kStreamNonBlocking = 0x1;
constexpr unsigned kEventDefault = 0x0;
constexpr unsigned kMemHostAllocPortable = 0x1;

// CUDA_KERNEL_NODE_PARAMS (the _v2 layout of CUDA 12 / 13).
struct KernelNodeParams {
  CUfunction func;
  unsigned int grid_x, grid_y, grid_z;
  unsigned int block_x, block_y, block_z;
  unsigned int shared_mem_bytes;
  void** kernel_params;
  void** extra;
  CUkernel kern;
  CUcontext ctx;
};

struct DriverApi {
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* dev, int ordinal);
  CUresult (*cuDeviceGetAttribute)(int* value, int attrib, CUdevice dev);
  CUresult (*cuDeviceGetName)(char* name, int len, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t bytes);
  CUresult (*cuMemFree)(CUdeviceptr ptr);
  CUresult (*cuMemHostAlloc)(void** ptr, size_t bytes, unsigned int flags);
  CUresult (*cuMemFreeHost)(void* ptr);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void* src, size_t bytes, CUstream s);
  CUresult (*cuMemcpyDtoHAsync)(void* dst, CUdeviceptr src, size_t bytes, CUstream s);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s);
  CUresult (*cuStreamCreate)(CUstream* s, unsigned int flags);
  CUresult (*cuStreamDestroy)(CUstream s);
  CUresult (*cuStreamSynchronize)(CUstream s);
  CUresult (*cuEventCreate)(CUevent* e, unsigned int flags);
  CUresult (*cuEventDestroy)(CUevent e);
  CUresult (*cuEventRecord)(CUevent e, CUstream s);
  CUresult (*cuEventSynchronize)(CUevent e);
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end);
  CUresult (*cuModuleLoadData)(CUmodule* m, const void* image);
  CUresult (*cuModuleUnload)(CUmodule m);
  CUresult (*cuModuleGetFunction)(CUfunction* f, CUmodule m, const char* name);
  // Optional (CUDA >= 12.4 drivers); null when absent.
  CUresult (*cuFuncGetParamInfo)(CUfunction f, size_t index, size_t* offset, size_t* size);
  CUresult (*cuLaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared_mem, CUstream s,
                             void** params, void** extra);
  CUresult (*cuGraphCreate)(CUgraph* g, unsigned int flags);
  CUresult (*cuGraphAddKernelNode)(CUgraphNode* node, CUgraph g, const CUgraphNode* deps,
                                   size_t ndeps, const KernelNodeParams* params);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec* exec, CUgraph g, unsigned long long flags);
  CUresult (*cuGraphExecKernelNodeSetParams)(CUgraphExec exec, CUgraphNode node,
                                             const KernelNodeParams* params);
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream s);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph g);
  CUresult (*cuGetErrorName)(CUresult r, const char** name);
};

// libcuda.so.1 (from the NVIDIA driver) with cuInit done. FailedPrecondition
// with the loader's message when there is no driver.
absl::StatusOr<const DriverApi*> LoadDriver();
// "CUDA_ERROR_OUT_OF_MEMORY (2)".
std::string ErrorText(const DriverApi& api, CUresult r);

using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

struct NvrtcApi {
  nvrtcResult (*nvrtcVersion)(int* major, int* minor);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram* prog, const char* src, const char* name,
                                    int num_headers, const char* const* headers,
                                    const char* const* include_names);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int num_options,
                                     const char* const* options);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, size_t* size);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char* log);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram prog, size_t* size);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram prog, char* ptx);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, size_t* size);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char* cubin);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram* prog);
  const char* (*nvrtcGetErrorString)(nvrtcResult r);
  std::string path;  // the library that was loaded
  int major = 0, minor = 0;
};

// NVRTC from $KILN_NVRTC, then libnvrtc.so(.13/.12) on the loader path, then
// /usr/local/cuda/lib64. Works without a driver.
absl::StatusOr<const NvrtcApi*> LoadNvrtc();

}  // namespace kiln::cuda

#endif  // KILN_ENGINE_RUNTIME_CUDA_API_H_

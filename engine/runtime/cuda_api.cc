#include "engine/runtime/cuda_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kiln::cuda {
namespace {

// Resolves the first of `names` found in `h` into *fn.
template <typename F>
bool Resolve(void* h, F* fn, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (void* p = dlsym(h, n)) {
      *fn = reinterpret_cast<F>(p);
      return true;
    }
  }
  *fn = nullptr;
  return false;
}

absl::StatusOr<const DriverApi*> LoadDriverOnce() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "the CUDA device needs the NVIDIA driver (libcuda.so.1), which could not be loaded: ",
        e ? e : "unknown error"));
  }
  auto* api = new DriverApi();  // lives for the process, like the library
  std::string missing;
#define KILN_CU(field, ...) \
  if (!Resolve(h, &api->field, {__VA_ARGS__})) absl::StrAppend(&missing, " " #field);
  KILN_CU(cuInit, "cuInit")
  KILN_CU(cuDeviceGetCount, "cuDeviceGetCount")
  KILN_CU(cuDeviceGet, "cuDeviceGet")
  KILN_CU(cuDeviceGetAttribute, "cuDeviceGetAttribute")
  KILN_CU(cuDeviceGetName, "cuDeviceGetName")
  KILN_CU(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
  KILN_CU(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease")
  KILN_CU(cuCtxSetCurrent, "cuCtxSetCurrent")
  KILN_CU(cuMemAlloc, "cuMemAlloc_v2")
  KILN_CU(cuMemFree, "cuMemFree_v2")
  KILN_CU(cuMemHostAlloc, "cuMemHostAlloc")
  KILN_CU(cuMemFreeHost, "cuMemFreeHost")
  KILN_CU(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
  KILN_CU(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
  KILN_CU(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")
  KILN_CU(cuStreamCreate, "cuStreamCreate")
  KILN_CU(cuStreamDestroy, "cuStreamDestroy_v2")
  KILN_CU(cuStreamSynchronize, "cuStreamSynchronize")
  KILN_CU(cuEventCreate, "cuEventCreate")
  KILN_CU(cuEventDestroy, "cuEventDestroy_v2")
  KILN_CU(cuEventRecord, "cuEventRecord")
  KILN_CU(cuEventSynchronize, "cuEventSynchronize")
  KILN_CU(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime")
  KILN_CU(cuModuleLoadData, "cuModuleLoadData")
  KILN_CU(cuModuleUnload, "cuModuleUnload")
  KILN_CU(cuModuleGetFunction, "cuModuleGetFunction")
  KILN_CU(cuLaunchKernel, "cuLaunchKernel")
  KILN_CU(cuGraphCreate, "cuGraphCreate")
  KILN_CU(cuGraphAddKernelNode, "cuGraphAddKernelNode_v2")
  KILN_CU(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags")
  KILN_CU(cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2")
  KILN_CU(cuGraphLaunch, "cuGraphLaunch")
  KILN_CU(cuGraphExecDestroy, "cuGraphExecDestroy")
  KILN_CU(cuGraphDestroy, "cuGraphDestroy")
  KILN_CU(cuGetErrorName, "cuGetErrorName")
#undef KILN_CU
  Resolve(h, &api->cuFuncGetParamInfo, {"cuFuncGetParamInfo"});  // optional
  if (!missing.empty()) {
    delete api;
    return absl::FailedPreconditionError(
        absl::StrCat("libcuda.so.1 is too old (CUDA 12 or newer needed); missing:", missing));
  }
  CUresult r = api->cuInit(0);
  if (r != kSuccess) {
    std::string text = ErrorText(*api, r);
    delete api;
    return absl::FailedPreconditionError(absl::StrCat("cuInit failed: ", text));
  }
  return api;
}

absl::StatusOr<const NvrtcApi*> LoadNvrtcOnce() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("KILN_NVRTC"); env != nullptr && *env != '\0')
    candidates.push_back(env);
  for (const char* n :
       {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so",
        "/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.12"})
    candidates.push_back(n);
  void* h = nullptr;
  std::string errors, path;
  for (const std::string& c : candidates) {
    h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) {
      path = c;
      break;
    }
    const char* e = dlerror();
    absl::StrAppend(&errors, "\n  ", e ? e : c);
  }
  if (h == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat("NVRTC (libnvrtc.so, from the CUDA toolkit) could not be loaded; set "
                     "KILN_NVRTC to its path. Tried:",
                     errors));
  auto* api = new NvrtcApi();
  std::string missing;
#define KILN_NV(field) \
  if (!Resolve(h, &api->field, {#field})) absl::StrAppend(&missing, " " #field);
  KILN_NV(nvrtcVersion)
  KILN_NV(nvrtcCreateProgram)
  KILN_NV(nvrtcCompileProgram)
  KILN_NV(nvrtcGetProgramLogSize)
  KILN_NV(nvrtcGetProgramLog)
  KILN_NV(nvrtcGetPTXSize)
  KILN_NV(nvrtcGetPTX)
  KILN_NV(nvrtcGetCUBINSize)
  KILN_NV(nvrtcGetCUBIN)
  KILN_NV(nvrtcDestroyProgram)
  KILN_NV(nvrtcGetErrorString)
#undef KILN_NV
  if (!missing.empty()) {
    delete api;
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is too old (NVRTC 11.1 or newer needed); missing:", missing));
  }
  api->path = path;
  api->nvrtcVersion(&api->major, &api->minor);
  return api;
}

}  // namespace

std::string ErrorText(const DriverApi& api, CUresult r) {
  const char* name = nullptr;
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(r, &name) != kSuccess || !name)
    name = "CUDA_ERROR";
  return absl::StrCat(name, " (", r, ")");
}

absl::StatusOr<const DriverApi*> LoadDriver() {
  static const absl::StatusOr<const DriverApi*>* loaded =
      new absl::StatusOr<const DriverApi*>(LoadDriverOnce());
  return *loaded;
}

absl::StatusOr<const NvrtcApi*> LoadNvrtc() {
  static const absl::StatusOr<const NvrtcApi*>* loaded =
      new absl::StatusOr<const NvrtcApi*>(LoadNvrtcOnce());
  return *loaded;
}

}  // namespace kiln::cuda

#include "engine/runtime/cuda_device.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/base/flags.h"
#include "engine/base/status.h"
#include "engine/runtime/cuda_api.h"

namespace kiln {

using cuda::CUdeviceptr;
using cuda::CUresult;

namespace {

constexpr size_t kMaxLogChars = 6000;

#define KILN_CU_CHECK(api, call, what)                                         \
  do {                                                                         \
    ::kiln::cuda::CUresult kiln_cu_r_ = (call);                                \
    if (kiln_cu_r_ != ::kiln::cuda::kSuccess)                                  \
      return absl::InternalError(                                              \
          absl::StrCat(what, ": ", ::kiln::cuda::ErrorText(api, kiln_cu_r_))); \
  } while (0)

std::string CacheRoot(const std::string& dir) {
  return (dir.empty() ? Env().cache_dir : dir) + "/cuda";
}

// NVRTC 13 has no built-in CUDA headers, and the tensor-core matmuls
// (engine/renderer/cuda_wmma.h) include <mma.h> / <cuda_fp16.h>, so NVRTC
// gets the toolkit's include directory: $KILN_CUDA_INCLUDE, else include/
// next to the lib directory NVRTC was loaded from, else the usual places.
// Empty when none of them has mma.h (those kernels then fail to compile).
std::string CudaIncludeDir(const cuda::NvrtcApi& nv) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("KILN_CUDA_INCLUDE"); env != nullptr && *env != '\0')
    dirs.push_back(env);
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(nv.nvrtcVersion), &info) != 0 && info.dli_fname != nullptr) {
    std::string lib = info.dli_fname;
    size_t slash = lib.rfind('/');
    if (slash != std::string::npos) dirs.push_back(lib.substr(0, slash) + "/../include");
  }
  dirs.push_back("/usr/local/cuda/include");
  dirs.push_back("/usr/include");
  for (const std::string& d : dirs)
    if (access((d + "/mma.h").c_str(), R_OK) == 0) return d;
  return "";
}

// NVRTC's option for CudaIncludeDir ("" when there is none), found once.
const std::string& IncludeFlag(const cuda::NvrtcApi& nv) {
  static const std::string* flag = new std::string([&nv] {
    std::string dir = CudaIncludeDir(nv);
    return dir.empty() ? dir : "--include-path=" + dir;
  }());
  return *flag;
}

}  // namespace

// ------------------------------------------------------------- CudaCompiler

CudaCompiler::CudaCompiler(std::string arch, std::string dir)
    : arch_(std::move(arch)), cache_(std::move(dir), "cuda") {}

absl::StatusOr<std::unique_ptr<CudaCompiler>> CudaCompiler::Create(const Options& options) {
  RETURN_IF_ERROR(cuda::LoadNvrtc().status());
  if (options.arch.rfind("sm_", 0) != 0 && options.arch.rfind("compute_", 0) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA arch must be sm_XY or compute_XY, not '", options.arch, "'"));
  return std::unique_ptr<CudaCompiler>(
      new CudaCompiler(options.arch, CacheRoot(options.cache_dir)));
}

std::string CudaCompiler::version() const {
  auto api = cuda::LoadNvrtc();
  if (!api.ok()) return "NVRTC unavailable";
  return absl::StrCat("NVRTC ", (*api)->major, ".", (*api)->minor, " (", (*api)->path, ")");
}

absl::StatusOr<std::string> CudaCompiler::Compile(const std::string& source) {
  ASSIGN_OR_RETURN(const cuda::NvrtcApi* nv, cuda::LoadNvrtc());
  const bool cubin = arch_.rfind("sm_", 0) == 0;
  const std::string arch_flag = absl::StrCat("--gpu-architecture=", arch_);
  const std::string key =
      absl::StrCat(arch_flag, "\nnvrtc ", nv->major, ".", nv->minor, "\n", source);
  if (std::optional<std::string> hit = cache_.Get(key)) {
    absl::MutexLock l(&mu_);
    ++stats_.disk_hits;
    return *hit;
  }
  auto start = std::chrono::steady_clock::now();
  cuda::nvrtcProgram prog = nullptr;
  cuda::nvrtcResult r =
      nv->nvrtcCreateProgram(&prog, source.c_str(), "kiln.cu", 0, nullptr, nullptr);
  if (r != 0)
    return absl::InternalError(absl::StrCat("nvrtcCreateProgram: ", nv->nvrtcGetErrorString(r)));
  std::vector<const char*> opts = {arch_flag.c_str(), "--std=c++17"};
  if (!IncludeFlag(*nv).empty()) opts.push_back(IncludeFlag(*nv).c_str());
  r = nv->nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  if (r != 0) {
    size_t n = 0;
    nv->nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    if (n > 0) nv->nvrtcGetProgramLog(prog, log.data());
    nv->nvrtcDestroyProgram(&prog);
    if (log.size() > kMaxLogChars) log = log.substr(0, kMaxLogChars) + "\n...";
    return absl::InvalidArgumentError(absl::StrCat("NVRTC failed (", nv->nvrtcGetErrorString(r),
                                                   ") compiling a CUDA kernel for ", arch_, ":\n",
                                                   log, "\nsource:\n", source.substr(0, 4000)));
  }
  size_t size = 0;
  r = cubin ? nv->nvrtcGetCUBINSize(prog, &size) : nv->nvrtcGetPTXSize(prog, &size);
  std::string binary(size, '\0');
  if (r == 0)
    r = cubin ? nv->nvrtcGetCUBIN(prog, binary.data()) : nv->nvrtcGetPTX(prog, binary.data());
  nv->nvrtcDestroyProgram(&prog);
  if (r != 0 || size == 0)
    return absl::InternalError(absl::StrCat("reading NVRTC output: ", nv->nvrtcGetErrorString(r)));
  if (!cubin && binary.back() == '\0') binary.pop_back();  // PTX text without its NUL
  cache_.Put(key, binary);
  absl::MutexLock l(&mu_);
  ++stats_.compiled;
  stats_.compile_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return binary;
}

Compiler::Stats CudaCompiler::stats() const {
  absl::MutexLock l(&mu_);
  return stats_;
}

// ---------------------------------------------------------------- internals

struct CudaDevice::Impl {
  const cuda::DriverApi* api = nullptr;
  cuda::CUdevice dev = 0;
  cuda::CUcontext ctx = nullptr;
  cuda::CUstream stream = nullptr;
  std::string description;
  int sm_count = 0;
  int compute_capability = 0;  // 90 for sm_90
  std::unique_ptr<CudaCompiler> compiler;
  std::unique_ptr<Allocator> allocator;
  absl::Mutex staging_mu;
  void* staging ABSL_GUARDED_BY(staging_mu) = nullptr;
  size_t staging_bytes = 0;

  // Makes the context current on the calling thread.
  absl::Status Bind() const {
    thread_local cuda::CUcontext bound = nullptr;
    if (bound == ctx) return absl::OkStatus();
    KILN_CU_CHECK(*api, api->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    bound = ctx;
    return absl::OkStatus();
  }

  // Runs `enqueue` between two events on the stream; waits and reports the
  // GPU time (seconds) or just waits (wait) or returns at once.
  absl::Status Timed(const std::function<absl::Status()>& enqueue, bool wait, double* seconds) {
    if (seconds == nullptr) {
      RETURN_IF_ERROR(enqueue());
      if (wait) KILN_CU_CHECK(*api, api->cuStreamSynchronize(stream), "cuStreamSynchronize");
      return absl::OkStatus();
    }
    cuda::CUevent ev[2] = {nullptr, nullptr};
    KILN_CU_CHECK(*api, api->cuEventCreate(&ev[0], cuda::kEventDefault), "cuEventCreate");
    CUresult r = api->cuEventCreate(&ev[1], cuda::kEventDefault);
    absl::Status st = absl::OkStatus();
    if (r == cuda::kSuccess) r = api->cuEventRecord(ev[0], stream);
    if (r == cuda::kSuccess) {
      st = enqueue();
      r = api->cuEventRecord(ev[1], stream);
    }
    float ms = 0;
    if (r == cuda::kSuccess) r = api->cuEventSynchronize(ev[1]);
    if (r == cuda::kSuccess) r = api->cuEventElapsedTime(&ms, ev[0], ev[1]);
    for (cuda::CUevent e : ev)
      if (e != nullptr) api->cuEventDestroy(e);
    RETURN_IF_ERROR(st);
    if (r != cuda::kSuccess)
      return absl::InternalError(absl::StrCat("CUDA event timing: ", cuda::ErrorText(*api, r)));
    *seconds = ms * 1e-3;
    return absl::OkStatus();
  }
};

namespace {

class CudaAllocator : public Allocator {
 public:
  explicit CudaAllocator(CudaDevice::Impl* d) : d_(d) {}
  ~CudaAllocator() override { ClearCache(); }

  absl::Status CopyIn(void* dst, const void* src, size_t nbytes) override {
    RETURN_IF_ERROR(d_->Bind());
    absl::MutexLock l(&d_->staging_mu);
    const auto* s = static_cast<const char*>(src);
    for (size_t off = 0; off < nbytes; off += d_->staging_bytes) {
      size_t n = std::min(d_->staging_bytes, nbytes - off);
      std::memcpy(d_->staging, s + off, n);
      KILN_CU_CHECK(*d_->api,
                    d_->api->cuMemcpyHtoDAsync(Ptr(dst) + off, d_->staging, n, d_->stream),
                    "copy to the GPU");
      KILN_CU_CHECK(*d_->api, d_->api->cuStreamSynchronize(d_->stream), "copy to the GPU");
    }
    return absl::OkStatus();
  }

  absl::Status CopyOut(void* dst, const void* src, size_t nbytes) override {
    RETURN_IF_ERROR(d_->Bind());
    absl::MutexLock l(&d_->staging_mu);
    auto* out = static_cast<char*>(dst);
    for (size_t off = 0; off < nbytes; off += d_->staging_bytes) {
      size_t n = std::min(d_->staging_bytes, nbytes - off);
      KILN_CU_CHECK(*d_->api,
                    d_->api->cuMemcpyDtoHAsync(d_->staging, Ptr(src) + off, n, d_->stream),
                    "copy from the GPU");
      KILN_CU_CHECK(*d_->api, d_->api->cuStreamSynchronize(d_->stream), "copy from the GPU");
      std::memcpy(out + off, d_->staging, n);
    }
    return absl::OkStatus();
  }

 protected:
  absl::StatusOr<void*> RawAlloc(size_t nbytes) override {
    RETURN_IF_ERROR(d_->Bind());
    CUdeviceptr p = 0;
    CUresult r = d_->api->cuMemAlloc(&p, std::max<size_t>(nbytes, 256));
    if (r != cuda::kSuccess)
      return absl::ResourceExhaustedError(
          absl::StrCat("GPU allocation of ", nbytes, " bytes: ", cuda::ErrorText(*d_->api, r)));
    return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  }
  void RawFree(void* ptr, size_t /*nbytes*/) override {
    if (!d_->Bind().ok()) return;
    d_->api->cuStreamSynchronize(d_->stream);  // kernels in flight may still use it
    d_->api->cuMemFree(Ptr(ptr));
  }

 private:
  static CUdeviceptr Ptr(const void* p) {
    return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
  }
  CudaDevice::Impl* d_;
};

// Kernel arguments as the driver wants them: values plus pointers to them.
struct KernelArgs {
  std::vector<CUdeviceptr> ptrs;
  std::vector<long long> vars;
  std::vector<void*> params;

  // `nparams` < 0: unknown, pass every buffer.
  absl::Status Set(const std::string& name, int nparams, const std::vector<void*>& bufs,
                   const std::vector<int64_t>& v) {
    size_t nb = nparams < 0 ? bufs.size()
                            : static_cast<size_t>(nparams) - std::min<size_t>(v.size(), nparams);
    if (nparams >= 0 && (v.size() > static_cast<size_t>(nparams) || bufs.size() < nb))
      return absl::InvalidArgumentError(absl::StrCat("CUDA kernel ", name, " takes ", nparams,
                                                     " arguments; got ", bufs.size(),
                                                     " buffers and ", v.size(), " vars"));
    ptrs.resize(nb);
    for (size_t i = 0; i < nb; ++i)
      ptrs[i] = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(bufs[i]));
    vars.assign(v.begin(), v.end());
    params.clear();
    for (CUdeviceptr& p : ptrs) params.push_back(&p);
    for (long long& x : vars) params.push_back(&x);
    return absl::OkStatus();
  }
};

absl::Status CheckDims(const std::string& name, const LaunchDims& d) {
  for (int i = 0; i < 3; ++i)
    if (d.global[i] < 1 || d.local[i] < 1 || d.global[i] > (i == 0 ? 2147483647 : 65535) ||
        d.local[i] > 1024)
      return absl::InvalidArgumentError(absl::StrCat("CUDA kernel ", name, ": bad launch dims"));
  return absl::OkStatus();
}

class CudaProgram : public Program {
 public:
  CudaProgram(std::string name, CudaDevice::Impl* d, cuda::CUmodule module, cuda::CUfunction fn,
              int nparams)
      : Program(std::move(name)), d_(d), module_(module), fn_(fn), nparams_(nparams) {}
  ~CudaProgram() override {
    if (d_->Bind().ok()) d_->api->cuModuleUnload(module_);
  }

  absl::Status Launch(const std::vector<void*>& bufs, const std::vector<int64_t>& vars,
                      const LaunchDims& dims, bool wait, double* seconds) override {
    RETURN_IF_ERROR(d_->Bind());
    RETURN_IF_ERROR(CheckDims(name(), dims));
    KernelArgs args;
    RETURN_IF_ERROR(args.Set(name(), nparams_, bufs, vars));
    const cuda::DriverApi& api = *d_->api;
    return d_->Timed(
        [&]() -> absl::Status {
          KILN_CU_CHECK(api,
                        api.cuLaunchKernel(fn_, dims.global[0], dims.global[1], dims.global[2],
                                           dims.local[0], dims.local[1], dims.local[2], 0,
                                           d_->stream, args.params.data(), nullptr),
                        absl::StrCat("launching ", name()));
          return absl::OkStatus();
        },
        wait, seconds);
  }

  cuda::CUfunction fn() const { return fn_; }
  int nparams() const { return nparams_; }

 private:
  CudaDevice::Impl* d_;
  cuda::CUmodule module_;
  cuda::CUfunction fn_;
  const int nparams_;
};

class CudaGraph : public GraphExecutor {
 public:
  explicit CudaGraph(CudaDevice::Impl* d) : d_(d) {}
  ~CudaGraph() override {
    if (!d_->Bind().ok()) return;
    if (exec_ != nullptr) d_->api->cuGraphExecDestroy(exec_);
    if (graph_ != nullptr) d_->api->cuGraphDestroy(graph_);
  }

  absl::Status Build(const std::vector<GraphLaunch>& launches) {
    const cuda::DriverApi& api = *d_->api;
    RETURN_IF_ERROR(d_->Bind());
    KILN_CU_CHECK(api, api.cuGraphCreate(&graph_, 0), "cuGraphCreate");
    nodes_.resize(launches.size());
    for (size_t i = 0; i < launches.size(); ++i) {
      const GraphLaunch& l = launches[i];
      auto* prog = dynamic_cast<CudaProgram*>(l.program);
      if (prog == nullptr) return absl::InvalidArgumentError("CUDA graph of a non-CUDA program");
      RETURN_IF_ERROR(CheckDims(prog->name(), l.dims));
      Node& n = nodes_[i];
      n.prog = prog;
      n.dims = l.dims;
      RETURN_IF_ERROR(n.args.Set(prog->name(), prog->nparams(), l.bufs, l.vars));
      cuda::KernelNodeParams p = Params(n);
      const cuda::CUgraphNode* dep = i == 0 ? nullptr : &nodes_[i - 1].node;
      KILN_CU_CHECK(api, api.cuGraphAddKernelNode(&n.node, graph_, dep, i == 0 ? 0 : 1, &p),
                    absl::StrCat("adding ", prog->name(), " to a CUDA graph"));
    }
    KILN_CU_CHECK(api, api.cuGraphInstantiateWithFlags(&exec_, graph_, 0), "cuGraphInstantiate");
    return absl::OkStatus();
  }

  absl::Status Update(size_t i, const std::vector<void*>& bufs,
                      const std::vector<int64_t>& vars) override {
    if (i >= nodes_.size()) return absl::OutOfRangeError("CUDA graph: no such launch");
    RETURN_IF_ERROR(d_->Bind());
    Node& n = nodes_[i];
    RETURN_IF_ERROR(n.args.Set(n.prog->name(), n.prog->nparams(), bufs, vars));
    cuda::KernelNodeParams p = Params(n);
    KILN_CU_CHECK(*d_->api, d_->api->cuGraphExecKernelNodeSetParams(exec_, n.node, &p),
                  absl::StrCat("patching ", n.prog->name(), " in a CUDA graph"));
    return absl::OkStatus();
  }

  absl::Status Run(bool wait, double* seconds) override {
    RETURN_IF_ERROR(d_->Bind());
    return d_->Timed(
        [&]() -> absl::Status {
          KILN_CU_CHECK(*d_->api, d_->api->cuGraphLaunch(exec_, d_->stream), "cuGraphLaunch");
          return absl::OkStatus();
        },
        wait, seconds);
  }

  size_t size() const override { return nodes_.size(); }

 private:
  struct Node {
    CudaProgram* prog = nullptr;
    LaunchDims dims;
    KernelArgs args;
    cuda::CUgraphNode node = nullptr;
  };
  static cuda::KernelNodeParams Params(Node& n) {
    cuda::KernelNodeParams p{};
    p.func = n.prog->fn();
    p.grid_x = static_cast<unsigned>(n.dims.global[0]);
    p.grid_y = static_cast<unsigned>(n.dims.global[1]);
    p.grid_z = static_cast<unsigned>(n.dims.global[2]);
    p.block_x = static_cast<unsigned>(n.dims.local[0]);
    p.block_y = static_cast<unsigned>(n.dims.local[1]);
    p.block_z = static_cast<unsigned>(n.dims.local[2]);
    p.kernel_params = n.args.params.data();
    return p;
  }

  CudaDevice::Impl* d_;
  cuda::CUgraph graph_ = nullptr;
  cuda::CUgraphExec exec_ = nullptr;
  std::vector<Node> nodes_;
};

}  // namespace

// --------------------------------------------------------------- CudaDevice

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(const Options& options) {
  auto impl = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(impl->api, cuda::LoadDriver());
  const cuda::DriverApi& api = *impl->api;
  int count = 0;
  CUresult r = api.cuDeviceGetCount(&count);
  if (r != cuda::kSuccess || count <= options.ordinal)
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA GPU ", options.ordinal, " (", count, " found)"));
  KILN_CU_CHECK(api, api.cuDeviceGet(&impl->dev, options.ordinal), "cuDeviceGet");
  int major = 0, minor = 0;
  api.cuDeviceGetAttribute(&major, cuda::kAttrComputeCapabilityMajor, impl->dev);
  api.cuDeviceGetAttribute(&minor, cuda::kAttrComputeCapabilityMinor, impl->dev);
  api.cuDeviceGetAttribute(&impl->sm_count, cuda::kAttrMultiprocessorCount, impl->dev);
  char name[256] = {0};
  api.cuDeviceGetName(name, sizeof(name) - 1, impl->dev);
  impl->compute_capability = major * 10 + minor;
  std::string arch = absl::StrCat("sm_", major, minor);
  impl->description = absl::StrCat(name, " (", arch, ", ", impl->sm_count, " SMs)");
  CudaCompiler::Options copts;
  copts.arch = arch;
  copts.cache_dir = options.cache_dir;
  ASSIGN_OR_RETURN(impl->compiler, CudaCompiler::Create(copts));
  KILN_CU_CHECK(api, api.cuDevicePrimaryCtxRetain(&impl->ctx, impl->dev),
                "cuDevicePrimaryCtxRetain");
  RETURN_IF_ERROR(impl->Bind());
  KILN_CU_CHECK(api, api.cuStreamCreate(&impl->stream, cuda::kStreamNonBlocking), "cuStreamCreate");
  impl->staging_bytes = std::max<size_t>(options.staging_bytes, 4096);
  {
    absl::MutexLock l(&impl->staging_mu);
    KILN_CU_CHECK(
        api, api.cuMemHostAlloc(&impl->staging, impl->staging_bytes, cuda::kMemHostAllocPortable),
        "allocating pinned staging memory");
  }
  impl->allocator = std::make_unique<CudaAllocator>(impl.get());
  return std::unique_ptr<CudaDevice>(new CudaDevice(std::move(impl)));
}

CudaDevice::CudaDevice(std::unique_ptr<Impl> impl) : Device("CUDA"), impl_(std::move(impl)) {}

CudaDevice::~CudaDevice() {
  if (!impl_->Bind().ok()) return;
  const cuda::DriverApi& api = *impl_->api;
  api.cuStreamSynchronize(impl_->stream);
  impl_->allocator.reset();
  {
    absl::MutexLock l(&impl_->staging_mu);
    api.cuMemFreeHost(impl_->staging);
  }
  api.cuStreamDestroy(impl_->stream);
  api.cuDevicePrimaryCtxRelease(impl_->dev);
}

Allocator& CudaDevice::allocator() { return *impl_->allocator; }
Compiler& CudaDevice::compiler() { return *impl_->compiler; }
const std::string& CudaDevice::description() const { return impl_->description; }
int CudaDevice::sm_count() const { return impl_->sm_count; }
int CudaDevice::compute_capability() const { return impl_->compute_capability; }

absl::Status CudaDevice::Synchronize() {
  RETURN_IF_ERROR(impl_->Bind());
  KILN_CU_CHECK(*impl_->api, impl_->api->cuStreamSynchronize(impl_->stream), "cuStreamSynchronize");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Program>> CudaDevice::LoadProgram(const std::string& function,
                                                                 const std::string& binary) {
  RETURN_IF_ERROR(impl_->Bind());
  const cuda::DriverApi& api = *impl_->api;
  cuda::CUmodule module = nullptr;
  // PTX must be NUL-terminated; std::string's data() is.
  KILN_CU_CHECK(api, api.cuModuleLoadData(&module, binary.c_str()),
                absl::StrCat("loading CUDA module of ", function));
  cuda::CUfunction fn = nullptr;
  CUresult r = api.cuModuleGetFunction(&fn, module, function.c_str());
  if (r != cuda::kSuccess) {
    api.cuModuleUnload(module);
    return absl::NotFoundError(
        absl::StrCat("CUDA kernel '", function, "': ", cuda::ErrorText(api, r)));
  }
  int nparams = -1;
  if (api.cuFuncGetParamInfo != nullptr) {
    nparams = 0;
    size_t off = 0, size = 0;
    while (nparams < 4096 && api.cuFuncGetParamInfo(fn, nparams, &off, &size) == cuda::kSuccess)
      ++nparams;
  }
  return std::unique_ptr<Program>(
      std::make_unique<CudaProgram>(function, impl_.get(), module, fn, nparams));
}

absl::StatusOr<std::unique_ptr<GraphExecutor>> CudaDevice::NewGraph(
    const std::vector<GraphLaunch>& launches) {
  auto g = std::make_unique<CudaGraph>(impl_.get());
  RETURN_IF_ERROR(g->Build(launches));
  return std::unique_ptr<GraphExecutor>(std::move(g));
}

absl::Status CudaDevice::CopyOnDevice(void* dst, const void* src, size_t nbytes, double* seconds) {
  RETURN_IF_ERROR(impl_->Bind());
  const cuda::DriverApi& api = *impl_->api;
  return impl_->Timed(
      [&]() -> absl::Status {
        KILN_CU_CHECK(
            api,
            api.cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(dst)),
                                  static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(src)),
                                  nbytes, impl_->stream),
            "device-to-device copy");
        return absl::OkStatus();
      },
      /*wait=*/true, seconds);
}

}  // namespace kiln

#include "engine/runtime/opencl_device.h"

#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "engine/base/flags.h"
#include "engine/base/status.h"
#include "engine/runtime/disk_cache.h"
#include "engine/runtime/pocl_binary.h"

namespace kiln {
namespace {

// The OpenCL entry points kiln uses, resolved from the ICD loader.
#define KILN_CL_FUNCTIONS(X)                                                                       \
  X(clGetPlatformIDs)                                                                              \
  X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext) X(clReleaseContext) \
      X(clCreateCommandQueue) X(clReleaseCommandQueue) X(clCreateBuffer) X(clReleaseMemObject)     \
          X(clEnqueueWriteBuffer) X(clEnqueueReadBuffer) X(clCreateProgramWithSource)              \
              X(clCreateProgramWithBinary) X(clBuildProgram) X(clGetProgramBuildInfo)              \
                  X(clGetProgramInfo) X(clReleaseProgram) X(clCreateKernel) X(clReleaseKernel)     \
                      X(clGetKernelInfo) X(clSetKernelArg) X(clEnqueueNDRangeKernel) X(clFinish)   \
                          X(clWaitForEvents) X(clGetEventProfilingInfo) X(clReleaseEvent)

struct ClApi {
#define KILN_CL_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_CL_FUNCTIONS(KILN_CL_MEMBER)
#undef KILN_CL_MEMBER
};

absl::StatusOr<ClApi> LoadClApi() {
  void* h = nullptr;
  std::string errors;
  for (const char* lib : {"libOpenCL.so.1", "libOpenCL.so"}) {
    h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) break;
    const char* e = dlerror();
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", e ? e : lib);
  }
  if (h == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(
        "the OPENCL device needs the OpenCL ICD loader libOpenCL.so.1 (Debian: apt-get install "
        "ocl-icd-libopencl1 pocl-opencl-icd): ",
        errors));
  ClApi api;
#define KILN_CL_RESOLVE(name)                                       \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(h, #name)); \
  if (api.name == nullptr) return absl::FailedPreconditionError("libOpenCL.so.1 lacks " #name);
  KILN_CL_FUNCTIONS(KILN_CL_RESOLVE)
#undef KILN_CL_RESOLVE
  return api;  // the loader stays loaded for the life of the process
}

std::string ClError(cl_int e) {
  switch (e) {
    case CL_DEVICE_NOT_FOUND:
      return "CL_DEVICE_NOT_FOUND";
    case CL_OUT_OF_RESOURCES:
      return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY:
      return "CL_OUT_OF_HOST_MEMORY";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
      return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_BUILD_PROGRAM_FAILURE:
      return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE:
      return "CL_INVALID_VALUE";
    case CL_INVALID_KERNEL_NAME:
      return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_ARG_INDEX:
      return "CL_INVALID_ARG_INDEX";
    case CL_INVALID_ARG_SIZE:
      return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_KERNEL_ARGS:
      return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_WORK_GROUP_SIZE:
      return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_WORK_ITEM_SIZE:
      return "CL_INVALID_WORK_ITEM_SIZE";
    case CL_INVALID_BUFFER_SIZE:
      return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_BINARY:
      return "CL_INVALID_BINARY";
    case -1001:
      return "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL platform)";
    default:
      return absl::StrCat("OpenCL error ", e);
  }
}

#define KILN_CL_CHECK(call, what)                                                  \
  do {                                                                             \
    cl_int kiln_cl_err_ = (call);                                                  \
    if (kiln_cl_err_ != CL_SUCCESS)                                                \
      return absl::InternalError(absl::StrCat(what, ": ", ClError(kiln_cl_err_))); \
  } while (0)

std::string PlatformInfo(const ClApi& api, cl_platform_id p, cl_platform_info what) {
  char buf[512] = {0};
  api.clGetPlatformInfo(p, what, sizeof(buf) - 1, buf, nullptr);
  return buf;
}

std::string DeviceInfo(const ClApi& api, cl_device_id d, cl_device_info what) {
  char buf[512] = {0};
  api.clGetDeviceInfo(d, what, sizeof(buf) - 1, buf, nullptr);
  return buf;
}

}  // namespace

struct OpenClDevice::Impl {
  ClApi api;
  cl_context ctx = nullptr;
  cl_device_id device = nullptr;
  cl_command_queue queue = nullptr;
  std::string description;
  std::string key_prefix;  // device, driver and platform identity for the cache
  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<Compiler> compiler;

  // Builds a program from source (binary empty) or binary; returns it.
  absl::StatusOr<cl_program> Build(const std::string& source, const std::string& binary) {
    cl_int err = CL_SUCCESS;
    cl_program prog;
    if (binary.empty()) {
      const char* src = source.c_str();
      size_t len = source.size();
      prog = api.clCreateProgramWithSource(ctx, 1, &src, &len, &err);
    } else {
      const unsigned char* bin = reinterpret_cast<const unsigned char*>(binary.data());
      size_t len = binary.size();
      cl_int bin_status = CL_SUCCESS;
      prog = api.clCreateProgramWithBinary(ctx, 1, &device, &len, &bin, &bin_status, &err);
      if (err == CL_SUCCESS && bin_status != CL_SUCCESS) err = bin_status;
    }
    if (err != CL_SUCCESS)
      return absl::InternalError(absl::StrCat("creating an OpenCL program: ", ClError(err)));
    err = api.clBuildProgram(prog, 1, &device, "-cl-std=CL1.2", nullptr, nullptr);
    if (err != CL_SUCCESS) {
      char log[8192] = {0};
      api.clGetProgramBuildInfo(prog, device, CL_PROGRAM_BUILD_LOG, sizeof(log) - 1, log, nullptr);
      api.clReleaseProgram(prog);
      return absl::InvalidArgumentError(absl::StrCat("OpenCL build failed (", ClError(err), "):\n",
                                                     log, binary.empty() ? "\nsource:\n" : "",
                                                     binary.empty() ? source.substr(0, 4000) : ""));
    }
    return prog;
  }
};

namespace {

class ClAllocator : public Allocator {
 public:
  explicit ClAllocator(OpenClDevice::Impl* d) : d_(d) {}
  ~ClAllocator() override { ClearCache(); }
  absl::Status CopyIn(void* dst, const void* src, size_t nbytes) override {
    KILN_CL_CHECK(d_->api.clEnqueueWriteBuffer(d_->queue, static_cast<cl_mem>(dst), CL_TRUE, 0,
                                               nbytes, src, 0, nullptr, nullptr),
                  "OpenCL copy to device");
    return absl::OkStatus();
  }
  absl::Status CopyOut(void* dst, const void* src, size_t nbytes) override {
    KILN_CL_CHECK(
        d_->api.clEnqueueReadBuffer(d_->queue, static_cast<cl_mem>(const_cast<void*>(src)), CL_TRUE,
                                    0, nbytes, dst, 0, nullptr, nullptr),
        "OpenCL copy from device");
    return absl::OkStatus();
  }

 protected:
  absl::StatusOr<void*> RawAlloc(size_t nbytes) override {
    cl_int err = CL_SUCCESS;
    cl_mem m = d_->api.clCreateBuffer(d_->ctx, CL_MEM_READ_WRITE, std::max<size_t>(nbytes, 64),
                                      nullptr, &err);
    if (err != CL_SUCCESS)
      return absl::ResourceExhaustedError(
          absl::StrCat("OpenCL allocation of ", nbytes, " bytes: ", ClError(err)));
    return static_cast<void*>(m);
  }
  void RawFree(void* ptr, size_t /*nbytes*/) override {
    d_->api.clReleaseMemObject(static_cast<cl_mem>(ptr));
  }

 private:
  OpenClDevice::Impl* d_;
};

class ClCompiler : public Compiler {
 public:
  ClCompiler(OpenClDevice::Impl* d, const std::string& dir) : d_(d), cache_(dir, "opencl") {}

  absl::StatusOr<std::string> Compile(const std::string& source) override {
    const std::string key = d_->key_prefix + source;
    // A cached binary that fails the check (written before kiln checked, or
    // torn) is rebuilt and overwritten.
    if (std::optional<std::string> hit = cache_.Get(key); hit && CheckPoclBinary(*hit).ok()) {
      absl::MutexLock l(&mu_);
      ++stats_.disk_hits;
      return *hit;
    }
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::string> binary;
    // PoCL serializes a binary from its own shared disk cache; a rebuild a
    // moment later reads the file again once the other process is done.
    for (int attempt = 0; attempt < kBuildAttempts; ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20 << attempt));
      binary = BuildBinary(source);
      if (!binary.ok() || CheckPoclBinary(*binary).ok()) break;
    }
    if (!binary.ok()) return binary.status();
    RETURN_IF_ERROR(CheckPoclBinary(*binary));
    cache_.Put(key, *binary);
    absl::MutexLock l(&mu_);
    ++stats_.compiled;
    stats_.compile_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return binary;
  }
  Stats stats() const override {
    absl::MutexLock l(&mu_);
    return stats_;
  }

 private:
  static constexpr int kBuildAttempts = 3;

  // Builds `source` and returns the program binary the driver gives back.
  absl::StatusOr<std::string> BuildBinary(const std::string& source) {
    ASSIGN_OR_RETURN(cl_program prog, d_->Build(source, ""));
    size_t size = 0;
    cl_int err =
        d_->api.clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr);
    std::string binary(size, '\0');
    unsigned char* ptr = reinterpret_cast<unsigned char*>(binary.data());
    if (err == CL_SUCCESS)
      err = d_->api.clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof(ptr), &ptr, nullptr);
    d_->api.clReleaseProgram(prog);
    if (err != CL_SUCCESS || size == 0)
      return absl::InternalError(absl::StrCat("reading the OpenCL program binary: ", ClError(err)));
    return binary;
  }

  OpenClDevice::Impl* d_;
  DiskCache cache_;
  mutable absl::Mutex mu_;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

class ClProgram : public Program {
 public:
  ClProgram(std::string name, OpenClDevice::Impl* d, cl_program prog, cl_kernel kernel,
            cl_uint num_args)
      : Program(std::move(name)), d_(d), prog_(prog), kernel_(kernel), num_args_(num_args) {}
  ~ClProgram() override {
    d_->api.clReleaseKernel(kernel_);
    d_->api.clReleaseProgram(prog_);
  }

  absl::Status Launch(const std::vector<void*>& bufs, const std::vector<int64_t>& vars,
                      const LaunchDims& dims, bool wait, double* seconds) override {
    if (vars.size() > num_args_ || bufs.size() < num_args_ - vars.size())
      return absl::InvalidArgumentError(absl::StrCat("OpenCL kernel ", name(), " takes ", num_args_,
                                                     " arguments; got ", bufs.size(),
                                                     " buffers and ", vars.size(), " vars"));
    const size_t nb = num_args_ - vars.size();
    size_t global[3], local[3];
    for (int i = 0; i < 3; ++i) {
      global[i] = static_cast<size_t>(dims.global[i] * dims.local[i]);
      local[i] = static_cast<size_t>(dims.local[i]);
    }
    cl_event ev = nullptr;
    {
      // Arguments and the enqueue form one step (cl_kernel args are shared).
      absl::MutexLock l(&mu_);
      for (size_t i = 0; i < nb; ++i) {
        cl_mem m = static_cast<cl_mem>(bufs[i]);
        KILN_CL_CHECK(d_->api.clSetKernelArg(kernel_, static_cast<cl_uint>(i), sizeof(m), &m),
                      absl::StrCat("setting buffer ", i, " of ", name()));
      }
      for (size_t j = 0; j < vars.size(); ++j) {
        cl_long v = vars[j];
        KILN_CL_CHECK(d_->api.clSetKernelArg(kernel_, static_cast<cl_uint>(nb + j), sizeof(v), &v),
                      absl::StrCat("setting var ", j, " of ", name()));
      }
      KILN_CL_CHECK(d_->api.clEnqueueNDRangeKernel(d_->queue, kernel_, 3, nullptr, global, local, 0,
                                                   nullptr, seconds ? &ev : nullptr),
                    absl::StrCat("launching ", name()));
    }
    if (seconds != nullptr) {
      cl_int err = d_->api.clWaitForEvents(1, &ev);
      cl_ulong t0 = 0, t1 = 0;
      if (err == CL_SUCCESS)
        err = d_->api.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof(t0), &t0,
                                              nullptr);
      if (err == CL_SUCCESS)
        err =
            d_->api.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof(t1), &t1, nullptr);
      d_->api.clReleaseEvent(ev);
      KILN_CL_CHECK(err, absl::StrCat("timing ", name()));
      *seconds = static_cast<double>(t1 - t0) * 1e-9;
    } else if (wait) {
      KILN_CL_CHECK(d_->api.clFinish(d_->queue), absl::StrCat("running ", name()));
    }
    return absl::OkStatus();
  }

 private:
  OpenClDevice::Impl* d_;
  cl_program prog_;
  cl_kernel kernel_;
  const cl_uint num_args_;
  absl::Mutex mu_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<OpenClDevice>> OpenClDevice::Create(const Options& options) {
  auto impl = std::make_unique<Impl>();
  std::string root = options.cache_dir.empty() ? Env().cache_dir : options.cache_dir;
  // PoCL keeps its own kernel cache under $HOME, which sandboxes (Bazel's
  // tests) often cannot write; point it into kiln's cache unless the user
  // chose a place. Done before the platform is first queried.
  if (std::getenv("POCL_CACHE_DIR") == nullptr) {
    DiskCache pocl(root + "/pocl", "pocl");
    std::string dir = pocl.dir();
    if (!dir.empty()) setenv("POCL_CACHE_DIR", dir.c_str(), 0);
  }
  ASSIGN_OR_RETURN(impl->api, LoadClApi());
  const ClApi& api = impl->api;
  cl_uint np = 0;
  cl_int err = api.clGetPlatformIDs(0, nullptr, &np);
  if (err != CL_SUCCESS || np == 0)
    return absl::FailedPreconditionError(
        absl::StrCat("no OpenCL platform (", err == CL_SUCCESS ? "none installed" : ClError(err),
                     "); install an ICD such as pocl-opencl-icd"));
  std::vector<cl_platform_id> platforms(np);
  api.clGetPlatformIDs(np, platforms.data(), nullptr);
  cl_platform_id platform = nullptr;
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (api.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &impl->device, &nd) == CL_SUCCESS && nd > 0) {
      platform = p;
      break;
    }
  }
  if (platform == nullptr)
    return absl::FailedPreconditionError("no OpenCL device on any of the installed platforms");
  impl->ctx = api.clCreateContext(nullptr, 1, &impl->device, nullptr, nullptr, &err);
  if (err != CL_SUCCESS)
    return absl::FailedPreconditionError(absl::StrCat("clCreateContext: ", ClError(err)));
  impl->queue = api.clCreateCommandQueue(impl->ctx, impl->device, CL_QUEUE_PROFILING_ENABLE, &err);
  if (err != CL_SUCCESS) {
    api.clReleaseContext(impl->ctx);
    return absl::FailedPreconditionError(absl::StrCat("clCreateCommandQueue: ", ClError(err)));
  }
  std::string pname = PlatformInfo(api, platform, CL_PLATFORM_NAME);
  std::string dname = DeviceInfo(api, impl->device, CL_DEVICE_NAME);
  impl->description = absl::StrCat(pname, " / ", dname);
  impl->key_prefix =
      absl::StrCat(pname, "\n", PlatformInfo(api, platform, CL_PLATFORM_VERSION), "\n", dname, "\n",
                   DeviceInfo(api, impl->device, CL_DRIVER_VERSION), "\n",
                   DeviceInfo(api, impl->device, CL_DEVICE_VERSION), "\n");
  impl->allocator = std::make_unique<ClAllocator>(impl.get());
  impl->compiler = std::make_unique<ClCompiler>(impl.get(), root + "/opencl");
  return std::unique_ptr<OpenClDevice>(new OpenClDevice(std::move(impl)));
}

OpenClDevice::OpenClDevice(std::unique_ptr<Impl> impl) : Device("OPENCL"), impl_(std::move(impl)) {}

OpenClDevice::~OpenClDevice() {
  impl_->api.clFinish(impl_->queue);
  impl_->compiler.reset();
  impl_->allocator.reset();
  impl_->api.clReleaseCommandQueue(impl_->queue);
  impl_->api.clReleaseContext(impl_->ctx);
}

Allocator& OpenClDevice::allocator() { return *impl_->allocator; }
Compiler& OpenClDevice::compiler() { return *impl_->compiler; }
const std::string& OpenClDevice::description() const { return impl_->description; }

absl::Status OpenClDevice::Synchronize() {
  KILN_CL_CHECK(impl_->api.clFinish(impl_->queue), "clFinish");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Program>> OpenClDevice::LoadProgram(const std::string& function,
                                                                   const std::string& binary) {
  RETURN_IF_ERROR(CheckPoclBinary(binary));  // PoCL aborts on a torn binary
  ASSIGN_OR_RETURN(cl_program prog, impl_->Build("", binary));
  cl_int err = CL_SUCCESS;
  cl_kernel kernel = impl_->api.clCreateKernel(prog, function.c_str(), &err);
  if (err != CL_SUCCESS) {
    impl_->api.clReleaseProgram(prog);
    return absl::NotFoundError(absl::StrCat("OpenCL kernel '", function, "': ", ClError(err)));
  }
  cl_uint num_args = 0;
  err =
      impl_->api.clGetKernelInfo(kernel, CL_KERNEL_NUM_ARGS, sizeof(num_args), &num_args, nullptr);
  if (err != CL_SUCCESS) {
    impl_->api.clReleaseKernel(kernel);
    impl_->api.clReleaseProgram(prog);
    return absl::InternalError(absl::StrCat("OpenCL kernel info: ", ClError(err)));
  }
  return std::unique_ptr<Program>(
      std::make_unique<ClProgram>(function, impl_.get(), prog, kernel, num_args));
}

}  // namespace kiln

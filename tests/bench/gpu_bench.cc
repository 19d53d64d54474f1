// GPU benchmarks on the CUDA device. One `name: value unit` line per result
// (lines starting with '#' describe the machine). GPU times come from CUDA
// events around the kernel; replay overheads are host wall time.
//   fp32_peak                      TFLOP/s of an FMA-chain kernel (measured peak)
//   matmul_4096_fp32 / _fp16       TFLOP/s of kiln's matmul kernel
//   copy_bandwidth                 GB/s of cuMemcpyDtoD (bytes read + written)
//   elementwise_add_bandwidth      GB/s of c = a + b on 64M floats (3 x 256 MB)
//   jit_replay_{graph,nograph}     host us per kernel, replaying 200 tiny kernels
//   nvrtc_compile_time             ms per kernel (fresh cache)
// Usage: gpu_bench [--quick] [name-filter]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "engine/base/status.h"
#include "engine/jit/jit.h"
#include "engine/runtime/cuda_device.h"
#include "engine/tensor/tensor.h"
#include "tests/bench/bench_util.h"

namespace kiln::bench {
namespace {

bool quick = false;
std::string filter;

bool Want(const std::string& name) {
  return filter.empty() || name.find(filter) != std::string::npos;
}

void Check(const absl::Status& s, const std::string& what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s failed: %s\n", what.c_str(), std::string(s.message()).c_str());
    std::exit(1);
  }
}

// The kernels `t`'s realization runs, captured (t is realized).
std::vector<ExecItem> Kernels(Tensor t) {
  CaptureScope scope;
  Check(t.Realize(), "realize");
  return scope.Take();
}

// Median GPU seconds of one kernel.
double KernelSeconds(const ExecItem& e, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps + 1; ++i) {
    double s = 0;
    Check(e.Run(&s), e.kernel->name);
    if (i > 0) t.push_back(s);  // the first run warms up
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void BenchPeak(CudaDevice* dev) {
  if (!Want("fp32_peak")) return;
  // 8 independent FMA chains per thread, unrolled: 16 FLOPs per step.
  const std::string src =
      R"(extern "C" __global__ void __launch_bounds__(256) peak(float* out, long long iters) {
  float a = threadIdx.x * 1e-9f, b = 0.999f;
  float c0 = a, c1 = a + 1, c2 = a + 2, c3 = a + 3, c4 = a + 4, c5 = a + 5, c6 = a + 6, c7 = a + 7;
  for (long long i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      c0 = fmaf(c0, b, a); c1 = fmaf(c1, b, a); c2 = fmaf(c2, b, a); c3 = fmaf(c3, b, a);
      c4 = fmaf(c4, b, a); c5 = fmaf(c5, b, a); c6 = fmaf(c6, b, a); c7 = fmaf(c7, b, a);
    }
  }
  out[blockIdx.x * 256 + threadIdx.x] = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7;
})";
  auto bin = dev->compiler().Compile(src);
  Check(bin.status(), "compile peak");
  auto prog = dev->LoadProgram("peak", *bin);
  Check(prog.status(), "load peak");
  LaunchDims dims;
  dims.global = {dev->sm_count() * 16, 1, 1};
  dims.local = {256, 1, 1};
  auto out = dev->NewBuffer(dims.global[0] * 256 * 4);
  auto ptr = (*out)->Ptr();
  Check(ptr.status(), "alloc");
  const int64_t iters = 4096;
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    double s = 0;
    Check((*prog)->Launch({*ptr}, {iters}, dims, true, &s), "peak");
    if (i > 0) best = std::min(best, s);
  }
  double flops = 2.0 * 64 * iters * dims.global[0] * 256;
  Report("fp32_peak", flops / best * 1e-12, "TFLOP/s");
}

void BenchMatmul(Engine* e, DType dt, const std::string& name) {
  if (!Want(name)) return;
  const int64_t n = 4096;
  Tensor a = Tensor::Rand(e, {n, n}, 1, dtypes::kFloat32, "CUDA").Cast(dt);
  Tensor b = Tensor::Rand(e, {n, n}, 2, dtypes::kFloat32, "CUDA").Cast(dt);
  Check(a.Realize(), "rand");
  Check(b.Realize(), "rand");
  std::vector<ExecItem> ks = Kernels(a.Matmul(b));
  double total = 0;
  for (const ExecItem& k : ks) total += KernelSeconds(k, quick ? 2 : 5);
  Report(name, 2.0 * n * n * n / total * 1e-12, "TFLOP/s");
  Report(name + "_kernels", static_cast<double>(ks.size()), "kernels");
}

void BenchBandwidth(Engine* e, CudaDevice* dev) {
  const int64_t n = int64_t{64} << 20;
  if (Want("copy_bandwidth")) {
    auto src = dev->NewBuffer(n * 4), dst = dev->NewBuffer(n * 4);
    auto sp = (*src)->Ptr(), dp = (*dst)->Ptr();
    Check(sp.status(), "alloc");
    Check(dp.status(), "alloc");
    double best = 1e30;
    for (int i = 0; i < 6; ++i) {
      double s = 0;
      Check(dev->CopyOnDevice(*dp, *sp, n * 4, &s), "copy");
      if (i > 0) best = std::min(best, s);
    }
    Report("copy_bandwidth", 2.0 * n * 4 / best * 1e-9, "GB/s");
  }
  if (Want("elementwise_add_bandwidth")) {
    Tensor a = Tensor::Rand(e, {n}, 3, dtypes::kFloat32, "CUDA");
    Tensor b = Tensor::Rand(e, {n}, 4, dtypes::kFloat32, "CUDA");
    Check(a.Realize(), "rand");
    Check(b.Realize(), "rand");
    std::vector<ExecItem> ks = Kernels(a + b);
    Check(ks.size() == 1 ? absl::OkStatus() : absl::InternalError("not one kernel"), "add");
    double s = KernelSeconds(ks[0], 5);
    Report("elementwise_add_bandwidth", 3.0 * n * 4 / s * 1e-9, "GB/s");
  }
}

void BenchReplay(Engine* e) {
  const int kKernels = 200;
  for (bool graphs : {true, false}) {
    std::string name = graphs ? "jit_replay_graph" : "jit_replay_nograph";
    if (!Want(name)) continue;
    Jit::Options o;
    o.use_graphs = graphs;
    Jit jit(
        [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
          Tensor x = in[0];
          for (int i = 0; i < kKernels; ++i) x = (x * 1.0001 + 1.0).Contiguous();
          return std::vector<Tensor>{x};
        },
        o);
    Tensor x = Tensor::Rand(e, {16}, 3, dtypes::kFloat32, "CUDA");
    Check(x.Realize(), "input");
    auto dev = e->GetDevice("CUDA");
    auto run = [&] {
      Check(jit({x}).status(), name);
      Check((*dev)->Synchronize(), "sync");
    };
    double s = MedianSeconds(run, quick ? 20 : 200, 3);
    Report(name, s / kKernels * 1e6, "us/kernel");
  }
}

void BenchCompile(Engine* e) {
  if (!Want("nvrtc_compile_time")) return;
  const int kKernels = quick ? 4 : 16;
  std::vector<Tensor> outs;
  for (int i = 0; i < kKernels; ++i)
    outs.push_back((Tensor::Rand(e, {17 + i, 33}, 40 + i, dtypes::kFloat32, "CUDA") * 2.0 + 1.0)
                       .Sum({1})
                       .Sqrt());
  absl::Status status;
  double ms = CompileMsPerKernel(e, &outs, &status);
  Check(status, "realize");
  Report("nvrtc_compile_time", ms, "ms/kernel");
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  using namespace kiln;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      bench::quick = true;
    else
      bench::filter = argv[i];
  }
  // A private kernel cache so compile times are real.
  char tmpl[] = "/tmp/kiln-gpu-bench-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  auto registry = std::make_unique<DeviceRegistry>();
  registry->Register("CUDA", [dir]() -> absl::StatusOr<std::unique_ptr<Device>> {
    CudaDevice::Options o;
    if (dir) o.cache_dir = dir;
    ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> d, CudaDevice::Create(o));
    return std::unique_ptr<Device>(std::move(d));
  });
  Engine engine(registry.get());
  auto dev = engine.GetDevice("CUDA");
  bench::Check(dev.status(), "CUDA device");
  auto* cuda = static_cast<CudaDevice*>(*dev);
  std::printf("# device: %s\n", cuda->description().c_str());
  bench::BenchCompile(&engine);
  bench::BenchPeak(cuda);
  bench::BenchBandwidth(&engine, cuda);
  bench::BenchReplay(&engine);
  bench::BenchMatmul(&engine, dtypes::kFloat32, "matmul_4096_fp32");
  bench::BenchMatmul(&engine, dtypes::kFloat16, "matmul_4096_fp16");
  if (dir) {
    std::error_code ec;  // best effort: a leftover temporary directory is harmless
    std::filesystem::remove_all(dir, ec);
  }
  return 0;
}

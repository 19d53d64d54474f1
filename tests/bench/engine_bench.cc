// Engine benchmarks (run by tools/bench with -c opt). Prints one
// `name: value unit` line per result.
//   matmul_1024_fp32, matmul_4096_fp32   GFLOP/s of the kernel (JIT replay)
//   conv_net_64                          ms per forward of a small CNN (JIT)
//   jit_replay_overhead                  host us per replayed tiny kernel
//   compile_time                         ms per kernel, batched clang compile
// Usage: engine_bench [--quick] [name-filter]
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "engine/jit/jit.h"
#include "engine/runtime/cpu_device.h"
#include "engine/tensor/tensor.h"
#include "tests/bench/bench_util.h"

namespace kiln::bench {
namespace {

bool quick = false;
std::string filter;

bool Want(const std::string& name) { return filter.empty() || name.find(filter) != std::string::npos; }

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s failed: %s\n", what, std::string(s.message()).c_str());
    std::exit(1);
  }
}

void BenchMatmul(Engine* e, int64_t n) {
  std::string name = "matmul_" + std::to_string(n) + "_fp32";
  if (!Want(name)) return;
  Tensor a = Tensor::Rand(e, {n, n}, 1), b = Tensor::Rand(e, {n, n}, 2);
  Check(a.Realize(), "rand");
  Check(b.Realize(), "rand");
  Jit jit([](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    return std::vector<Tensor>{in[0].Matmul(in[1])};
  });
  auto run = [&] { Check(jit({a, b}).status(), name.c_str()); };
  int reps = n >= 4096 ? 3 : 20;
  double s = MedianSeconds(run, quick ? 3 : reps, 2, n >= 4096 ? 30 : 10);
  Report(name, 2.0 * n * n * n / s * 1e-9, "GFLOP/s");
}

// The small CNN of ../shared/notes/peers.md: 4x (conv3x3 32ch + relu +
// maxpool2) on 1x3x64x64, then a fully connected layer to 10 classes.
void BenchConvNet(Engine* e) {
  if (!Want("conv_net_64")) return;
  std::vector<Tensor> w;
  int64_t cin = 3;
  for (int i = 0; i < 4; ++i) {
    w.push_back(Tensor::Randn(e, {32, cin, 3, 3}, 10 + i) * 0.2);
    w.push_back(Tensor::Randn(e, {32}, 20 + i) * 0.1);
    cin = 32;
  }
  w.push_back(Tensor::Randn(e, {10, 32 * 4 * 4}, 30) * 0.05);
  for (Tensor& t : w) Check(t.Realize(), "weights");
  Jit jit([w](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    Tensor x = in[0];
    Tensor::ConvOptions conv;
    conv.padding = {{1, 1}, {1, 1}};
    Tensor::PoolOptions pool;
    pool.kernel = {2, 2};
    for (int i = 0; i < 4; ++i) x = x.Conv(w[2 * i], &w[2 * i + 1], conv).Relu().MaxPool(pool);
    return std::vector<Tensor>{x.Flatten(1).Linear(w[8])};
  });
  Tensor x = Tensor::Rand(e, {1, 3, 64, 64}, 5);
  Check(x.Realize(), "input");
  auto run = [&] { Check(jit({x}).status(), "conv_net_64"); };
  double s = MedianSeconds(run, quick ? 5 : 50, 3);
  Report("conv_net_64", s * 1e3, "ms");
  auto caps = jit.captures();
  if (!caps.empty()) Report("conv_net_64_kernels", static_cast<double>(caps[0].kernels), "kernels");
}

void BenchReplayOverhead(Engine* e) {
  if (!Want("jit_replay_overhead")) return;
  const int kKernels = 200;
  Jit jit([](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    Tensor x = in[0];
    for (int i = 0; i < kKernels; ++i) x = (x * 1.0001 + 1.0).Contiguous();
    return std::vector<Tensor>{x};
  });
  Tensor x = Tensor::Rand(e, {16}, 3);
  Check(x.Realize(), "input");
  auto run = [&] { Check(jit({x}).status(), "replay"); };
  double s = MedianSeconds(run, quick ? 20 : 200, 3);
  Report("jit_replay_overhead", s / kKernels * 1e6, "us/kernel");
}

void BenchCompile(Engine* e) {
  if (!Want("compile_time")) return;
  // Distinct kernels (different sizes) compiled in one batch into a fresh cache.
  const int kKernels = quick ? 8 : 32;
  std::vector<Tensor> outs;
  for (int i = 0; i < kKernels; ++i) {
    Tensor a = Tensor::Rand(e, {17 + i, 33}, 40 + i);
    Check(a.Realize(), "rand");
    outs.push_back((a * 2.0 + 1.0).Sum({1}).Sqrt());
  }
  absl::Status status;
  double ms = CompileMsPerKernel(e, &outs, &status);
  Check(status, "realize");
  Report("compile_time", ms, "ms/kernel");
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  using namespace kiln;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) bench::quick = true;
    else bench::filter = argv[i];
  }
  // A private kernel cache so compile_time measures real compiles.
  char tmpl[] = "/tmp/kiln-bench-cache-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  auto registry = std::make_unique<DeviceRegistry>();
  registry->Register("CPU", [dir]() -> absl::StatusOr<std::unique_ptr<Device>> {
    CpuDevice::Options o;
    if (dir) o.cache_dir = dir;
    return std::unique_ptr<Device>(new CpuDevice(o));
  });
  Engine engine(registry.get());
  bench::BenchCompile(&engine);
  bench::BenchReplayOverhead(&engine);
  bench::BenchMatmul(&engine, 1024);
  bench::BenchConvNet(&engine);
  if (!bench::quick) bench::BenchMatmul(&engine, 4096);
  if (dir) {
    std::error_code ec;  // best effort: a leftover temporary directory is harmless
    std::filesystem::remove_all(dir, ec);
  }
  return 0;
}

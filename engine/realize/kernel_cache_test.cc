// The engine's kernel cache over a long run: a kernel evicted from the LRU
// and needed again gets the same name and source, so the device's disk
// cache serves it (no clang run) and its library is loaded only while a
// program from it lives.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/realize/engine.h"
#include "engine/runtime/cpu_device.h"
#include "engine/tensor/tensor.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

std::string NewTempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/kiln-kcache-XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  return dir ? std::string(dir) : std::string();
}

// The default devices, with a CPU device over a kernel cache of its own
// (a new directory); *cpu is set when the engine makes it.
std::unique_ptr<DeviceRegistry> RegistryWithOwnCache(CpuDevice** cpu) {
  CpuDevice::Options o;
  o.cache_dir = NewTempDir();
  EXPECT_FALSE(o.cache_dir.empty());
  auto registry = DeviceRegistry::WithDefaults();
  registry->Register("CPU", [o, cpu]() -> absl::StatusOr<std::unique_ptr<Device>> {
    auto d = std::make_unique<CpuDevice>(o);
    *cpu = d.get();
    return std::unique_ptr<Device>(std::move(d));
  });
  return registry;
}

TEST(KernelCacheTest, EvictedKernelComesBackUnderItsNameFromTheDiskCache) {
  CpuDevice* cpu = nullptr;
  auto registry = RegistryWithOwnCache(&cpu);
  EngineOptions options;
  options.kernel_cache_entries = 1;
  Engine engine(registry.get(), options);
  std::vector<float> data(64, 1.5f);
  Tensor x = Tensor::FromFloats(&engine, data, {64}, "CPU");
  auto run = [&](double k) -> std::vector<float> {
    absl::StatusOr<std::vector<float>> v = (x * k + 1.0).ToVector<float>();
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : std::vector<float>();
  };
  ASSERT_EQ(run(2.0)[0], 4.0f);
  ASSERT_NE(cpu, nullptr);
  const uint64_t clang_runs = cpu->compiler().stats().compiled;
  ASSERT_EQ(run(3.0)[0], 5.5f);  // another kernel: evicts the first
  EXPECT_EQ(cpu->compiler().stats().compiled, clang_runs + 1);
  EXPECT_LE(cpu->loaded_libraries(), 2u);
  for (int i = 0; i < 5; ++i) {
    // Alternating evicts every time: compiled again by the engine, but
    // found on disk under the same name, and libraries stay bounded.
    ASSERT_EQ(run(2.0)[0], 4.0f);
    ASSERT_EQ(run(3.0)[0], 5.5f);
  }
  EXPECT_EQ(cpu->compiler().stats().compiled, clang_runs + 1);
  EXPECT_GE(engine.stats().kernels_compiled, 12u);
  EXPECT_LE(cpu->loaded_libraries(), 2u);
}

// Kernels that differ only in a size the code gets as its launch range (the
// rows of an elementwise op: a new sequence length) are one source, named by
// its hash: compiled once (the engine still counts three kernels, each
// shown under its own name).
TEST(KernelCacheTest, KernelsDifferingInTheLaunchRangeShareOneBinary) {
  CpuDevice* cpu = nullptr;
  auto registry = RegistryWithOwnCache(&cpu);
  Engine engine(registry.get(), EngineOptions{});
  for (int64_t rows : {64, 72, 100}) {
    std::vector<float> data(rows * 256);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 97);
    Tensor y = Tensor::FromFloats(&engine, data, {rows, 256}, "CPU") * 2.0 + 1.0;
    absl::StatusOr<std::vector<float>> v = y.ToVector<float>();
    ASSERT_TRUE(v.ok()) << v.status();
    for (size_t i = 0; i < data.size(); ++i)
      ASSERT_EQ((*v)[i], data[i] * 2 + 1) << rows << " " << i;
  }
  ASSERT_NE(cpu, nullptr);
  // One clang run for the three sizes (plus none for the uploads).
  EXPECT_EQ(cpu->compiler().stats().compiled, 1u);
  EXPECT_EQ(engine.stats().kernels_compiled, 3u);
}

}  // namespace
}  // namespace kiln

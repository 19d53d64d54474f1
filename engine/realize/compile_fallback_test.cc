// The engine's answer to a device compiler that fails on a kernel (clang 14
// crashes on some vectorized kernels): that kernel is lowered again without
// optimizations and the model runs; only when the plain kernel fails too is
// the compiler's error returned (a Status, never an abort).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/realize/engine.h"
#include "engine/runtime/cpu_device.h"
#include "engine/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

std::string NewTempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/kiln-fallback-XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  return dir ? std::string(dir) : std::string();
}

// A "clang" that exits like a crashed compiler when the C source on its
// stdin contains `poison`, and runs the real clang otherwise.
std::string FakeClang(const std::string& dir, const std::string& poison) {
  std::string path = dir + "/fake-clang";
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return "";
  std::fprintf(f,
               "#!/bin/sh\n"
               "src=\"$(cat)\"\n"
               "case \"$src\" in *'%s'*) echo 'fake-clang: crashed in instruction selection' >&2;"
               " exit 139;; esac\n"
               "printf '%%s\\n' \"$src\" | exec clang \"$@\"\n",
               poison.c_str());
  std::fclose(f);
  chmod(path.c_str(), 0755);
  return path;
}

class CompileFallbackTest : public ::testing::Test {
 protected:
  void Start(const std::string& poison) {
    const std::string dir = NewTempDir();
    ASSERT_FALSE(dir.empty());
    CpuDevice::Options o;
    o.cache_dir = dir + "/cache";
    o.clang = FakeClang(dir, poison);
    ASSERT_FALSE(o.clang.empty());
    registry_ = DeviceRegistry::WithDefaults();
    registry_->Register("CPU", [o]() -> absl::StatusOr<std::unique_ptr<Device>> {
      return std::unique_ptr<Device>(std::make_unique<CpuDevice>(o));
    });
    engine_ = std::make_unique<Engine>(registry_.get());
  }

  // a + 2 * b over 1000 floats: vectorized (8-wide) when optimized.
  absl::StatusOr<std::vector<float>> Run() {
    std::vector<float> a(1000), b(1000);
    for (int i = 0; i < 1000; ++i) a[i] = static_cast<float>(i), b[i] = 0.5f * i;
    Tensor ta = Tensor::FromFloats(engine_.get(), a, {1000}, "CPU");
    Tensor tb = Tensor::FromFloats(engine_.get(), b, {1000}, "CPU");
    Tensor out = ta + tb * 2.0f;
    return out.ToVector<float>();
  }

  std::unique_ptr<DeviceRegistry> registry_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(CompileFallbackTest, KernelTheCompilerRejectsRunsUnoptimized) {
  Start("ext_vector_type");  // every vectorized kernel "crashes" clang
  absl::StatusOr<std::vector<float>> out = Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_FLOAT_EQ((*out)[i], 2.0f * i) << i;
  EXPECT_GE(engine_->stats().kernels_compiled, 1u);
}

TEST_F(CompileFallbackTest, ErrorWhenTheUnoptimizedKernelFailsToo) {
  Start("void");  // every kernel "crashes" clang
  absl::StatusOr<std::vector<float>> out = Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("crashed in instruction selection"));
}

}  // namespace
}  // namespace kiln

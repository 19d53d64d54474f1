// The device memory limit as the engine applies it (issue 13.2): a plan
// whose new buffers would not fit is refused before anything is compiled or
// allocated; one that fits runs, releasing cached blocks to make room.
#include <memory>
#include <vector>

#include "engine/realize/engine.h"
#include "engine/runtime/device.h"
#include "engine/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kRows = 64;

class MemoryLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = DeviceRegistry::WithDefaults();
    engine_ = std::make_unique<Engine>(registry_.get());
    cpu_ = *engine_->GetDevice("CPU");
  }
  Allocator& allocator() { return cpu_->allocator(); }

  // (input + 1) * 2 spread over kRows rows: an intermediate and an output of
  // kRows times the input's bytes each.
  static Tensor Spread(const Tensor& input) {
    const int64_t n = input.numel();
    return ((input.Reshape({1, n}).Expand({kRows, n}) + 1).Contiguous() * 2).Contiguous();
  }

  std::unique_ptr<DeviceRegistry> registry_;
  std::unique_ptr<Engine> engine_;
  Device* cpu_ = nullptr;
};

TEST_F(MemoryLimitTest, PlanOverTheLimitIsRefusedBeforeAllocating) {
  const int64_t n = 1024;  // 4 KiB in, 2 x 256 KiB planned
  Tensor input = Tensor::FromFloats(engine_.get(), std::vector<float>(n, 1.5f), {n}, "CPU");
  ASSERT_TRUE(input.Realize().ok());
  allocator().set_memory_limit(300 << 10);
  const Allocator::Stats before = allocator().stats();
  const EngineStats engine_before = engine_->stats();

  Tensor out = Spread(input);
  absl::Status s = out.Realize();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("exceed the memory limit of 307200 bytes"));
  EXPECT_THAT(s.message(), HasSubstr("on CPU"));

  const Allocator::Stats after = allocator().stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.allocations, before.allocations);  // nothing was even asked for
  EXPECT_EQ(after.refusals, before.refusals + 1);
  EXPECT_EQ(engine_->stats().kernels_compiled, engine_before.kernels_compiled);
}

TEST_F(MemoryLimitTest, PlanUnderTheLimitRuns) {
  const int64_t n = 1024;
  Tensor input = Tensor::FromFloats(engine_.get(), std::vector<float>(n, 1.5f), {n}, "CPU");
  allocator().set_memory_limit(600 << 10);
  Tensor out = Spread(input);
  auto values = out.ToVector<float>();
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), static_cast<size_t>(kRows * n));
  EXPECT_EQ((*values)[0], 5.0f);
  EXPECT_EQ(values->back(), 5.0f);
  EXPECT_LE(allocator().stats().allocated_bytes, size_t{600} << 10);
}

TEST_F(MemoryLimitTest, CachedBlocksMakeRoom) {
  allocator().set_memory_limit(600 << 10);
  {
    const int64_t n = 1024;
    Tensor input = Tensor::FromFloats(engine_.get(), std::vector<float>(n, 1), {n}, "CPU");
    ASSERT_TRUE(Spread(input).Realize().ok());
  }
  ASSERT_GE(allocator().stats().cached_bytes, size_t{256} << 10);  // freed, kept for reuse
  // Other sizes: served only once the cached blocks are given back.
  const int64_t n = 1000;
  Tensor input = Tensor::FromFloats(engine_.get(), std::vector<float>(n, 1), {n}, "CPU");
  Tensor out = Spread(input);
  ASSERT_TRUE(out.Realize().ok()) << out.status();
  const Allocator::Stats s = allocator().stats();
  EXPECT_LE(s.allocated_bytes + s.cached_bytes, size_t{600} << 10);
}

TEST_F(MemoryLimitTest, InputOverTheLimitIsAStatus) {
  allocator().set_memory_limit(64 << 10);
  const int64_t n = 32 << 10;  // 128 KiB
  Tensor input = Tensor::FromFloats(engine_.get(), std::vector<float>(n, 1), {n}, "CPU");
  EXPECT_EQ(input.status().code(), absl::StatusCode::kResourceExhausted) << input.status();
  EXPECT_EQ(allocator().stats().allocated_bytes, 0u);
}

}  // namespace
}  // namespace kiln

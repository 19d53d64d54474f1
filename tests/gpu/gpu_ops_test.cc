// Runs the op cases (tests/gpu/op_cases.h) on every GPU device available
// here (OPENCL on PoCL in CI; CUDA where a driver exists) and compares them
// with the interpreter, then checks copies, the JIT (CUDA graphs on CUDA:
// replays with swapped inputs patch only the changed arguments) and the
// clear errors of unavailable devices.
#include <cstring>

#include "engine/jit/jit.h"
#include "engine/runtime/pocl_binary.h"
#include "engine/tensor/test_util.h"
#include "tests/gpu/op_cases.h"

namespace kiln {
namespace {

TEST(GpuDevices, UnavailableDevicesExplainWhy) {
  for (const char* name : {"OPENCL", "CUDA"}) {
    auto dev = TestEngine()->GetDevice(name);
    if (dev.ok()) {
      std::printf("%s: available\n", name);
      continue;
    }
    std::printf("%s: not available here: %s\n", name, std::string(dev.status().message()).c_str());
    EXPECT_EQ(dev.status().code(), absl::StatusCode::kFailedPrecondition) << dev.status();
    EXPECT_NE(dev.status().message().find(name), std::string::npos) << dev.status();
  }
}

class GpuOpsTest : public ::testing::TestWithParam<std::string> {
 protected:
  Engine* e = TestEngine();
  std::string dev = GetParam();
};

TEST_P(GpuOpsTest, OpCasesMatchInterpreter) {
  for (const gpu_test::OpCase& c : gpu_test::OpCases()) {
    SCOPED_TRACE(c.name);
    Tensor want = c.build(e, "INTERP");
    Tensor got = c.build(e, dev);
    ASSERT_EQ(got.shape(), want.shape());
    ASSERT_EQ(got.dtype(), want.dtype());
    ExpectNear(Values(got), Values(want), c.atol, c.rtol);
  }
}

TEST_P(GpuOpsTest, CopiesRoundTrip) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{5} << 20}) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1013) - 7;
    Tensor t = Tensor::FromFloats(e, v, {n}, dev);
    auto back = t.ToVector<float>();
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, v) << n;
  }
}

absl::StatusOr<std::vector<Tensor>> Model(const std::vector<Tensor>& in) {
  Tensor h = (in[0].Matmul(in[1]) + in[2]).Relu();
  return std::vector<Tensor>{h.Softmax(-1), h.Sum({1})};
}

TEST_P(GpuOpsTest, JitReplaysMatchPlainRuns) {
  for (bool graphs : {true, false}) {
    Jit::Options o;
    o.use_graphs = graphs;
    Jit jit(Model, o);
    Tensor w = gpu_test::Input(e, dev, {8, 12}, dtypes::kFloat32, 1);
    Tensor b = gpu_test::Input(e, dev, {12}, dtypes::kFloat32, 2);
    for (int call = 0; call < 8; ++call) {
      // A fresh input buffer per call: replays patch the changed arguments.
      Tensor x = gpu_test::Input(e, dev, {5, 8}, dtypes::kFloat32, 10 + call).Contiguous();
      auto got = jit({x, w, b});
      ASSERT_TRUE(got.ok()) << got.status();
      auto want = Model({x, w, b});
      ASSERT_TRUE(want.ok());
      ExpectNear(Values((*got)[0]), Values((*want)[0]));
      ExpectNear(Values((*got)[1]), Values((*want)[1]));
    }
    EXPECT_EQ(jit.stats().replays, 6u);
  }
}

// PoCL aborts the process on a program binary whose embedded program.bc is
// empty (it happens when another process rewrites PoCL's shared cache while
// the binary is serialized). kiln checks the binaries it caches and loads.
TEST(GpuDevices, OpenClRefusesATornPoclBinary) {
  auto dev = TestEngine()->GetDevice("OPENCL");
  if (!dev.ok()) GTEST_SKIP() << dev.status();
  auto binary = (*dev)->compiler().Compile(
      "__kernel void torn_probe(__global float* a) { a[get_global_id(0)] += 1.0f; }");
  ASSERT_TRUE(binary.ok()) << binary.status();
  ASSERT_TRUE(CheckPoclBinary(*binary).ok());
  ASSERT_TRUE((*dev)->LoadProgram("torn_probe", *binary).ok());
  const size_t at = binary->find("/program.bc");
  if (binary->compare(0, 7, "poclbin") != 0 || at == std::string::npos)
    GTEST_SKIP() << "not a PoCL binary";
  std::string torn = binary->substr(0, at + 11) + std::string(4, '\0');
  torn += binary->substr(at + 15);
  auto loaded = (*dev)->LoadProgram("torn_probe", torn);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << loaded.status();
}

INSTANTIATE_TEST_SUITE_P(Devices, GpuOpsTest, ::testing::ValuesIn(GpuTestDevices()),
                         DeviceParamName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GpuOpsTest);

}  // namespace
}  // namespace kiln

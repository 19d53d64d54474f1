// OnnxLoader / OnnxRunner: the runner's JIT keeps what JitLimits allow.
// A softmax over rows keeps intermediates (the row max and sum) alive in
// its capture: with a byte bound below them the capture is never kept and
// every call runs plainly, with the same answers.
#include "server/onnx_runner.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "engine/tensor/test_util.h"
#include "gtest/gtest.h"
#include "onnx/onnx.pb.h"

namespace kiln {
namespace {

// OUTPUT = Softmax(INPUT, axis 1), INPUT float32 [N, 64].
std::string WriteSoftmaxModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("softmax");
  for (auto [v, name] : {std::pair{g->add_input(), "INPUT"}, {g->add_output(), "OUTPUT"}}) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("N");
    t->mutable_shape()->add_dim()->set_dim_value(64);
  }
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Softmax");
  n->add_input("INPUT");
  n->add_output("OUTPUT");
  onnx::AttributeProto* axis = n->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(1);
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/softmax.onnx";
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  return path;
}

std::vector<RunStats::Path> RunThrice(ModelRunner* runner, int64_t rows) {
  std::vector<float> x(rows * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
  InputTensor in;
  in.name = "INPUT";
  in.shape = {rows, 64};
  in.data = std::string_view(reinterpret_cast<const char*>(x.data()), x.size() * 4);
  std::vector<RunStats::Path> paths;
  for (int call = 0; call < 3; ++call) {
    RunStats stats;
    auto out = runner->Run({in}, &stats);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return paths;
    const float* y = reinterpret_cast<const float*>((*out)[0].data.data());
    double row_sum = 0;
    for (int j = 0; j < 64; ++j) row_sum += y[j];
    EXPECT_NEAR(row_sum, 1.0, 1e-4);
    paths.push_back(stats.path);
  }
  return paths;
}

TEST(OnnxRunnerTest, JitLimitsBoundTheCapturesByBytes) {
  OnnxLoader loader(TestEngine());
  auto backend = loader.Load(WriteSoftmaxModel(), "CPU");
  ASSERT_TRUE(backend.ok()) << backend.status();
  using P = RunStats::Path;
  auto roomy = (*backend)->NewRunner(RunnerOptions{});
  ASSERT_TRUE(roomy.ok());
  EXPECT_EQ(RunThrice(roomy->get(), 512), (std::vector<P>{P::kPlain, P::kCapture, P::kReplay}));

  RunnerOptions tight;
  tight.jit.max_capture_bytes = 1;
  auto bounded = (*backend)->NewRunner(tight);
  ASSERT_TRUE(bounded.ok());
  // Recorded once, found too big (not kept), and run plainly from then on.
  EXPECT_EQ(RunThrice(bounded->get(), 512), (std::vector<P>{P::kPlain, P::kPlain, P::kPlain}));
  EXPECT_FALSE((*bounded)->HasCapture({dtypes::kFloat32}, {{512, 64}}));
}

// A runner with threads of its own (kilnd's share of the cores per
// instance) plans, captures and replays as one on the device's pool.
TEST(OnnxRunnerTest, RunnerWithItsOwnThreads) {
  OnnxLoader loader(TestEngine());
  auto backend = loader.Load(WriteSoftmaxModel(), "CPU");
  ASSERT_TRUE(backend.ok()) << backend.status();
  using P = RunStats::Path;
  for (int threads : {1, 3}) {
    RunnerOptions o;
    o.threads = threads;
    auto runner = (*backend)->NewRunner(o);
    ASSERT_TRUE(runner.ok());
    EXPECT_EQ(RunThrice(runner->get(), 512), (std::vector<P>{P::kPlain, P::kCapture, P::kReplay}))
        << threads;
  }
}

}  // namespace
}  // namespace kiln

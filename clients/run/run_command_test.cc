// `kiln run`'s report: the kernel count it prints is a replay's when the last
// call replayed, which leaves out the kernels the first call runs once (a
// stem's weight laid out for the CPU, engine/onnx/ops_nn.cc).
#include "clients/run/run_command.h"

#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/onnx/npy.h"
#include "engine/onnx/test_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using namespace onnx_test;  // NOLINT: the test helpers
using ::testing::HasSubstr;

std::string TmpPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp ? tmp : "/tmp", "/", name);
}

// y = Conv(x, w), 7x7 stride 2 over 3 channels (a stem: its constant weight
// is laid out once by the first call), x of a fixed 1x3x40x40 shape.
std::string WriteStemModel() {
  Builder b;
  b.Input("x", TensorProto::FLOAT, {1, 3, 40, 40}).Output("y");
  std::vector<double> wv(16 * 3 * 49);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<double>(i % 7) / 7 - 0.5;
  b.Init("w", HostTensor::FromDoubles(wv, {16, 3, 7, 7}, dtypes::kFloat32));
  onnx::NodeProto* n = b.Node("Conv", {"x", "w"}, {"y"});
  AttrInts(n, "pads", {3, 3, 3, 3});
  AttrInts(n, "strides", {2, 2});
  std::string path = TmpPath("stem.onnx");
  std::ofstream(path, std::ios::binary) << b.Bytes();
  return path;
}

// An input file for it (a random input would be generated again by every
// plain run).
std::string WriteInput() {
  std::vector<double> xv(3 * 40 * 40);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<double>(i % 11) / 11;
  std::string path = TmpPath("x.npy");
  EXPECT_TRUE(WriteNpy(path, HostTensor::FromDoubles(xv, {1, 3, 40, 40}, dtypes::kFloat32)).ok());
  return "x=" + path;
}

// Runs `kiln run ARGS` in process; returns what it printed.
std::string RunKiln(std::vector<std::string> args) {
  args.insert(args.begin(), "run");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  testing::internal::CaptureStdout();
  const int rc = RunCommand(static_cast<int>(argv.size()), argv.data());
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0) << out;
  return out;
}

// The count in "kernels: N per run|replay".
int Kernels(const std::string& out, const std::string& per) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("kernels: (\\d+) per " + per))) {
    ADD_FAILURE() << "no 'kernels: N per " << per << "' in:\n" << out;
    return -1;
  }
  return std::atoi(m[1].str().c_str());
}

TEST(RunCommandTest, ReportsAReplaysKernels) {
  const std::string model = WriteStemModel(), input = WriteInput();
  // One call: its own kernels, the weight's layout among them.
  const int first = Kernels(RunKiln({"--model", model, "--input", input}), "run");
  // Three: the third replays, without the layout.
  const std::string out = RunKiln({"--model", model, "--input", input, "--repeat", "3"});
  EXPECT_EQ(Kernels(out, "replay"), first - 1);
  EXPECT_THAT(out, HasSubstr("GFLOP/s achieved"));
  // Plain runs: the last one's kernels.
  EXPECT_EQ(
      Kernels(RunKiln({"--model", model, "--input", input, "--repeat", "2", "--no-jit"}), "run"),
      first - 1);
}

}  // namespace
}  // namespace kiln

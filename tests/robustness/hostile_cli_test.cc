// `kiln run` (the real binary) on malformed and hostile models and hostile
// input shapes: it must print the error and exit 1 -- never abort, crash,
// hang or exhaust the machine.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/onnx/npy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/robustness/hostile_models.h"
#include "tests/robustness/subprocess.h"

namespace kiln::hostile {
namespace {

using ::testing::HasSubstr;

constexpr char kKilnRun[] = "clients/run/kiln-run";

std::string Dir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp ? tmp : "/tmp", "/cli_", name);
}

// Runs `kiln run --model DIR/model.onnx` with `feeds` as .npy inputs.
ProcessResult RunCli(const std::string& dir, const std::vector<Feed>& feeds) {
  std::vector<std::string> argv = {kKilnRun, "--model", dir + "/model.onnx"};
  for (const Feed& f : feeds) {
    std::string path = absl::StrCat(dir, "/", f.name, ".npy");
    EXPECT_TRUE(WriteNpy(path, f.value).ok()) << path;
    argv.push_back("--input");
    argv.push_back(absl::StrCat(f.name, "=", path));
  }
  return RunProcess(argv, absl::Seconds(120), kChildAddressSpace);
}

// It printed `error` and exited with 1.
void ExpectCleanFailure(const ProcessResult& r, const std::string& error) {
  ASSERT_TRUE(r.started);
  EXPECT_EQ(r.signal, 0) << r.Describe() << "\nstderr: " << r.err;
  EXPECT_FALSE(r.timed_out) << "stderr: " << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.Describe() << "\nstderr: " << r.err;
  EXPECT_THAT(r.err, HasSubstr("kiln run: "));
  EXPECT_THAT(r.err, HasSubstr(error));
}

TEST(HostileCliTest, BadModelFiles) {
  for (const HostileCase& c : LoadCases()) {
    SCOPED_TRACE(c.name);
    std::string dir = Dir(c.name);
    ASSERT_TRUE(WriteCase(c, dir).ok());
    ExpectCleanFailure(RunCli(dir, {}), c.error);
  }
}

TEST(HostileCliTest, HostileShapesInModels) {
  for (const HostileCase& c : RunCases()) {
    SCOPED_TRACE(c.name);
    std::string dir = Dir(c.name);
    ASSERT_TRUE(WriteCase(c, dir).ok());
    ProcessResult r = RunCli(dir, c.feeds);
    if (c.expect == HostileCase::Expect::kOk) {
      EXPECT_EQ(r.exit_code, 0) << r.Describe() << "\nstderr: " << r.err;
      continue;
    }
    ExpectCleanFailure(r, c.error);
  }
}

TEST(HostileCliTest, HostileShapesInInputs) {
  for (const RequestModel& m : RequestModels()) {
    SCOPED_TRACE(m.name);
    HostileCase c;
    c.name = m.name;
    c.model = m.model;
    std::string dir = Dir(m.name);
    ASSERT_TRUE(WriteCase(c, dir).ok());
    ProcessResult good = RunCli(dir, m.good);
    EXPECT_EQ(good.exit_code, 0) << good.Describe() << "\nstderr: " << good.err;
    for (const RequestModel::Bad& b : m.bad) {
      SCOPED_TRACE(b.what);
      ExpectCleanFailure(RunCli(dir, b.feeds), b.error);
    }
  }
}

// Hostile command lines: a random input of an absurd shape, an input file
// that is a device.
TEST(HostileCliTest, HostileArguments) {
  HostileCase c;
  c.name = "cli_args";
  c.model = DynamicReluModel();
  std::string dir = Dir(c.name);
  ASSERT_TRUE(WriteCase(c, dir).ok());
  std::string model = dir + "/model.onnx";
  for (const char* shape : {"X=1000000000000", "X=4611686018427387904x4"})
    ExpectCleanFailure(RunProcess({kKilnRun, "--model", model, "--shape", shape},
                                  absl::Seconds(60), kChildAddressSpace),
                       "too large");
  ExpectCleanFailure(RunProcess({kKilnRun, "--model", model, "--input", "X=/dev/zero"},
                                absl::Seconds(60), kChildAddressSpace),
                     "not a regular file");
}

}  // namespace
}  // namespace kiln::hostile

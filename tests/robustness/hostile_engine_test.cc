// The engine's ONNX importer (OnnxModel) on malformed and hostile models and
// hostile request shapes, in process: every failure is a Status with a
// useful message, never an abort, a crash, a hang or an allocation the
// machine cannot make. (tests/robustness/hostile_cli_test and
// hostile_server_test drive the same models through `kiln run` and kilnd.)
#include <sys/resource.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/onnx/model.h"
#include "engine/runtime/device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/robustness/hostile_models.h"
#include "tests/robustness/subprocess.h"

namespace kiln::hostile {
namespace {

using ::testing::HasSubstr;

std::string Dir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp ? tmp : "/tmp", "/engine_", name);
}

class HostileEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A hostile size that slips past the checks fails here as an allocation
    // error instead of exhausting the host.
    if (kChildAddressSpace > 0) {
      struct rlimit lim = {kChildAddressSpace, kChildAddressSpace};
      setrlimit(RLIMIT_AS, &lim);
    }
    registry_ = DeviceRegistry::WithDefaults().release();
    engine_ = new Engine(registry_);
  }

  // Inputs for `m`: `feeds` by name, the others zeros of their declared
  // static shape.
  static std::vector<Tensor> Inputs(const OnnxModel& m, const std::vector<Feed>& feeds) {
    std::vector<Tensor> out;
    for (const ValueInfo& vi : m.inputs()) {
      const Feed* f = nullptr;
      for (const Feed& x : feeds)
        if (x.name == vi.name) f = &x;
      if (f) {
        out.push_back(f->value.ToTensor(engine_, "CPU"));
      } else {
        out.push_back(Tensor::Zeros(engine_, Shape(vi.dims.begin(), vi.dims.end()), vi.dtype));
      }
    }
    return out;
  }

  // Runs and realizes; the first error.
  static absl::Status RunAll(const OnnxModel& m, const std::vector<Feed>& feeds) {
    auto outs = m.Run(Inputs(m, feeds));
    if (!outs.ok()) return outs.status();
    std::vector<Tensor*> ptrs;
    for (Tensor& t : *outs) ptrs.push_back(&t);
    return Tensor::RealizeAll(ptrs);
  }

  static DeviceRegistry* registry_;
  static Engine* engine_;
};

DeviceRegistry* HostileEngineTest::registry_ = nullptr;
Engine* HostileEngineTest::engine_ = nullptr;

TEST_F(HostileEngineTest, BadModelFilesFailToLoad) {
  for (const HostileCase& c : LoadCases()) {
    SCOPED_TRACE(c.name);
    std::string dir = Dir(c.name);
    ASSERT_TRUE(WriteCase(c, dir).ok());
    auto m = OnnxModel::Load(dir + "/model.onnx", engine_, "CPU");
    ASSERT_FALSE(m.ok()) << c.name << " loaded";
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(c.error)) << m.status();
  }
}

TEST_F(HostileEngineTest, HostileShapesInModelsFailToRun) {
  for (const HostileCase& c : RunCases()) {
    SCOPED_TRACE(c.name);
    std::string dir = Dir(c.name);
    ASSERT_TRUE(WriteCase(c, dir).ok());
    auto m = OnnxModel::Load(dir + "/model.onnx", engine_, "CPU");
    ASSERT_TRUE(m.ok()) << m.status();
    absl::Status s = RunAll(**m, c.feeds);
    if (c.expect == HostileCase::Expect::kOk) {
      EXPECT_TRUE(s.ok()) << s;
      continue;
    }
    ASSERT_FALSE(s.ok()) << c.name << " ran";
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.error)) << s;
    EXPECT_TRUE(s.code() == absl::StatusCode::kInvalidArgument ||
                s.code() == absl::StatusCode::kResourceExhausted ||
                s.code() == absl::StatusCode::kUnimplemented)
        << s;
  }
}

TEST_F(HostileEngineTest, HostileShapesInRequestsFailToRun) {
  for (const RequestModel& r : RequestModels()) {
    SCOPED_TRACE(r.name);
    auto m = OnnxModel::LoadFromBytes(r.model, engine_, "CPU");
    ASSERT_TRUE(m.ok()) << m.status();
    absl::Status good = RunAll(**m, r.good);
    EXPECT_TRUE(good.ok()) << good;
    for (const RequestModel::Bad& b : r.bad) {
      SCOPED_TRACE(b.what);
      absl::Status s = RunAll(**m, b.feeds);
      ASSERT_FALSE(s.ok()) << r.name << " " << b.what << " ran";
      EXPECT_THAT(std::string(s.message()), HasSubstr(b.error)) << s;
      EXPECT_TRUE(s.code() == absl::StatusCode::kInvalidArgument ||
                  s.code() == absl::StatusCode::kResourceExhausted)
          << s;
    }
  }
}

}  // namespace
}  // namespace kiln::hostile

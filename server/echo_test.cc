// Names a client sends come back in error messages cut to a bounded size
// (issue 13.7: a 1 MB model name came back whole and stalled the
// connection): Echo itself, the request decoder and the model manager.
#include "server/echo.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/clock.h"
#include "server/infer_codec.h"
#include "server/model_manager.h"
#include "server/testing/fake_backend.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

// Short enough for any echoed name plus the message around it.
constexpr size_t kBound = 600;

TEST(EchoTest, ShortTextIsUnchanged) {
  EXPECT_EQ(Echo(""), "");
  EXPECT_EQ(Echo("IN0"), "IN0");
  EXPECT_EQ(Echo(std::string(kMaxEchoBytes, 'x')), std::string(kMaxEchoBytes, 'x'));
}

TEST(EchoTest, LongTextIsCutAndMarked) {
  std::string e = Echo(std::string(1 << 20, 'x'));
  EXPECT_EQ(e, std::string(kMaxEchoBytes, 'x') + "...(1048576 bytes)");
  EXPECT_EQ(Echo("abcdef", 3), "abc...(6 bytes)");
}

TEST(EchoTest, CutsAtACharacterBoundary) {
  // "é" is 2 bytes: cutting after 3 bytes of "aéé" would split the second.
  EXPECT_EQ(Echo("a\xC3\xA9\xC3\xA9", 4), "a\xC3\xA9...(5 bytes)");
}

ModelSpec Spec() {
  ModelSpec spec;
  spec.name = "m";
  spec.max_batch_size = 8;
  spec.inputs = {{"IN0", dtypes::kFloat32, {4}}};
  spec.outputs = {{"OUT0", dtypes::kFloat32, {4}}};
  return spec;
}

inference::ModelInferRequest Request() {
  inference::ModelInferRequest req;
  req.set_model_name("m");
  auto* in = req.add_inputs();
  in->set_name("IN0");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(4);
  for (int i = 0; i < 4; ++i) in->mutable_contents()->add_fp32_contents(1);
  return req;
}

// The decoder's message for `req`, which must be refused.
std::string DecodeError(const inference::ModelInferRequest& req) {
  ModelSpec spec = Spec();
  auto d = DecodeInferRequest(req, spec, 1, CodecLimits());
  EXPECT_FALSE(d.ok());
  return std::string(d.status().message());
}

TEST(EchoTest, DecoderCutsInputNames) {
  const std::string big(1 << 20, 'n');
  inference::ModelInferRequest req = Request();
  req.mutable_inputs(0)->set_name(big);
  std::string msg = DecodeError(req);
  EXPECT_THAT(msg, HasSubstr("unknown input 'nnnn"));
  EXPECT_THAT(msg, HasSubstr("...(1048576 bytes)"));
  EXPECT_LT(msg.size(), kBound);
}

TEST(EchoTest, DecoderCutsDatatypesOutputsAndShapes) {
  const std::string big(1 << 20, 'd');
  inference::ModelInferRequest req = Request();
  req.mutable_inputs(0)->set_datatype(big);
  std::string msg = DecodeError(req);
  EXPECT_THAT(msg, HasSubstr("...(1048576 bytes)"));
  EXPECT_LT(msg.size(), kBound);

  req = Request();
  req.add_outputs()->set_name(big);
  msg = DecodeError(req);
  EXPECT_THAT(msg, HasSubstr("unknown output"));
  EXPECT_LT(msg.size(), kBound);

  req = Request();
  for (int i = 0; i < 200000; ++i) req.mutable_inputs(0)->add_shape(1);
  msg = DecodeError(req);
  EXPECT_THAT(msg, HasSubstr("has rank 200002"));
  EXPECT_LT(msg.size(), kBound);
}

TEST(EchoTest, ManagerCutsModelNamesAndVersions) {
  std::string root = absl::StrCat(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp",
                                   "/echo_repo");
  ::mkdir(root.c_str(), 0755);
  ::mkdir((root + "/m").c_str(), 0755);
  ::mkdir((root + "/m/1").c_str(), 0755);
  std::ofstream(root + "/m/1/model.onnx") << "fake";
  ModelManager::Options o;
  o.repository = root;
  o.mode = ControlMode::kExplicit;
  o.startup_models = {"m"};
  testing::FakeLoader loader;
  RealClock clock;
  ModelManager manager(o, &loader, nullptr, &clock);
  ASSERT_TRUE(manager.Start().ok());
  const std::string big(1 << 20, 'm');
  for (const absl::Status& s :
       {manager.Get(big, "").status(), manager.Get("m", big).status(), manager.Load(big),
        manager.Unload(big)}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s.message().substr(0, 200);
    EXPECT_THAT(s.message(), HasSubstr("...(1048576 bytes)"));
    EXPECT_LT(s.message().size(), kBound);
  }
}

}  // namespace
}  // namespace kiln

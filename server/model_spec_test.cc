#include "server/model_spec.h"

#include "gmock/gmock.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

constexpr char kSimple[] = R"pb(
  name: "simple"
  platform: "onnxruntime_onnx"
  max_batch_size: 8
  input [ { name: "IN0" data_type: TYPE_FP32 dims: [ 4 ] },
          { name: "IN1" data_type: TYPE_FP32 dims: [ -1 ] } ]
  output [ { name: "OUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
  dynamic_batching {
    preferred_batch_size: [ 8, 4 ]
    max_queue_delay_microseconds: 500
    priority_levels: 2
    default_priority_level: 2
    default_queue_policy { max_queue_size: 3 default_timeout_microseconds: 1000 }
    priority_queue_policy { key: 1 value { timeout_action: DELAY } }
  }
  instance_group [ { count: 2 kind: KIND_CPU } ]
  version_policy { latest { num_versions: 2 } }
)pb";

ModelSignature Sig() {
  ModelSignature s;
  s.inputs = {{"IN0", dtypes::kFloat32, {-1, 4}}, {"IN1", dtypes::kFloat32, {-1, 4}}};
  s.outputs = {{"OUT0", dtypes::kFloat32, {-1, 4}}, {"OUT1", dtypes::kFloat32, {-1, 4}}};
  return s;
}

TEST(ModelSpecTest, ParsesTritonConfig) {
  auto c = ParseModelConfigText(kSimple, "simple/config.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status();
  auto s = ModelSpecFromConfig(*c, "simple");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->max_batch_size, 8);
  ASSERT_EQ(s->inputs.size(), 2u);
  EXPECT_EQ(s->inputs[0].dims, std::vector<int64_t>({4}));
  EXPECT_TRUE(s->batching.dynamic);
  EXPECT_EQ(s->batching.preferred, std::vector<int64_t>({4, 8}));
  EXPECT_EQ(s->batching.max_queue_delay, absl::Microseconds(500));
  EXPECT_EQ(s->batching.priority_levels, 2);
  EXPECT_EQ(s->batching.default_priority, 2);
  EXPECT_EQ(s->batching.PolicyFor(2).max_queue_size, 3u);
  EXPECT_EQ(s->batching.PolicyFor(2).default_timeout, absl::Microseconds(1000));
  EXPECT_TRUE(s->batching.PolicyFor(1).delay_on_timeout);
  EXPECT_EQ(s->instance_count, 2);
  EXPECT_EQ(s->device, "CPU");
  EXPECT_EQ(s->version_policy.Select({1, 3, 2}), std::vector<int64_t>({2, 3}));
}

// parameters { key: "intra_op_thread_count" } sets each instance's CPU
// threads, as in Triton's onnxruntime backend; without it several instances
// share the cores out equally. Other keys and bad values are refused.
TEST(ModelSpecTest, InstanceThreads) {
  auto spec = [](const std::string& text) {
    auto c = ParseModelConfigText(text, "m/config.pbtxt");
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? ModelSpecFromConfig(*c, "m") : absl::StatusOr<ModelSpec>(c.status());
  };
  const std::string two = "instance_group [ { count: 2 kind: KIND_CPU } ]\n";
  auto set = spec(two + R"(parameters { key: "intra_op_thread_count" value { string_value: "3" } })");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->threads, 3);
  EXPECT_EQ(InstanceThreads(*set, 16), 3);
  auto shared = spec(two);
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_EQ(shared->threads, 0);
  EXPECT_EQ(InstanceThreads(*shared, 16), 8);
  EXPECT_EQ(InstanceThreads(*shared, 2), 1);
  EXPECT_EQ(InstanceThreads(*shared, 1), 1);
  EXPECT_EQ(InstanceThreads(*shared, 0), 1);
  auto single = spec("max_batch_size: 4\n");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(InstanceThreads(*single, 16), 0);  // one instance: the device's pool
  auto zero = spec(R"(parameters { key: "intra_op_thread_count" value { string_value: "0" } })");
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(InstanceThreads(*zero, 16), 0);

  for (const char* bad : {"-1", "x", "", "257", "1.5", "99999999999999999999"}) {
    auto s = spec(absl::StrCat(R"(parameters { key: "intra_op_thread_count" value { string_value: ")",
                               bad, R"(" } })"));
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_THAT(s.status().message(), HasSubstr("is not an integer in [0, 256]")) << bad;
  }
  auto many = spec("instance_group [ { count: 8 } ]\n" +
                   std::string(R"(parameters { key: "intra_op_thread_count" value { string_value: "200" } })"));
  ASSERT_FALSE(many.ok());
  EXPECT_THAT(many.status().message(), HasSubstr("more than 1024 threads"));
  auto typo = spec(R"(parameters { key: "intra_op_threads" value { string_value: "1" } })");
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(typo.status().message(), HasSubstr("'intra_op_threads' is not supported"));
  EXPECT_THAT(typo.status().message(), HasSubstr("intra_op_thread_count"));
}

TEST(ModelSpecTest, UnsupportedFieldIsAClearError) {
  auto c = ParseModelConfigText("name: \"m\"\nsequence_batching { }\n", "m/config.pbtxt");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("m/config.pbtxt:2:"));
  EXPECT_THAT(c.status().message(), HasSubstr("'sequence_batching'"));
  EXPECT_THAT(c.status().message(), HasSubstr("not supported by kiln"));
  EXPECT_THAT(c.status().message(), HasSubstr("dynamic_batching"));  // lists what is supported
  auto nested = ParseModelConfigText("input [ { name: \"x\" reshape { shape: [1] } } ]",
                                     "m/config.pbtxt");
  ASSERT_FALSE(nested.ok());
  EXPECT_THAT(nested.status().message(), HasSubstr("'reshape' of ModelInput"));
  auto syntax = ParseModelConfigText("max_batch_size: \"x\"", "m/config.pbtxt");
  ASSERT_FALSE(syntax.ok());
}

TEST(ModelSpecTest, RejectsBadValues) {
  auto check = [](const std::string& text, const std::string& want) {
    auto c = ParseModelConfigText(text, "m/config.pbtxt");
    ASSERT_TRUE(c.ok()) << c.status();
    auto s = ModelSpecFromConfig(*c, "m");
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_THAT(s.status().message(), HasSubstr(want)) << text;
  };
  check("platform: \"tensorflow_savedmodel\"", "platform");
  check("backend: \"python\"", "backend");
  check("name: \"other\"", "differs from the directory name");
  check("max_batch_size: -1", "max_batch_size");
  check("dynamic_batching { }", "needs max_batch_size > 0");
  check("max_batch_size: 4 dynamic_batching { preferred_batch_size: 8 }", "preferred_batch_size 8");
  check("input [ { name: \"x\" data_type: TYPE_STRING dims: [1] } ]", "TYPE_STRING");
  check("input [ { name: \"x\" data_type: TYPE_FP32 dims: [0] } ]", "dim 0 is invalid");
  check("input [ { name: \"x\" data_type: TYPE_FP32 }, { name: \"x\" data_type: TYPE_FP32 } ]",
        "listed twice");
  check("max_batch_size: 2 dynamic_batching { priority_levels: 2 default_priority_level: 3 }",
        "default_priority_level");
  check("instance_group [ { kind: KIND_CPU }, { kind: KIND_GPU } ]", "different kinds");
  check("default_model_filename: \"../x.onnx\"", "plain file name");
}

TEST(ModelSpecTest, CompletesFromModelAndChecksIt) {
  auto c = ParseModelConfigText(kSimple, "f");
  ASSERT_TRUE(c.ok());
  auto s = ModelSpecFromConfig(*c, "simple");
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(CompleteSpecFromModel(Sig(), &*s).ok());
  EXPECT_EQ(s->inputs[1].dims, std::vector<int64_t>({4}));  // -1 tightened by the model
  EXPECT_EQ(s->outputs.size(), 1u);                          // the config's subset
  EXPECT_EQ(s->config.input(1).dims(0), 4);

  ModelSpec wrong = *s;
  wrong.inputs[0].dtype = dtypes::kFloat64;
  EXPECT_THAT(CompleteSpecFromModel(Sig(), &wrong).message(), HasSubstr("FP64"));
  ModelSpec missing = *s;
  missing.inputs.pop_back();
  EXPECT_THAT(CompleteSpecFromModel(Sig(), &missing).message(), HasSubstr("missing"));
  ModelSpec dims = *s;
  dims.inputs[0].dims = {5};
  EXPECT_THAT(CompleteSpecFromModel(Sig(), &dims).message(), HasSubstr("dim 1 is 5"));
  ModelSpec unknown = *s;
  unknown.outputs[0].name = "nope";
  EXPECT_THAT(CompleteSpecFromModel(Sig(), &unknown).message(), HasSubstr("not in the model"));
}

TEST(ModelSpecTest, DerivesAConfig) {
  auto s = DeriveModelSpec(Sig(), "m", 8);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->derived);
  EXPECT_EQ(s->max_batch_size, 8);
  EXPECT_TRUE(s->batching.dynamic);
  EXPECT_EQ(s->inputs[0].dims, std::vector<int64_t>({4}));
  EXPECT_EQ(s->outputs.size(), 2u);
  ModelSignature fixed = Sig();
  fixed.inputs[0].dims = {2, 4};
  auto f = DeriveModelSpec(fixed, "m", 8);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->max_batch_size, 0);
  EXPECT_EQ(f->inputs[0].dims, std::vector<int64_t>({2, 4}));
}

TEST(ModelSpecTest, WarmupIsChecked) {
  auto c = ParseModelConfigText(R"pb(
    max_batch_size: 4
    model_warmup [ { name: "w" batch_size: 2
      inputs { key: "IN0" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } }
      inputs { key: "IN1" value { data_type: TYPE_FP32 dims: [ 3 ] random_data: true } } } ]
  )pb", "f");
  ASSERT_TRUE(c.ok()) << c.status();
  auto s = ModelSpecFromConfig(*c, "m");
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(CompleteSpecFromModel(Sig(), &*s).message(), HasSubstr("does not fit"));
}

TEST(ModelSpecTest, CheckedNumel) {
  EXPECT_EQ(*CheckedNumel({2, 3, 4}), 24);
  EXPECT_EQ(*CheckedNumel({}), 1);
  EXPECT_FALSE(CheckedNumel({int64_t{1} << 40, int64_t{1} << 40}).has_value());
  EXPECT_FALSE(CheckedNumel({-1, 2}).has_value());
}

}  // namespace
}  // namespace kiln

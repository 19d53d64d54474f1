#include "server/infer_codec.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

ModelSpec Spec(int64_t max_batch = 8) {
  ModelSpec s;
  s.name = "m";
  s.max_batch_size = max_batch;
  s.inputs = {{"A", dtypes::kFloat32, {4}}, {"B", dtypes::kInt8, {-1}}};
  s.outputs = {{"Y", dtypes::kFloat32, {4}}, {"Z", dtypes::kFloat32, {4}}};
  return s;
}

std::string Bytes(size_t n) { return std::string(n, '\x01'); }

inference::ModelInferRequest Good() {
  inference::ModelInferRequest r;
  r.set_model_name("m");
  auto* a = r.add_inputs();
  a->set_name("A");
  a->set_datatype("FP32");
  a->add_shape(2);
  a->add_shape(4);
  auto* b = r.add_inputs();
  b->set_name("B");
  b->set_datatype("INT8");
  b->add_shape(2);
  b->add_shape(3);
  r.add_raw_input_contents(Bytes(32));
  r.add_raw_input_contents(Bytes(6));
  return r;
}

absl::Status Decode(const inference::ModelInferRequest& r, int64_t max_bytes = 1 << 20) {
  CodecLimits limits;
  limits.max_input_bytes = max_bytes;
  return DecodeInferRequest(r, Spec(), 1, limits).status();
}

TEST(InferCodecTest, DecodesAValidRequest) {
  inference::ModelInferRequest r = Good();
  // Inputs may come in any order; they are stored in the model's order.
  std::swap(*r.mutable_inputs(0), *r.mutable_inputs(1));
  std::swap(*r.mutable_raw_input_contents(0), *r.mutable_raw_input_contents(1));
  (*r.mutable_parameters())["priority"].set_int64_param(2);
  (*r.mutable_parameters())["timeout"].set_int64_param(1500);
  r.add_outputs()->set_name("Z");
  auto d = DecodeInferRequest(r, Spec(), 3, CodecLimits{});
  ASSERT_TRUE(d.ok()) << d.status();
  const InferRequest& q = *d->request;
  EXPECT_EQ(q.version, 3);
  EXPECT_EQ(q.batch, 2);
  EXPECT_EQ(q.priority, 2);
  EXPECT_EQ(d->timeout, absl::Microseconds(1500));
  ASSERT_EQ(q.inputs.size(), 2u);
  EXPECT_EQ(q.inputs[0].name, "A");
  EXPECT_EQ(q.inputs[0].data.size(), 32u);
  EXPECT_EQ(q.inputs[1].shape, std::vector<int64_t>({2, 3}));
  EXPECT_EQ(q.outputs, std::vector<std::string>({"Z"}));
  EXPECT_EQ(q.shape_key, "FP32[4];INT8[3];");
}

TEST(InferCodecTest, TypedContentsAreConverted) {
  inference::ModelInferRequest r = Good();
  r.clear_raw_input_contents();
  for (int i = 0; i < 8; ++i) r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(i * 0.5f);
  for (int i = 0; i < 6; ++i) r.mutable_inputs(1)->mutable_contents()->add_int_contents(i - 3);
  auto d = DecodeInferRequest(r, Spec(), 1, CodecLimits{});
  ASSERT_TRUE(d.ok()) << d.status();
  float f[8];
  std::memcpy(f, d->request->inputs[0].data.data(), 32);
  EXPECT_EQ(f[7], 3.5f);
  EXPECT_EQ(static_cast<int8_t>(d->request->inputs[1].data[0]), -3);
  r.mutable_inputs(1)->mutable_contents()->set_int_contents(0, 300);
  EXPECT_THAT(Decode(r).message(), HasSubstr("does not fit"));
}

// As onnxruntime does, a scalar input of a model without batching may be
// sent as shape [1]; it reaches the model as a scalar. [2] or [1, 1] stay
// wrong.
TEST(InferCodecTest, ScalarInputsMayComeAsShapeOne) {
  ModelSpec spec;
  spec.name = "vad";
  spec.max_batch_size = 0;
  spec.inputs = {{"sr", dtypes::kInt64, {}}};
  spec.outputs = {{"Y", dtypes::kFloat32, {1}}};
  auto request = [](std::vector<int64_t> shape) {
    inference::ModelInferRequest r;
    r.set_model_name("vad");
    auto* in = r.add_inputs();
    in->set_name("sr");
    in->set_datatype("INT64");
    int64_t n = 1;
    for (int64_t d : shape) {
      in->add_shape(d);
      n *= d;
    }
    r.add_raw_input_contents(Bytes(static_cast<size_t>(8 * n)));
    return r;
  };
  for (std::vector<int64_t> ok : {std::vector<int64_t>{}, std::vector<int64_t>{1}}) {
    auto d = DecodeInferRequest(request(ok), spec, 1, CodecLimits{});
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(d->request->inputs[0].shape.empty());
    EXPECT_EQ(d->request->inputs[0].data.size(), 8u);
  }
  for (std::vector<int64_t> bad : {std::vector<int64_t>{2}, std::vector<int64_t>{1, 1}}) {
    auto d = DecodeInferRequest(request(bad), spec, 1, CodecLimits{});
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(InferCodecTest, EveryMistakeIsInvalidArgument) {
  struct Case {
    std::string want;
    std::function<void(inference::ModelInferRequest*)> mutate;
  };
  std::vector<Case> cases = {
      {"unknown input 'C'", [](auto* r) { r->mutable_inputs(0)->set_name("C"); }},
      {"given twice", [](auto* r) { r->mutable_inputs(1)->set_name("A"); }},
      {"missing input 'B'",
       [](auto* r) {
         r->mutable_inputs()->RemoveLast();
         r->mutable_raw_input_contents()->RemoveLast();
       }},
      {"datatype 'FP64'", [](auto* r) { r->mutable_inputs(0)->set_datatype("FP64"); }},
      {"rank", [](auto* r) { r->mutable_inputs(0)->add_shape(1); }},
      {"does not match the model's", [](auto* r) { r->mutable_inputs(0)->set_shape(1, 5); }},
      {"exceeds the model's max_batch_size",
       [](auto* r) {
         r->mutable_inputs(0)->set_shape(0, 9);
         r->mutable_inputs(1)->set_shape(0, 9);
       }},
      {"disagree on the batch size", [](auto* r) { r->mutable_inputs(1)->set_shape(0, 1); }},
      {"empty or negative", [](auto* r) { r->mutable_inputs(1)->set_shape(1, 0); }},
      {"empty or negative", [](auto* r) { r->mutable_inputs(1)->set_shape(1, -2); }},
      {"raw data has 31 bytes", [](auto* r) { r->mutable_raw_input_contents(0)->pop_back(); }},
      {"typed contents while the request uses raw",
       [](auto* r) { r->mutable_inputs(0)->mutable_contents()->add_fp32_contents(1); }},
      {"raw_input_contents has 1 entries", [](auto* r) { r->mutable_raw_input_contents()->RemoveLast(); }},
      {"has no data", [](auto* r) { r->clear_raw_input_contents(); }},
      {"unknown output 'Q'", [](auto* r) { r->add_outputs()->set_name("Q"); }},
      {"requested twice",
       [](auto* r) {
         r->add_outputs()->set_name("Y");
         r->add_outputs()->set_name("Y");
       }},
      {"'priority' is negative",
       [](auto* r) { (*r->mutable_parameters())["priority"].set_int64_param(-1); }},
      {"must be an integer",
       [](auto* r) { (*r->mutable_parameters())["timeout"].set_string_param("1s"); }},
      {"sequence batching",
       [](auto* r) { (*r->mutable_parameters())["sequence_id"].set_int64_param(7); }},
  };
  for (const Case& c : cases) {
    inference::ModelInferRequest r = Good();
    c.mutate(&r);
    absl::Status s = Decode(r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.want << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.want));
  }
}

TEST(InferCodecTest, HugeShapesAreRefusedBeforeAllocation) {
  inference::ModelInferRequest r = Good();
  r.mutable_inputs(1)->set_shape(1, int64_t{1} << 62);
  EXPECT_THAT(Decode(r).message(), HasSubstr("overflows"));
  r = Good();
  r.mutable_inputs(1)->set_shape(1, int64_t{1} << 40);  // 2 TiB of int8: fits int64, not the limit
  EXPECT_THAT(Decode(r).message(), HasSubstr("above the limit"));
  r = Good();
  r.clear_raw_input_contents();
  r.mutable_inputs(1)->set_shape(1, int64_t{1} << 40);
  for (int i = 0; i < 8; ++i) r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
  EXPECT_THAT(Decode(r).message(), HasSubstr("above the limit"));
}

TEST(InferCodecTest, Fp16OnlyTravelsRaw) {
  ModelSpec s = Spec();
  s.inputs[0].dtype = dtypes::kFloat16;
  inference::ModelInferRequest r = Good();
  r.clear_raw_input_contents();
  r.mutable_inputs(0)->set_datatype("FP16");
  for (int i = 0; i < 8; ++i) r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
  for (int i = 0; i < 6; ++i) r.mutable_inputs(1)->mutable_contents()->add_int_contents(1);
  auto d = DecodeInferRequest(r, s, 1, CodecLimits{});
  EXPECT_THAT(d.status().message(), HasSubstr("raw_input_contents"));
}

TEST(InferCodecTest, EncodesRawOutputs) {
  InferResult result;
  result.outputs.push_back({"Y", dtypes::kFloat32, {1, 4}, Bytes(16)});
  inference::ModelInferResponse resp;
  EncodeInferResponse(std::move(result), "m", "1", "req-7", &resp);
  EXPECT_EQ(resp.model_name(), "m");
  EXPECT_EQ(resp.model_version(), "1");
  EXPECT_EQ(resp.id(), "req-7");
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.outputs(0).datatype(), "FP32");
  EXPECT_EQ(resp.raw_output_contents(0).size(), 16u);
}

}  // namespace
}  // namespace kiln

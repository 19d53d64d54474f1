#include "server/infer_codec.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/testing/shm_object.h"

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


// ---- system shared memory ----

void SetShm(google::protobuf::Map<std::string, inference::InferParameter>* p,
            const std::string& region, int64_t offset, int64_t size) {
  (*p)[kShmRegionParam].set_string_param(region);
  if (offset >= 0) (*p)[kShmOffsetParam].set_int64_param(offset);
  if (size >= 0) (*p)[kShmByteSizeParam].set_int64_param(size);
}

class InferCodecShmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(obj_.ok()) << obj_.error();
    for (int i = 0; i < 8; ++i) {
      float v = 0.5f * static_cast<float>(i);
      std::memcpy(obj_.data() + 100 + 4 * i, &v, 4);
    }
    ASSERT_TRUE(reg_.Register("in", obj_.key(), 0, 1000).ok());
    ASSERT_TRUE(reg_.Register("out", obj_.key(), 2000, 64).ok());
  }
  // Good() with input A (2x4 FP32 = 32 bytes) at offset 100 of region "in".
  inference::ModelInferRequest ShmRequest(bool skip_raw_entry) {
    inference::ModelInferRequest r = Good();
    SetShm(r.mutable_inputs(0)->mutable_parameters(), "in", 100, 32);
    if (skip_raw_entry) {
      r.mutable_raw_input_contents()->DeleteSubrange(0, 1);
    } else {
      r.mutable_raw_input_contents(0)->clear();
    }
    return r;
  }
  absl::StatusOr<DecodedRequest> Decode(const inference::ModelInferRequest& r) {
    return DecodeInferRequest(r, Spec(), 1, CodecLimits{}, &reg_);
  }

  testing::ShmObject obj_{"kiln_codec_", 4096};
  ShmRegistry reg_{ShmRegistryOptions{{"/kiln_codec_"}, 8}};
};

TEST_F(InferCodecShmTest, ReadsAnInputFromItsRegion) {
  for (bool skip : {true, false}) {
    // The decoded request refers to the message's raw inputs: keep it alive
    // (a temporary here was a use after free, found by tools/asan).
    const inference::ModelInferRequest msg = ShmRequest(skip);
    auto d = Decode(msg);
    ASSERT_TRUE(d.ok()) << d.status();
    const InputTensor& a = d->request->inputs[0];
    ASSERT_EQ(a.data.size(), 32u);
    EXPECT_EQ(std::memcmp(a.data.data(), obj_.data() + 100, 32), 0);
    EXPECT_EQ(d->request->inputs[1].data, Bytes(6));
    EXPECT_TRUE(d->shm_outputs.empty());
  }
  // Every input in shared memory: no raw_input_contents at all.
  inference::ModelInferRequest r = ShmRequest(true);
  SetShm(r.mutable_inputs(1)->mutable_parameters(), "in", 0, 6);
  r.clear_raw_input_contents();
  EXPECT_TRUE(Decode(r).ok());
}

TEST_F(InferCodecShmTest, RefusesBadInputReferences) {
  inference::ModelInferRequest r = ShmRequest(false);
  r.set_raw_input_contents(0, "data");
  EXPECT_THAT(Decode(r).status().message(), HasSubstr("also carries data"));

  r = ShmRequest(true);
  (*r.mutable_inputs(0)->mutable_parameters())[kShmByteSizeParam].set_int64_param(28);
  absl::Status s = Decode(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input 'A': shared_memory_byte_size 28"));

  r = ShmRequest(true);
  (*r.mutable_inputs(0)->mutable_parameters())[kShmOffsetParam].set_int64_param(980);
  s = Decode(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("outside region 'in'"));

  r = ShmRequest(true);
  (*r.mutable_inputs(0)->mutable_parameters())[kShmOffsetParam].set_int64_param(-1);
  EXPECT_THAT(Decode(r).status().message(), HasSubstr("negative"));

  r = ShmRequest(true);
  (*r.mutable_inputs(0)->mutable_parameters())[kShmRegionParam].set_string_param("nope");
  s = Decode(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("input 'A': no shared-memory region 'nope'"));

  r = ShmRequest(true);
  r.mutable_inputs(0)->mutable_parameters()->erase(kShmByteSizeParam);
  EXPECT_THAT(Decode(r).status().message(), HasSubstr("needs both"));

  // Shared memory off: no registry.
  s = DecodeInferRequest(ShmRequest(true), Spec(), 1, CodecLimits{}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("--shm-allow"));

  // Two raw entries for one input outside shared memory.
  r = ShmRequest(true);
  r.add_raw_input_contents("x");
  r.add_raw_input_contents("y");
  EXPECT_THAT(Decode(r).status().message(), HasSubstr("raw_input_contents has 3 entries"));
}

TEST_F(InferCodecShmTest, WritesOutputsToTheirRegion) {
  inference::ModelInferRequest r = Good();
  auto* y = r.add_outputs();
  y->set_name("Y");
  SetShm(y->mutable_parameters(), "out", 8, 32);
  r.add_outputs()->set_name("Z");
  auto d = Decode(r);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->shm_outputs.size(), 1u);
  EXPECT_EQ(d->shm_outputs[0].output, "Y");

  InferResult result;
  result.outputs.push_back({"Y", dtypes::kFloat32, {2, 4}, std::string(32, 'y')});
  result.outputs.push_back({"Z", dtypes::kFloat32, {2, 4}, std::string(32, 'z')});
  ASSERT_TRUE(WriteShmOutputs(d->shm_outputs, &result).ok());
  EXPECT_EQ(std::string(obj_.data() + 2008, 32), std::string(32, 'y'));
  EXPECT_TRUE(result.outputs[0].data.empty());
  EXPECT_EQ(result.outputs[1].data, std::string(32, 'z'));

  inference::ModelInferResponse resp;
  EncodeInferResponse(std::move(result), "m", "1", "", &resp);
  SetShmOutputParameters(r, &resp);
  ASSERT_EQ(resp.raw_output_contents_size(), 2);
  EXPECT_TRUE(resp.raw_output_contents(0).empty());
  EXPECT_EQ(resp.outputs(0).parameters().at(kShmRegionParam).string_param(), "out");
  EXPECT_EQ(resp.outputs(0).parameters().at(kShmOffsetParam).int64_param(), 8);
  EXPECT_EQ(resp.outputs(0).parameters().at(kShmByteSizeParam).int64_param(), 32);
  EXPECT_TRUE(resp.outputs(1).parameters().empty());
}

TEST_F(InferCodecShmTest, RefusesBadOutputReferences) {
  inference::ModelInferRequest r = Good();
  auto* y = r.add_outputs();
  y->set_name("Y");
  SetShm(y->mutable_parameters(), "out", 40, 32);  // past the 64-byte region
  absl::Status s = Decode(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("output 'Y'"));

  SetShm(y->mutable_parameters(), "out", 0, 16);  // fits the region, not the output
  auto d = Decode(r);
  ASSERT_TRUE(d.ok()) << d.status();
  InferResult result;
  result.outputs.push_back({"Y", dtypes::kFloat32, {2, 4}, std::string(32, 'y')});
  s = WriteShmOutputs(d->shm_outputs, &result);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("output 'Y' has 32 bytes"));
  EXPECT_EQ(std::string(obj_.data() + 2000, 16), std::string(16, '\0'));
}

TEST_F(InferCodecShmTest, AnOutputSlotKeepsItsRegionAfterUnregister) {
  inference::ModelInferRequest r = Good();
  auto* y = r.add_outputs();
  y->set_name("Y");
  SetShm(y->mutable_parameters(), "out", 0, 32);
  auto d = Decode(r);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(reg_.Unregister("").ok());  // while the request is in flight
  InferResult result;
  result.outputs.push_back({"Y", dtypes::kFloat32, {2, 4}, std::string(32, 'w')});
  ASSERT_TRUE(WriteShmOutputs(d->shm_outputs, &result).ok());
  EXPECT_EQ(std::string(obj_.data() + 2000, 32), std::string(32, 'w'));
}

}  // namespace
}  // namespace kiln

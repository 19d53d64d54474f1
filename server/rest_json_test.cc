// The REST wire format: JSON and binary infer requests become the raw
// request proto (or a 400 message), responses encode as asked, messages
// print with the KServe / Triton JSON shapes.
#include "server/rest_json.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/model_config.pb.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

absl::Status ParseError(const std::string& body) {
  return ParseInferRequest(body, std::nullopt, "m", "").status();
}

TEST(RestJsonTest, JsonInferRequest) {
  auto r = ParseInferRequest(R"({
      "id": "r1", "parameters": {"priority": 2, "timeout": 1000, "binary_data_output": true},
      "inputs": [
        {"name": "A", "datatype": "FP32", "shape": [2, 2], "data": [[1.5, 2], [-3, 4e3]]},
        {"name": "B", "datatype": "INT8", "shape": [3], "data": [-128, 0, 127]},
        {"name": "C", "datatype": "BOOL", "shape": [2], "data": [true, false]},
        {"name": "D", "datatype": "UINT64", "shape": [1], "data": [18446744073709551615]},
        {"name": "E", "datatype": "BYTES", "shape": [2], "data": ["ab", ""]}],
      "outputs": [{"name": "X", "parameters": {"binary_data": false}}, {"name": "Y"}]})",
                             std::nullopt, "model", "3");
  ASSERT_TRUE(r.ok()) << r.status();
  const inference::ModelInferRequest& q = r->request;
  EXPECT_EQ(q.model_name(), "model");
  EXPECT_EQ(q.model_version(), "3");
  EXPECT_EQ(q.id(), "r1");
  EXPECT_EQ(q.parameters().at("priority").int64_param(), 2);
  EXPECT_EQ(q.parameters().at("timeout").int64_param(), 1000);
  ASSERT_EQ(q.inputs_size(), 5);
  ASSERT_EQ(q.raw_input_contents_size(), 5);
  EXPECT_EQ(q.inputs(0).datatype(), "FP32");
  EXPECT_THAT(std::vector<int64_t>(q.inputs(0).shape().begin(), q.inputs(0).shape().end()),
              ::testing::ElementsAre(2, 2));
  EXPECT_EQ(q.raw_input_contents(0), Bytes<float>({1.5f, 2.f, -3.f, 4000.f}));
  EXPECT_EQ(q.raw_input_contents(1), Bytes<int8_t>({-128, 0, 127}));
  EXPECT_EQ(q.raw_input_contents(2), std::string("\1\0", 2));
  EXPECT_EQ(q.raw_input_contents(3), Bytes<uint64_t>({18446744073709551615ull}));
  EXPECT_EQ(q.raw_input_contents(4), std::string("\2\0\0\0ab\0\0\0\0", 10));
  EXPECT_TRUE(r->binary_output_default);
  EXPECT_FALSE(r->binary_output.at("X"));
  EXPECT_EQ(r->binary_output.count("Y"), 0u);
  ASSERT_EQ(q.outputs_size(), 2);
  EXPECT_TRUE(q.outputs(0).parameters().empty());  // binary_data is REST's, not the codec's
}

TEST(RestJsonTest, BinaryInferRequest) {
  std::string header = R"({"inputs": [
      {"name": "A", "datatype": "FP16", "shape": [2], "parameters": {"binary_data_size": 4}},
      {"name": "B", "datatype": "INT32", "shape": [1], "data": [7]},
      {"name": "C", "datatype": "FP32", "shape": [1], "parameters": {"binary_data_size": 4}}]})";
  std::string body = header + std::string("\x00\x3c\x00\x40", 4) + Bytes<float>({2.5f});
  auto r = ParseInferRequest(body, header.size(), "m", "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->request.raw_input_contents(0), std::string("\x00\x3c\x00\x40", 4));
  EXPECT_EQ(r->request.raw_input_contents(1), Bytes<int32_t>({7}));
  EXPECT_EQ(r->request.raw_input_contents(2), Bytes<float>({2.5f}));
  EXPECT_TRUE(r->request.inputs(0).parameters().empty());

  auto more = ParseInferRequest(body + "x", header.size(), "m", "");
  EXPECT_THAT(more.status().message(), HasSubstr("1 bytes of binary data after the inputs"));
  auto past = ParseInferRequest(body.substr(0, body.size() - 1), header.size(), "m", "");
  EXPECT_THAT(past.status().message(), HasSubstr("past the end of the body (3 binary bytes"));
  auto long_header = ParseInferRequest(header, header.size() + 1, "m", "");
  EXPECT_THAT(long_header.status().message(), HasSubstr("Inference-Header-Content-Length"));
  auto both = ParseInferRequest(
      R"({"inputs":[{"name":"A","datatype":"FP32","shape":[1],"data":[1],
          "parameters":{"binary_data_size":4}}]})" +
          Bytes<float>({1}),
      104, "m", "");
  EXPECT_FALSE(both.ok());
}

TEST(RestJsonTest, BadInferRequests) {
  struct Case {
    const char* body;
    const char* message;
  } cases[] = {
      {"{", "malformed JSON: [json.exception.parse_error.101] parse error at line 1, column 2"},
      {"[1]", "must be a JSON object"},
      {"{}", "'inputs' must be an array"},
      {R"({"inputs": [3]})", "inputs[0]: must be an object"},
      {R"({"inputs": [{"datatype": "FP32", "shape": [1], "data": [1]}]})", "missing 'name'"},
      {R"({"inputs": [{"name": 5}]})", "'name' must be a string"},
      {R"({"inputs": [{"name": "A", "shape": [1], "data": [1]}]})",
       "input 'A': missing 'datatype'"},
      {R"({"inputs": [{"name": "A", "datatype": "FP32", "data": [1]}]})", "'shape' must be"},
      {R"({"inputs": [{"name": "A", "datatype": "FP32", "shape": [-1], "data": [1]}]})",
       "non-negative integers, not -1"},
      {R"({"inputs": [{"name": "A", "datatype": "FP32", "shape": [1.5], "data": [1]}]})",
       "non-negative integers"},
      {R"({"inputs": [{"name": "A", "datatype": "FP32", "shape": [2]}]})", "has no 'data'"},
      {R"({"inputs": [{"name": "A", "datatype": "FP32", "shape": [3], "data": [1, 2]}]})",
       "input 'A': expected 3 values for shape [3], got 2"},
      {R"({"inputs": [{"name": "A", "datatype": "FP32", "shape": [4294967296, 4294967296],
           "data": [1]}]})",
       "the shape overflows"},
      {R"({"inputs": [{"name": "A", "datatype": "FP32", "shape": [1], "data": ["x"]}]})",
       "value at index 0 is a string, not a number"},
      {R"({"inputs": [{"name": "A", "datatype": "INT32", "shape": [1], "data": [1.5]}]})",
       "is a number, not an integer"},
      {R"({"inputs": [{"name": "A", "datatype": "INT8", "shape": [1], "data": [128]}]})",
       "value 128 at index 0 does not fit the datatype"},
      {R"({"inputs": [{"name": "A", "datatype": "UINT8", "shape": [1], "data": [-1]}]})",
       "value -1 at index 0 does not fit"},
      {R"({"inputs": [{"name": "A", "datatype": "INT64", "shape": [1],
           "data": [9223372036854775808]}]})",
       "does not fit"},
      {R"({"inputs": [{"name": "A", "datatype": "BOOL", "shape": [1], "data": [1]}]})",
       "not a boolean"},
      {R"({"inputs": [{"name": "A", "datatype": "BYTES", "shape": [1], "data": [1]}]})",
       "not a string"},
      {R"({"inputs": [{"name": "A", "datatype": "FP16", "shape": [1], "data": [1]}]})",
       "FP16 data must be sent as binary data"},
      {R"({"inputs": [{"name": "A", "datatype": "NOPE", "shape": [1], "data": [1]}]})",
       "datatype 'NOPE' is not a KServe datatype"},
      {R"({"inputs": [], "parameters": {"p": [1]}})",
       "parameter 'p' must be a bool, number or "
       "string, not array"},
      {R"({"inputs": [], "parameters": 3})", "'parameters' must be an object"},
      {R"({"inputs": [], "parameters": {"binary_data_output": 1}})",
       "'binary_data_output' must be a bool"},
      {R"({"inputs": [], "outputs": {}})", "'outputs' must be an array"},
      {R"({"inputs": [], "outputs": [{"name": "X", "parameters": {"binary_data": "yes"}}]})",
       "output 'X': parameter 'binary_data' must be a bool"},
      {R"({"inputs": [], "id": 7})", "'id' must be a string"},
  };
  for (const Case& c : cases) {
    absl::Status s = ParseError(c.body);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.body;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << c.body;
  }
  // Deep nesting is refused, not recursed into.
  std::string deep = R"({"inputs": [{"name": "A", "datatype": "FP32", "shape": [1], "data": )" +
                     std::string(100000, '[') + "1" + std::string(100000, ']') + "}]}";
  EXPECT_THAT(std::string(ParseError(deep).message()), HasSubstr("nested deeper than 64"));
  // Long names come back cut.
  std::string name(100000, 'n');
  absl::Status s = ParseError(R"({"inputs": [{"name": ")" + name + R"(", "datatype": "FP32"}]})");
  EXPECT_THAT(std::string(s.message()), HasSubstr("...(100000 bytes)"));
  EXPECT_LT(s.message().size(), 400u);
}

TEST(RestJsonTest, EncodeInferResponse) {
  inference::ModelInferResponse resp;
  resp.set_model_name("m");
  resp.set_model_version("1");
  resp.set_id("r1");
  auto add = [&](const char* name, const char* dt, std::vector<int64_t> shape, std::string raw) {
    auto* o = resp.add_outputs();
    o->set_name(name);
    o->set_datatype(dt);
    for (int64_t d : shape) o->add_shape(d);
    resp.add_raw_output_contents(std::move(raw));
  };
  add("F", "FP32", {1, 3}, Bytes<float>({0.5f, -2.f, 0.1f}));
  add("I", "INT64", {2}, Bytes<int64_t>({-9223372036854775807ll - 1, 5}));
  add("B", "BOOL", {2}, std::string("\1\0", 2));
  add("H", "FP16", {2}, std::string("\x00\x3c\x00\xc0", 4));  // 1, -2
  add("R", "FP32", {1}, Bytes<float>({3.f}));

  RestInferRequest json_req;
  auto all_json = EncodeInferResponse(resp, json_req);
  ASSERT_TRUE(all_json.ok()) << all_json.status();
  EXPECT_FALSE(all_json->header_length);
  Json j = Json::parse(all_json->body);
  EXPECT_EQ(j["model_name"], "m");
  EXPECT_EQ(j["model_version"], "1");
  EXPECT_EQ(j["id"], "r1");
  ASSERT_EQ(j["outputs"].size(), 5u);
  EXPECT_EQ(j["outputs"][0]["name"], "F");
  EXPECT_EQ(j["outputs"][0]["datatype"], "FP32");
  EXPECT_EQ(j["outputs"][0]["shape"], Json::parse("[1,3]"));
  EXPECT_EQ(static_cast<float>(j["outputs"][0]["data"][2].get<double>()), 0.1f);
  EXPECT_EQ(j["outputs"][0]["data"][1], -2.0);
  EXPECT_EQ(j["outputs"][1]["data"], Json::parse("[-9223372036854775808, 5]"));
  EXPECT_EQ(j["outputs"][2]["data"], Json::parse("[true, false]"));
  EXPECT_EQ(j["outputs"][3]["data"], Json::parse("[1.0, -2.0]"));

  RestInferRequest bin_req;
  bin_req.binary_output_default = true;
  bin_req.binary_output["I"] = false;
  auto mixed = EncodeInferResponse(resp, bin_req);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ASSERT_TRUE(mixed->header_length);
  Json h = Json::parse(mixed->body.substr(0, *mixed->header_length));
  EXPECT_FALSE(h["outputs"][0].contains("data"));
  EXPECT_EQ(h["outputs"][0]["parameters"]["binary_data_size"], 12);
  EXPECT_EQ(h["outputs"][1]["data"][1], 5);
  EXPECT_EQ(mixed->body.substr(*mixed->header_length),
            resp.raw_output_contents(0) + resp.raw_output_contents(2) +
                resp.raw_output_contents(3) + resp.raw_output_contents(4));

  // Outputs past kMaxJsonOutputBytes are refused as JSON and sent as binary.
  inference::ModelInferResponse big;
  auto* o = big.add_outputs();
  o->set_name("huge");
  o->set_datatype("FP32");
  o->add_shape(static_cast<int64_t>(kMaxJsonOutputBytes / 4 + 1));
  big.add_raw_output_contents(std::string(kMaxJsonOutputBytes + 4, '\0'));
  auto refused = EncodeInferResponse(big, json_req);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("ask for it as binary data"));
  RestInferRequest big_bin;
  big_bin.binary_output["huge"] = true;
  auto sent = EncodeInferResponse(big, big_bin);
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ(sent->body.size() - *sent->header_length, kMaxJsonOutputBytes + 4);

  inference::ModelInferResponse torn = resp;
  torn.mutable_raw_output_contents(0)->pop_back();
  EXPECT_EQ(EncodeInferResponse(torn, json_req).status().code(), absl::StatusCode::kInternal);
}

TEST(RestJsonTest, MessagesAsJson) {
  inference::ModelStatisticsResponse stats;
  auto* s = stats.add_model_stats();
  s->set_name("m");
  s->set_version("1");
  s->set_inference_count(18446744073709551615ull);
  s->mutable_inference_stats()->mutable_success()->set_count(3);
  Json j = Json::parse(MessageToJson(stats));
  EXPECT_EQ(j["model_stats"][0]["name"], "m");
  EXPECT_EQ(j["model_stats"][0]["inference_count"].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(j["model_stats"][0]["execution_count"], 0);  // zero is printed
  EXPECT_EQ(j["model_stats"][0]["inference_stats"]["success"]["count"], 3);
  EXPECT_EQ(j["model_stats"][0]["inference_stats"]["success"]["ns"], 0);
  EXPECT_EQ(j["model_stats"][0]["batch_stats"], Json::array());

  inference::ModelMetadataResponse meta;
  meta.set_name("m");
  meta.add_versions("1");
  auto* in = meta.add_inputs();
  in->set_name("A");
  in->set_datatype("FP32");
  in->add_shape(-1);
  in->add_shape(16);
  j = Json::parse(MessageToJson(meta));
  EXPECT_EQ(j["inputs"][0]["shape"], Json::parse("[-1, 16]"));
  EXPECT_EQ(j["versions"], Json::parse(R"(["1"])"));
  EXPECT_FALSE(j.contains("properties"));  // an empty map is left out

  inference::ModelConfig config;
  config.set_name("m");
  config.set_max_batch_size(8);
  auto* ci = config.add_input();
  ci->set_name("A");
  ci->set_data_type(inference::TYPE_FP32);
  ci->add_dims(16);
  j = Json::parse(MessageToJson(config));
  EXPECT_EQ(j["max_batch_size"], 8);
  EXPECT_EQ(j["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(j["input"][0]["dims"], Json::parse("[16]"));
  EXPECT_FALSE(j.contains("dynamic_batching"));  // an unset message is left out

  inference::RepositoryIndexResponse index;
  auto* e = index.add_models();
  e->set_name("m");
  e->set_version("1");
  e->set_state("READY");
  j = Json::parse(RepositoryIndexJson(index));
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j[0], Json::parse(R"({"name":"m","version":"1","state":"READY","reason":""})"));

  EXPECT_EQ(Json::parse(ErrorJson("bad \xff name"))["error"], "bad \xef\xbf\xbd name");
}

TEST(RestJsonTest, RepositoryBodies) {
  EXPECT_EQ(*ParseIndexRequest(""), false);
  EXPECT_EQ(*ParseIndexRequest(R"({"ready": true})"), true);
  EXPECT_EQ(*ParseIndexRequest("{}"), false);
  EXPECT_FALSE(ParseIndexRequest(R"({"ready": "yes"})").ok());
  EXPECT_FALSE(ParseIndexRequest("nope").ok());
  inference::RepositoryModelLoadRequest load;
  EXPECT_TRUE(ParseRepositoryParameters(" ", load.mutable_parameters()).ok());
  EXPECT_TRUE(load.parameters().empty());
  ASSERT_TRUE(ParseRepositoryParameters(R"({"parameters": {"a": true, "b": 3, "c": "x"}})",
                                        load.mutable_parameters())
                  .ok());
  EXPECT_TRUE(load.parameters().at("a").bool_param());
  EXPECT_EQ(load.parameters().at("b").int64_param(), 3);
  EXPECT_EQ(load.parameters().at("c").string_param(), "x");
  EXPECT_FALSE(
      ParseRepositoryParameters(R"({"parameters": {"a": 1.5}})", load.mutable_parameters()).ok());
  EXPECT_FALSE(ParseRepositoryParameters(R"({"parameters": []})", load.mutable_parameters()).ok());
}

TEST(RestJsonTest, SharedMemoryTensors) {
  // An input in shared memory: its parameters pass through, its raw entry is empty.
  auto r = ParseInferRequest(R"({"inputs":[
      {"name":"A","datatype":"FP32","shape":[1,2],
       "parameters":{"shared_memory_region":"io","shared_memory_byte_size":8,
                     "shared_memory_offset":16}},
      {"name":"B","datatype":"FP32","shape":[2],"data":[1,2]}],
    "outputs":[{"name":"Y","parameters":{"shared_memory_region":"io",
                                         "shared_memory_byte_size":64}}]})",
                             std::nullopt, "m", "");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->request.raw_input_contents_size(), 2);
  EXPECT_TRUE(r->request.raw_input_contents(0).empty());
  EXPECT_EQ(r->request.raw_input_contents(1).size(), 8u);
  const auto& p = r->request.inputs(0).parameters();
  EXPECT_EQ(p.at("shared_memory_region").string_param(), "io");
  EXPECT_EQ(p.at("shared_memory_offset").int64_param(), 16);
  EXPECT_EQ(r->request.outputs(0).parameters().at("shared_memory_byte_size").int64_param(), 64);
  EXPECT_THAT(ParseError(R"({"inputs":[{"name":"A","datatype":"FP32","shape":[1],"data":[1],
      "parameters":{"shared_memory_region":"io","shared_memory_byte_size":4}}]})")
                  .message(),
              HasSubstr("in shared memory and also has 'data'"));

  // An output the core wrote to shared memory: parameters, no data.
  inference::ModelInferResponse resp;
  resp.set_model_name("m");
  auto* y = resp.add_outputs();
  y->set_name("Y");
  y->set_datatype("FP32");
  y->add_shape(2);
  (*y->mutable_parameters())["shared_memory_region"].set_string_param("io");
  (*y->mutable_parameters())["shared_memory_byte_size"].set_int64_param(64);
  resp.add_raw_output_contents("");
  RestInferRequest binary;
  binary.binary_output_default = true;
  for (const RestInferRequest* req : {&*r, &binary}) {
    auto out = EncodeInferResponse(resp, *req);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_FALSE(out->header_length.has_value());
    Json j = Json::parse(out->body);
    EXPECT_FALSE(j["outputs"][0].contains("data"));
    EXPECT_EQ(j["outputs"][0]["parameters"],
              Json::parse(R"({"shared_memory_region":"io","shared_memory_byte_size":64})"));
  }
}

TEST(RestJsonTest, SharedMemoryBodies) {
  auto reg = ParseShmRegisterRequest(R"({"key":"/kiln_x","offset":8,"byte_size":64})", "r");
  ASSERT_TRUE(reg.ok()) << reg.status();
  EXPECT_EQ(reg->name(), "r");
  EXPECT_EQ(reg->key(), "/kiln_x");
  EXPECT_EQ(reg->offset(), 8u);
  EXPECT_EQ(reg->byte_size(), 64u);
  EXPECT_EQ(ParseShmRegisterRequest(R"({"key":"/k","byte_size":1})", "r")->offset(), 0u);
  for (const char* bad : {R"({"byte_size":1})", R"({"key":7,"byte_size":1})",
                          R"({"key":"/k"})", R"({"key":"/k","byte_size":-1})",
                          R"({"key":"/k","byte_size":1.5})", R"({"key":"/k","offset":"0",
                          "byte_size":1})", "[]", "", "{"})
    EXPECT_EQ(ParseShmRegisterRequest(bad, "r").status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;

  inference::SystemSharedMemoryStatusResponse status;
  EXPECT_EQ(ShmStatusJson(status), "[]");
  for (const char* name : {"b", "a"}) {
    auto& r = (*status.mutable_regions())[name];
    r.set_name(name);
    r.set_key("/kiln_x");
    r.set_offset(4);
    r.set_byte_size(16);
  }
  EXPECT_EQ(Json::parse(ShmStatusJson(status)),
            Json::parse(R"([{"name":"a","key":"/kiln_x","offset":4,"byte_size":16},
                            {"name":"b","key":"/kiln_x","offset":4,"byte_size":16}])"));
}

}  // namespace
}  // namespace kiln

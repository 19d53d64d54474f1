// HttpClient: the binary infer body and response formats, HTTP error
// answers, addresses, and the client against a small civetweb server with
// canned v2 answers (keep-alive, escaping, auth header, exact 64-bit
// statistics, limits, timeout, connection refused).
#include "clients/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "civetweb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

inference::ModelInferRequest TwoInputs() {
  inference::ModelInferRequest r;
  r.set_model_name("simple");
  r.set_id("req-1");
  (*r.mutable_parameters())["priority"].set_int64_param(2);
  for (const char* name : {"INPUT0", "INPUT1"}) {
    auto* t = r.add_inputs();
    t->set_name(name);
    t->set_datatype("FP32");
    t->add_shape(1);
    t->add_shape(2);
  }
  r.add_raw_input_contents(std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  r.add_raw_input_contents(std::string("abcdefgh"));
  return r;
}

TEST(EncodeBinaryInferRequestTest, HeaderThenDataOfEveryInput) {
  auto body = EncodeBinaryInferRequest(TwoInputs());
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(body->model, "simple");
  ASSERT_EQ(body->body.size(), body->header_length + 16);
  EXPECT_EQ(body->body.substr(body->header_length),
            std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8) + "abcdefgh");
  Json j = Json::parse(body->body.substr(0, body->header_length));
  EXPECT_EQ(j["id"], "req-1");
  EXPECT_EQ(j["parameters"]["priority"], 2);
  EXPECT_EQ(j["parameters"]["binary_data_output"], true);
  ASSERT_EQ(j["inputs"].size(), 2u);
  EXPECT_EQ(j["inputs"][1]["name"], "INPUT1");
  EXPECT_EQ(j["inputs"][1]["datatype"], "FP32");
  EXPECT_EQ(j["inputs"][1]["shape"], Json::array({1, 2}));
  EXPECT_EQ(j["inputs"][1]["parameters"]["binary_data_size"], 8);
  EXPECT_FALSE(j.contains("outputs"));
}

TEST(EncodeBinaryInferRequestTest, RequestedOutputsAskForBinaryData) {
  inference::ModelInferRequest r = TwoInputs();
  r.add_outputs()->set_name("OUTPUT1");
  auto body = EncodeBinaryInferRequest(r);
  ASSERT_TRUE(body.ok()) << body.status();
  Json j = Json::parse(body->body.substr(0, body->header_length));
  EXPECT_FALSE(j["parameters"].contains("binary_data_output"));
  ASSERT_EQ(j["outputs"].size(), 1u);
  EXPECT_EQ(j["outputs"][0]["name"], "OUTPUT1");
  EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data"], true);
}

TEST(EncodeBinaryInferRequestTest, RefusesInputsWithoutRawBytes) {
  inference::ModelInferRequest r = TwoInputs();
  r.mutable_raw_input_contents()->RemoveLast();
  EXPECT_EQ(EncodeBinaryInferRequest(r).status().code(), absl::StatusCode::kInvalidArgument);
  r = TwoInputs();
  r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
  EXPECT_THAT(EncodeBinaryInferRequest(r).status().message(), HasSubstr("INPUT0"));
}

TEST(EncodeBinaryInferRequestTest, InvalidUtf8NamesDoNotThrow) {
  inference::ModelInferRequest r = TwoInputs();
  r.mutable_inputs(0)->set_name("bad\xff");
  auto body = EncodeBinaryInferRequest(r);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_THAT(body->body.substr(0, body->header_length), HasSubstr("bad\xEF\xBF\xBD"));
}

TEST(EncodeBinaryInferRequestTest, SharedMemoryTensorsCarryNoData) {
  inference::ModelInferRequest r = TwoInputs();
  // INPUT0 in region "io" (its raw entry dropped, as SetInputSharedMemory does).
  auto& p0 = *r.mutable_inputs(0)->mutable_parameters();
  p0["shared_memory_region"].set_string_param("io");
  p0["shared_memory_byte_size"].set_int64_param(8);
  r.mutable_raw_input_contents()->DeleteSubrange(0, 1);
  auto* o = r.add_outputs();
  o->set_name("OUTPUT0");
  (*o->mutable_parameters())["shared_memory_region"].set_string_param("io");
  (*o->mutable_parameters())["shared_memory_offset"].set_int64_param(64);
  r.add_outputs()->set_name("OUTPUT1");
  auto body = EncodeBinaryInferRequest(r);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(body->body.substr(body->header_length), "abcdefgh");
  Json j = Json::parse(body->body.substr(0, body->header_length));
  EXPECT_EQ(j["inputs"][0]["parameters"],
            Json::parse(R"({"shared_memory_region":"io","shared_memory_byte_size":8})"));
  EXPECT_EQ(j["inputs"][1]["parameters"]["binary_data_size"], 8);
  EXPECT_EQ(j["outputs"][0]["parameters"],
            Json::parse(R"({"shared_memory_region":"io","shared_memory_offset":64})"));
  EXPECT_EQ(j["outputs"][1]["parameters"]["binary_data"], true);
  // Every input in shared memory: no binary part at all.
  auto& p1 = *r.mutable_inputs(1)->mutable_parameters();
  p1["shared_memory_region"].set_string_param("io");
  r.clear_raw_input_contents();
  body = EncodeBinaryInferRequest(r);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(body->header_length, body->body.size());
  // An empty raw entry per shared-memory input is accepted, data is not.
  r.add_raw_input_contents();
  r.add_raw_input_contents();
  EXPECT_TRUE(EncodeBinaryInferRequest(r).ok());
  r.set_raw_input_contents(1, "x");
  EXPECT_THAT(EncodeBinaryInferRequest(r).status().message(),
              HasSubstr("'INPUT1' is in shared memory and also has raw bytes"));
}

std::string ResponseHeader(uint64_t size0, uint64_t size1) {
  return Json{{"model_name", "simple"},
              {"model_version", "1"},
              {"outputs",
               {{{"name", "OUTPUT0"},
                 {"datatype", "FP32"},
                 {"shape", {1, 2}},
                 {"parameters", {{"binary_data_size", size0}}}},
                {{"name", "OUTPUT1"},
                 {"datatype", "INT8"},
                 {"shape", {3}},
                 {"parameters", {{"binary_data_size", size1}}}}}}}
      .dump();
}

TEST(DecodeBinaryInferResponseTest, ReadsOutputsInOrder) {
  std::string h = ResponseHeader(8, 3);
  std::string body = h + "01234567" + "xyz";
  inference::ModelInferResponse resp;
  ASSERT_TRUE(DecodeBinaryInferResponse(body, h.size(), &resp).ok());
  EXPECT_EQ(resp.model_name(), "simple");
  EXPECT_EQ(resp.model_version(), "1");
  ASSERT_EQ(resp.outputs_size(), 2);
  EXPECT_EQ(resp.outputs(1).name(), "OUTPUT1");
  EXPECT_EQ(resp.outputs(1).datatype(), "INT8");
  EXPECT_EQ(resp.outputs(0).shape_size(), 2);
  ASSERT_EQ(resp.raw_output_contents_size(), 2);
  EXPECT_EQ(resp.raw_output_contents(0), "01234567");
  EXPECT_EQ(resp.raw_output_contents(1), "xyz");
}

TEST(DecodeBinaryInferResponseTest, SharedMemoryOutputsHaveNoData) {
  std::string h = Json{{"outputs",
                        {{{"name", "A"},
                          {"datatype", "FP32"},
                          {"shape", {2}},
                          {"parameters",
                           {{"shared_memory_region", "io"}, {"shared_memory_byte_size", 8}}}},
                         {{"name", "B"},
                          {"datatype", "INT8"},
                          {"shape", {3}},
                          {"parameters", {{"binary_data_size", 3}}}}}}}
                      .dump();
  inference::ModelInferResponse resp;
  ASSERT_TRUE(DecodeBinaryInferResponse(h + "xyz", h.size(), &resp).ok());
  ASSERT_EQ(resp.raw_output_contents_size(), 2);
  EXPECT_EQ(resp.raw_output_contents(0), "");
  EXPECT_EQ(resp.outputs(0).parameters().at("shared_memory_region").string_param(), "io");
  EXPECT_EQ(resp.raw_output_contents(1), "xyz");
  std::string bad = R"({"outputs":[{"name":"A","datatype":"FP32","shape":[2],
      "parameters":{"shared_memory_region":7}}]})";
  EXPECT_EQ(DecodeBinaryInferResponse(bad, std::nullopt, &resp).code(),
            absl::StatusCode::kDataLoss);
}

TEST(DecodeBinaryInferResponseTest, SizesMustAddUp) {
  std::string h = ResponseHeader(8, 3);
  inference::ModelInferResponse resp;
  absl::Status s = DecodeBinaryInferResponse(h + "01234567xy", h.size(), &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("OUTPUT1"));
  s = DecodeBinaryInferResponse(h + "01234567xyzW", h.size(), &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("1 bytes after"));
  s = DecodeBinaryInferResponse(h, h.size() + 1, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
}

TEST(DecodeBinaryInferResponseTest, MalformedHeaders) {
  inference::ModelInferResponse resp;
  for (std::string h : {"not json", "[1,2]", R"({"outputs": 3})",
                        R"({"outputs": [{"name": 1}]})",
                        R"({"outputs": [{"name": "a", "datatype": "FP32", "shape": ["x"]}]})",
                        R"({"outputs": [{"name": "a", "datatype": "FP32", "shape": [1],
                             "parameters": {"binary_data_size": -4}}]})"}) {
    EXPECT_EQ(DecodeBinaryInferResponse(h, h.size(), &resp).code(), absl::StatusCode::kDataLoss)
        << h;
  }
  std::string json_data =
      R"({"outputs": [{"name": "a", "datatype": "FP32", "shape": [1], "data": [1.5]}]})";
  EXPECT_EQ(DecodeBinaryInferResponse(json_data, std::nullopt, &resp).code(),
            absl::StatusCode::kUnimplemented);
}

TEST(HttpErrorStatusTest, CodeFromStatusMessageFromServer) {
  absl::Status s = HttpErrorStatus(404, R"({"error":"Request for unknown model: 'x'"})", "GET u");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "GET u: HTTP 404: Request for unknown model: 'x'");
  EXPECT_EQ(HttpErrorStatus(400, "{}", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpErrorStatus(401, "", "x").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(HttpErrorStatus(429, "", "x").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(HttpErrorStatus(503, "", "x").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HttpErrorStatus(504, "", "x").code(), absl::StatusCode::kDeadlineExceeded);
  s = HttpErrorStatus(418, "plain text", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(s.message(), "x: HTTP 418: plain text");
}

TEST(HttpBaseUrlTest, SchemesAndErrors) {
  EXPECT_EQ(*HttpBaseUrl("localhost:8000", false), "http://localhost:8000");
  EXPECT_EQ(*HttpBaseUrl("localhost:8000", true), "https://localhost:8000");
  EXPECT_EQ(*HttpBaseUrl(" HTTP://h:1/prefix/ ", false), "http://h:1/prefix");
  EXPECT_EQ(*HttpBaseUrl("https://h", true), "https://h");
  for (const char* bad : {"", "ftp://h:1", "h:1?x=1", "h:1#f", "http://", "h 1", "http://h", }) {
    bool tls = std::string(bad) == "http://h";
    EXPECT_EQ(HttpBaseUrl(bad, tls).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(HttpClientTest, CreateRefusesBadOptions) {
  EXPECT_EQ(HttpClient::Create({.url = "ftp://x"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  HttpClientOptions o;
  o.auth_token = "tok\nX-Evil: 1";
  EXPECT_EQ(HttpClient::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.auth_token = "";
  o.timeout = absl::ZeroDuration();
  EXPECT_EQ(HttpClient::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HttpClientTest, ConnectionRefusedIsUnavailable) {
  // A bound but not listening socket: connecting to it is refused, and
  // nobody else can take the port meanwhile.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  auto http = HttpClient::Create({.url = absl::StrCat("127.0.0.1:", ntohs(a.sin_port))});
  ASSERT_TRUE(http.ok()) << http.status();
  auto meta = (*http)->ModelMetadata("simple");
  ::close(fd);
  EXPECT_EQ(meta.status().code(), absl::StatusCode::kUnavailable) << meta.status();
  EXPECT_THAT(meta.status().message(), HasSubstr("GET http://127.0.0.1:"));
}

// ---- against a civetweb server with canned answers ----

struct FakeServer {
  mg_context* ctx = nullptr;
  int port = 0;
  std::mutex mu;
  std::set<int> client_ports;  // remote ports seen (one per connection)
  std::string last_auth;
  std::string last_shm;  // "PATH BODY" of the last shared-memory call
};

void Reply(mg_connection* c, int status, const std::string& body,
           const char* type = "application/json", const std::string& ihcl = "") {
  mg_response_header_start(c, status);
  mg_response_header_add(c, "Content-Type", type, -1);
  mg_response_header_add(c, "Content-Length", absl::StrCat(body.size()).c_str(), -1);
  if (!ihcl.empty()) mg_response_header_add(c, "Inference-Header-Content-Length", ihcl.c_str(), -1);
  mg_response_header_send(c);
  mg_write(c, body.data(), body.size());
}

// Echo: every input comes back as output "OUT_<name>" with the same bytes.
int Echo(mg_connection* c, const mg_request_info* info) {
  std::string body(static_cast<size_t>(info->content_length), '\0');
  size_t got = 0;
  while (got < body.size()) {
    int n = mg_read(c, body.data() + got, body.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  const char* h = mg_get_header(c, "Inference-Header-Content-Length");
  if (h == nullptr) {
    Reply(c, 400, R"({"error":"no Inference-Header-Content-Length"})");
    return 400;
  }
  size_t hl = std::stoul(h);
  Json req = Json::parse(body.substr(0, hl));
  Json outs = Json::array();
  for (const Json& in : req["inputs"])
    outs.push_back({{"name", "OUT_" + in["name"].get<std::string>()},
                    {"datatype", in["datatype"]},
                    {"shape", in["shape"]},
                    {"parameters", {{"binary_data_size", in["parameters"]["binary_data_size"]}}}});
  std::string header = Json{{"model_name", "m"}, {"outputs", outs}}.dump();
  Reply(c, 200, header + body.substr(hl), "application/octet-stream",
        absl::StrCat(header.size()));
  return 200;
}

int Handle(mg_connection* c, void* self) {
  auto* s = static_cast<FakeServer*>(self);
  const mg_request_info* info = mg_get_request_info(c);
  const std::string path = info->local_uri;
  {
    std::lock_guard<std::mutex> l(s->mu);
    s->client_ports.insert(info->remote_port);
    const char* auth = mg_get_header(c, "Authorization");
    s->last_auth = auth ? auth : "";
  }
  if (path == "/v2/models/m/infer") return Echo(c, info);
  if (absl::StartsWith(path, "/v2/systemsharedmemory")) {
    std::string body(static_cast<size_t>(std::max<int64_t>(0, info->content_length)), '\0');
    if (!body.empty()) mg_read(c, body.data(), body.size());
    {
      std::lock_guard<std::mutex> l(s->mu);
      s->last_shm = absl::StrCat(info->request_method, " ", path, " ", body);
    }
    if (absl::StrContains(path, "/region/off/")) {
      Reply(c, 400, R"({"error":"system shared memory is disabled: start kilnd with --shm-allow"})");
      return 400;
    }
    Reply(c, 200, "");
    return 200;
  }
  if (path == "/v2/models/a b/c") {  // the escaped name "a b/c" arrives decoded
    Reply(c, 200, R"({"name":"a b/c","versions":["1"],"platform":"p","inputs":[],"outputs":[]})");
  } else if (path == "/v2/models/m") {
    Reply(c, 200, R"({"name":"m","versions":["1"],"platform":"onnxruntime_onnx",
      "inputs":[{"name":"IN","datatype":"FP32","shape":[-1,2]}],"outputs":[],"extra":1})");
  } else if (path == "/v2/models/m/versions/3/config") {
    Reply(c, 200, R"({"name":"m","max_batch_size":8,
      "input":[{"name":"IN","data_type":"TYPE_FP32","dims":[2]}]})");
  } else if (path == "/v2/models/m/stats") {
    Reply(c, 200, R"({"model_stats":[{"name":"m","version":"1",
      "inference_count":12345678901234567890,"execution_count":3,
      "inference_stats":{"success":{"count":3,"ns":9007199254740993}}}]})");
  } else if (path == "/v2/models/big") {
    Reply(c, 200, std::string(4096, ' '));
  } else if (path == "/v2/models/slow") {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    Reply(c, 200, "{}");
  } else if (path == "/v2/models/garbage") {
    Reply(c, 200, R"({"name": 7})");
  } else {
    Reply(c, 404, R"({"error":"Request for unknown model: 'missing'"})");
    return 404;
  }
  return 200;
}

class HttpClientServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new FakeServer();
    const char* options[] = {"listening_ports", "127.0.0.1:0", "enable_keep_alive", "yes",
                             "num_threads", "4", nullptr};
    mg_callbacks cb;
    std::memset(&cb, 0, sizeof(cb));
    server_->ctx = mg_start(&cb, nullptr, options);
    ASSERT_NE(server_->ctx, nullptr);
    mg_set_request_handler(server_->ctx, "/", &Handle, server_);
    mg_server_port ports[1];
    ASSERT_EQ(mg_get_server_ports(server_->ctx, 1, ports), 1);
    server_->port = ports[0].port;
  }
  static void TearDownTestSuite() {
    if (server_->ctx) mg_stop(server_->ctx);
    delete server_;
  }
  std::unique_ptr<HttpClient> Client(HttpClientOptions o = {}) {
    o.url = absl::StrCat("127.0.0.1:", server_->port);
    auto c = HttpClient::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  static FakeServer* server_;
};
FakeServer* HttpClientServerTest::server_ = nullptr;

TEST_F(HttpClientServerTest, MessagesOverOneKeptAliveConnection) {
  HttpClientOptions o;
  o.auth_token = "tok";
  auto c = Client(o);
  ASSERT_NE(c, nullptr);
  {
    std::lock_guard<std::mutex> l(server_->mu);
    server_->client_ports.clear();
  }
  auto meta = c->ModelMetadata("m");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->platform(), "onnxruntime_onnx");
  ASSERT_EQ(meta->inputs_size(), 1);
  EXPECT_EQ(meta->inputs(0).shape(0), -1);
  auto config = c->ModelConfig("m", "3");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->config().max_batch_size(), 8);
  EXPECT_EQ(config->config().input(0).data_type(), inference::TYPE_FP32);
  auto stats = c->ModelStatistics("m");
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->model_stats_size(), 1);
  EXPECT_EQ(stats->model_stats(0).inference_count(), 12345678901234567890ULL);
  EXPECT_EQ(stats->model_stats(0).inference_stats().success().ns(), 9007199254740993ULL);
  std::lock_guard<std::mutex> l(server_->mu);
  EXPECT_EQ(server_->client_ports.size(), 1u) << "each call opened a new connection";
  EXPECT_EQ(server_->last_auth, "Bearer tok");
}

TEST_F(HttpClientServerTest, BinaryInferRoundTrip) {
  auto c = Client();
  ASSERT_NE(c, nullptr);
  auto body = EncodeBinaryInferRequest([] {
    inference::ModelInferRequest r = TwoInputs();
    r.set_model_name("m");
    return r;
  }());
  ASSERT_TRUE(body.ok());
  inference::ModelInferResponse resp;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c->Infer(*body, &resp).ok()) << c->Infer(*body, &resp);
    ASSERT_EQ(resp.outputs_size(), 2);
    EXPECT_EQ(resp.outputs(1).name(), "OUT_INPUT1");
    EXPECT_EQ(resp.raw_output_contents(1), "abcdefgh");
  }
}

TEST_F(HttpClientServerTest, ErrorsCarryTheServersMessage) {
  auto c = Client();
  ASSERT_NE(c, nullptr);
  auto meta = c->ModelMetadata("missing");
  EXPECT_EQ(meta.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(meta.status().message(), HasSubstr("Request for unknown model: 'missing'"));
  EXPECT_EQ(c->ModelMetadata("garbage").status().code(), absl::StatusCode::kDataLoss);
  // Names are escaped into one path segment.
  auto odd = c->ModelMetadata("a b/c");
  ASSERT_TRUE(odd.ok()) << odd.status();
  EXPECT_EQ(odd->name(), "a b/c");
}

TEST_F(HttpClientServerTest, ResponseLimitAndTimeout) {
  HttpClientOptions o;
  o.max_response_bytes = 1024;
  auto c = Client(o);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->ModelMetadata("big").status().code(), absl::StatusCode::kResourceExhausted);
  o.timeout = absl::Milliseconds(200);
  c = Client(o);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->ModelMetadata("slow").status().code(), absl::StatusCode::kDeadlineExceeded);
  // The handle still works after a failed call.
  EXPECT_TRUE(c->ModelMetadata("m").ok());
}

TEST_F(HttpClientServerTest, SharedMemoryRegisterAndUnregister) {
  auto c = Client();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->RegisterSystemSharedMemory("r 1", "/kiln_x", 4096, 64).ok());
  std::string last;
  {
    std::lock_guard<std::mutex> l(server_->mu);
    last = server_->last_shm;
  }
  const std::string prefix = "POST /v2/systemsharedmemory/region/r 1/register ";
  ASSERT_TRUE(absl::StartsWith(last, prefix)) << last;
  EXPECT_EQ(Json::parse(last.substr(prefix.size())),
            Json::parse(R"({"key":"/kiln_x","offset":64,"byte_size":4096})"));
  ASSERT_TRUE(c->UnregisterSystemSharedMemory("r 1").ok());
  {
    std::lock_guard<std::mutex> l(server_->mu);
    EXPECT_EQ(server_->last_shm, "POST /v2/systemsharedmemory/region/r 1/unregister ");
  }
  ASSERT_TRUE(c->UnregisterSystemSharedMemory().ok());
  {
    std::lock_guard<std::mutex> l(server_->mu);
    EXPECT_EQ(server_->last_shm, "POST /v2/systemsharedmemory/unregister ");
  }
  absl::Status s = c->RegisterSystemSharedMemory("off", "/kiln_x", 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--shm-allow"));
}

}  // namespace
}  // namespace kiln

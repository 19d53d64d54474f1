// In-process tests of the gRPC service: a KilnServer on 127.0.0.1 free
// ports with the fake backend, driven through the C++ client library.
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "clients/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/kiln_server.h"
#include "server/testing/fake_backend.h"
#include "server/testing/http_get.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

constexpr char kFast[] = R"pb(
  max_batch_size: 8
  input [ { name: "IN0" data_type: TYPE_FP32 dims: [ 4 ] },
          { name: "IN1" data_type: TYPE_FP32 dims: [ 4 ] } ]
  output [ { name: "OUT0" data_type: TYPE_FP32 dims: [ 4 ] },
           { name: "OUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
  dynamic_batching { }
)pb";

// Requests wait here (10 s batching delay) until the queue is flushed.
constexpr char kSlow[] = R"pb(
  max_batch_size: 8
  dynamic_batching {
    preferred_batch_size: [ 8 ]
    max_queue_delay_microseconds: 10000000
    default_queue_policy { max_queue_size: 2 allow_timeout_override: true }
  }
)pb";

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string MakeRepo(const std::string& name) {
  std::string root = absl::StrCat(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp", "/",
                                  name);
  auto model = [&](const std::string& m, const char* config) {
    ::mkdir(root.c_str(), 0755);
    ::mkdir((root + "/" + m).c_str(), 0755);
    ::mkdir((root + "/" + m + "/1").c_str(), 0755);
    WriteFile(root + "/" + m + "/1/model.onnx", "fake");
    if (config) WriteFile(root + "/" + m + "/config.pbtxt", config);
  };
  model("fast", kFast);
  model("slow", kSlow);
  model("derived", nullptr);
  model("broken", "optimization { }\n");
  model("multi", "version_policy { latest { num_versions: 2 } }\n");
  for (const char* v : {"2", "3"}) {
    ::mkdir((root + "/multi/" + v).c_str(), 0755);
    WriteFile(root + "/multi/" + v + "/model.onnx", "fake");
  }
  return root;
}

ClientTensor Tensor(const std::string& name, std::vector<float> v, int64_t rows = 1) {
  ClientTensor t{name, "FP32", {rows, static_cast<int64_t>(v.size()) / rows}, ""};
  t.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  return t;
}

std::vector<float> Floats(const ClientTensor& t) {
  std::vector<float> v(t.data.size() / 4);
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

// POSTs `body` to 127.0.0.1:port`path` (Connection: close); returns the whole
// response (status line, headers, body).
std::string HttpPost(int port, const std::string& path, const std::string& body) {
  return kiln::testing::HttpExchange(
      port, absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(),
                         "\r\nConnection: close\r\n\r\n", body));
}

class ServiceTest : public ::testing::Test {
 protected:
  // `metrics`: serve /metrics (stopping its HTTP server takes ~2 s).
  // `http`: serve HTTP/REST too.
  void Start(ControlMode mode = ControlMode::kNone, const std::string& token = "",
             bool metrics = false, bool http = false) {
    KilnServerOptions o;
    o.model_repository = MakeRepo(::testing::UnitTest::GetInstance()->current_test_info()->name());
    o.address = "127.0.0.1";
    o.grpc_port = 0;
    o.metrics_port = metrics ? 0 : -1;
    o.http_port = http ? 0 : -1;
    o.mode = mode;
    o.auth_token = token;
    o.exit_timeout = absl::Seconds(5);
    if (mode == ControlMode::kExplicit) o.load_models = {"fast"};
    auto s = KilnServer::Start(o, std::make_unique<testing::FakeLoader>());
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    ClientOptions co;
    co.address = absl::StrCat("127.0.0.1:", server_->grpc_port());
    co.auth_token = token;
    co.timeout = absl::Seconds(20);
    client_ = *KilnClient::Connect(co);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }
  std::vector<ClientTensor> Inputs(float base) {
    return {Tensor("IN0", {base, base + 1, base + 2, base + 3}), Tensor("IN1", {1, 1, 1, 1})};
  }

  std::unique_ptr<KilnServer> server_;
  std::unique_ptr<KilnClient> client_;
};

// gRPC and HTTP/REST are two adapters over one InferenceCore: a request
// through either is counted in the same statistics, and a bad request gets
// the same message from both.
TEST_F(ServiceTest, GrpcAndRestShareTheCore) {
  Start(ControlMode::kNone, "", /*metrics=*/false, /*http=*/true);
  ASSERT_GT(server_->http_port(), 0);
  std::string reply = HttpPost(server_->http_port(), "/v2/models/fast/infer", R"({"inputs": [
      {"name": "IN0", "datatype": "FP32", "shape": [1, 4], "data": [10, 11, 12, 13]},
      {"name": "IN1", "datatype": "FP32", "shape": [1, 4], "data": [1, 1, 1, 1]}]})");
  EXPECT_THAT(reply, ::testing::StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(reply, HasSubstr(R"("name":"OUT0","datatype":"FP32","shape":[1,4],)"
                               R"("data":[11.0,12.0,13.0,14.0])"));
  auto stats = client_->ModelStatistics("fast");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->model_stats(0).inference_stats().success().count(), 1u);
  ASSERT_TRUE(client_->Infer("fast", Inputs(1)).ok());
  std::string index = HttpPost(server_->http_port(), "/v2/repository/index", "");
  EXPECT_THAT(index, HasSubstr(R"({"name":"fast","version":"1","state":"READY","reason":""})"));
  auto after = client_->ModelStatistics("fast");
  EXPECT_EQ(after->model_stats(0).inference_stats().success().count(), 2u);

  std::vector<ClientTensor> wrong = Inputs(1);
  wrong[1].datatype = "FP64";
  wrong[1].data.resize(wrong[1].data.size() * 2);
  auto grpc_error = client_->Infer("fast", wrong);
  ASSERT_EQ(grpc_error.status().code(), absl::StatusCode::kInvalidArgument);
  std::string rest_error = HttpPost(server_->http_port(), "/v2/models/fast/infer", R"({"inputs": [
      {"name": "IN0", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]},
      {"name": "IN1", "datatype": "FP64", "shape": [1, 4], "data": [1, 1, 1, 1]}]})");
  EXPECT_THAT(rest_error, ::testing::StartsWith("HTTP/1.1 400"));
  EXPECT_THAT(rest_error,
              HasSubstr(absl::StrCat(R"({"error":")", grpc_error.status().message(), "\"}")));
  EXPECT_EQ(client_->ModelStatistics("fast")->model_stats(0).inference_stats().fail().count(),
            2u);
}

TEST_F(ServiceTest, EveryRpc) {
  Start(ControlMode::kNone, "", /*metrics=*/true);
  EXPECT_TRUE(*client_->ServerLive());
  EXPECT_TRUE(*client_->ServerReady());
  EXPECT_EQ(*client_->Health(), "SERVING");
  EXPECT_EQ(*client_->Health("inference.GRPCInferenceService"), "SERVING");
  auto meta = client_->ServerMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->name(), "kiln");
  EXPECT_THAT(std::vector<std::string>(meta->extensions().begin(), meta->extensions().end()),
              ::testing::Contains("model_repository"));
  auto mm = client_->ModelMetadata("fast");
  ASSERT_TRUE(mm.ok()) << mm.status();
  EXPECT_EQ(mm->versions(0), "1");
  ASSERT_EQ(mm->inputs_size(), 2);
  EXPECT_EQ(mm->inputs(0).shape(0), -1);
  EXPECT_EQ(mm->inputs(0).shape(1), 4);
  EXPECT_TRUE(*client_->ModelReady("fast"));
  EXPECT_TRUE(*client_->ModelReady("fast", "1"));
  auto cfg = client_->ModelConfig("derived");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->config().max_batch_size(), 8);
  EXPECT_EQ(cfg->config().input_size(), 2);

  auto out = client_->Infer("fast", Inputs(10));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ(Floats((*out)[0]), std::vector<float>({11, 12, 13, 14}));
  EXPECT_EQ(Floats((*out)[1]), std::vector<float>({20, 22, 24, 26}));

  auto stats = client_->ModelStatistics("fast");
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->model_stats_size(), 1);
  EXPECT_EQ(stats->model_stats(0).inference_stats().success().count(), 1u);
  EXPECT_EQ(stats->model_stats(0).inference_count(), 1u);
  auto all = client_->ModelStatistics();
  EXPECT_EQ(all->model_stats_size(), 5);  // fast, slow, derived, multi 2 and 3

  auto index = client_->RepositoryIndex();
  ASSERT_TRUE(index.ok());
  std::map<std::string, std::pair<std::string, std::string>> states;
  for (const auto& m : index->models()) states[m.name()] = {m.state(), m.reason()};
  EXPECT_EQ(states["fast"].first, "READY");
  EXPECT_EQ(states["broken"].first, "UNAVAILABLE");
  EXPECT_THAT(states["broken"].second, HasSubstr("'optimization' of ModelConfig is not supported"));
  EXPECT_EQ(client_->RepositoryIndex(true)->models_size(), 5);

  // Streaming: responses in-band, errors too.
  grpc::ClientContext ctx;
  auto stream = client_->stub()->ModelStreamInfer(&ctx);
  InferOptions io;
  for (int i = 0; i < 3; ++i) {
    io.id = absl::StrCat("s", i);
    inference::ModelInferRequest req = BuildInferRequest(i == 1 ? "nope" : "fast", Inputs(i), io);
    ASSERT_TRUE(stream->Write(req));
  }
  stream->WritesDone();
  std::map<std::string, inference::ModelStreamInferResponse> got;
  inference::ModelStreamInferResponse resp;
  while (stream->Read(&resp)) got[resp.infer_response().id()] = resp;
  EXPECT_TRUE(stream->Finish().ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got["s0"].error_message().empty());
  EXPECT_THAT(got["s1"].error_message(), HasSubstr("unknown model"));
  EXPECT_EQ(Floats(*ParseInferResponse(got["s2"].infer_response())->begin())[0], 3);

  // Metrics.
  auto text = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("kiln_inference_requests_success_total{model=\"fast\",version=\"1\"} 3"));
  EXPECT_THAT(*text, HasSubstr("kiln_rpc_requests_total{code=\"OK\",method=\"ModelInfer\"} 1"));
  EXPECT_THAT(*text, HasSubstr("kiln_estimated_flops_total{model=\"fast\",version=\"1\"}"));
}

TEST_F(ServiceTest, VersionPolicy) {
  Start();
  auto meta = client_->ModelMetadata("multi");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(std::vector<std::string>(meta->versions().begin(), meta->versions().end()),
            std::vector<std::string>({"2", "3"}));
  InferOptions o;
  o.version = "2";
  EXPECT_TRUE(client_->Infer("multi", Inputs(0), o).ok());
  o.version = "1";  // on disk, but not served by the policy
  EXPECT_EQ(client_->Infer("multi", Inputs(0), o).status().code(), absl::StatusCode::kNotFound);
  inference::ModelInferResponse resp;
  ASSERT_TRUE(client_->InferRaw(BuildInferRequest("multi", Inputs(0), {}), &resp).ok());
  EXPECT_EQ(resp.model_version(), "3");  // the latest by default
  EXPECT_EQ(client_->ModelStatistics("multi")->model_stats_size(), 2);
}

TEST_F(ServiceTest, ErrorCodes) {
  Start(ControlMode::kNone, "", /*metrics=*/true);
  auto code = [](const absl::Status& s) { return s.code(); };
  EXPECT_EQ(code(client_->Infer("nope", Inputs(0)).status()), absl::StatusCode::kNotFound);
  InferOptions v7;
  v7.version = "7";
  EXPECT_EQ(code(client_->Infer("fast", Inputs(0), v7).status()), absl::StatusCode::kNotFound);
  v7.version = "x";
  EXPECT_EQ(code(client_->Infer("fast", Inputs(0), v7).status()), absl::StatusCode::kNotFound);
  EXPECT_EQ(code(client_->ModelMetadata("nope").status()), absl::StatusCode::kNotFound);
  EXPECT_EQ(code(client_->ModelReady("nope").status()), absl::StatusCode::kNotFound);
  EXPECT_EQ(code(client_->ModelStatistics("nope").status()), absl::StatusCode::kNotFound);
  auto bad = Inputs(0);
  bad[0].datatype = "FP64";
  EXPECT_EQ(code(client_->Infer("fast", bad).status()), absl::StatusCode::kInvalidArgument);
  bad = Inputs(0);
  bad[0].shape = {9, 4};
  EXPECT_EQ(code(client_->Infer("fast", bad).status()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(client_->Infer("broken", Inputs(0)).status()), absl::StatusCode::kUnavailable);
  EXPECT_EQ(code(client_->LoadModel("fast")), absl::StatusCode::kFailedPrecondition);

  // Queue timeout, queue full and cancellation on the slow model.
  InferOptions t;
  t.timeout_us = 20000;
  auto timed_out = client_->Infer("slow", Inputs(0), t);
  EXPECT_EQ(code(timed_out.status()), absl::StatusCode::kUnavailable);
  EXPECT_THAT(timed_out.status().message(), HasSubstr("timed out"));

  std::vector<std::thread> waiting;
  std::vector<absl::Status> results(2);
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  for (int i = 0; i < 2; ++i) ctxs.push_back(client_->NewContext());
  for (int i = 0; i < 2; ++i) {
    waiting.emplace_back([&, i] {
      inference::ModelInferRequest req = BuildInferRequest("slow", Inputs(i), {});
      inference::ModelInferResponse resp;
      results[i] = FromGrpcStatus(client_->stub()->ModelInfer(ctxs[i].get(), req, &resp));
    });
  }
  // Wait until both sit in the queue, then the third finds it full.
  for (int i = 0; i < 500; ++i) {
    auto s = client_->ModelStatistics("slow");
    (void)s;
    if (server_->manager()->Get("slow", "").value()->pending() == 2) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  auto full = client_->Infer("slow", Inputs(5));
  EXPECT_EQ(code(full.status()), absl::StatusCode::kUnavailable);
  EXPECT_THAT(full.status().message(), HasSubstr("full"));
  ctxs[0]->TryCancel();
  ctxs[1]->TryCancel();
  for (auto& th : waiting) th.join();
  EXPECT_EQ(code(results[0]), absl::StatusCode::kCancelled);
  // The server saw the cancellations too: the queue empties.
  for (int i = 0; i < 500 && server_->manager()->Get("slow", "").value()->pending() > 0; ++i)
    absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(server_->manager()->Get("slow", "").value()->pending(), 0u);
  auto text = testing::HttpGet(server_->metrics_port(), "/metrics");
  EXPECT_THAT(*text, HasSubstr("reason=\"cancelled\""));
  EXPECT_THAT(*text, HasSubstr("reason=\"invalid_argument\""));
}

TEST_F(ServiceTest, BearerToken) {
  Start(ControlMode::kNone, "s3cret");
  EXPECT_TRUE(*client_->ServerLive());
  ClientOptions co;
  co.address = absl::StrCat("127.0.0.1:", server_->grpc_port());
  auto anon = *KilnClient::Connect(co);
  EXPECT_EQ(anon->ServerLive().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(anon->Infer("fast", Inputs(0)).status().code(), absl::StatusCode::kUnauthenticated);
  co.auth_token = "wrong";
  auto wrong = *KilnClient::Connect(co);
  EXPECT_EQ(wrong->ServerLive().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(*anon->Health(), "SERVING");  // probes need no token
}

TEST_F(ServiceTest, ExplicitLoadUnloadDrains) {
  Start(ControlMode::kExplicit);
  EXPECT_EQ(client_->Infer("slow", Inputs(0)).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(client_->LoadModel("slow").ok());
  EXPECT_EQ(client_->LoadModel("nope").code(), absl::StatusCode::kNotFound);
  auto broken = client_->LoadModel("broken");
  EXPECT_EQ(broken.code(), absl::StatusCode::kInvalidArgument);
  // A queued request survives the unload: the queue is drained, not dropped.
  absl::StatusOr<std::vector<ClientTensor>> queued;
  std::thread t([&] { queued = client_->Infer("slow", Inputs(3)); });
  for (int i = 0; i < 500 && server_->manager()->Get("slow", "").value()->pending() == 0; ++i)
    absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(client_->UnloadModel("slow").ok());
  t.join();
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(Floats((*queued)[0])[0], 4);
  EXPECT_EQ(client_->Infer("slow", Inputs(0)).status().code(), absl::StatusCode::kUnavailable);
  // Reload of a loaded model keeps serving.
  ASSERT_TRUE(client_->LoadModel("fast").ok());
  EXPECT_TRUE(client_->Infer("fast", Inputs(0)).ok());
}

TEST_F(ServiceTest, ShutdownFinishesQueuedRequests) {
  Start();
  absl::StatusOr<std::vector<ClientTensor>> queued;
  std::thread t([&] { queued = client_->Infer("slow", Inputs(7)); });
  for (int i = 0; i < 500 && server_->manager()->Get("slow", "").value()->pending() == 0; ++i)
    absl::SleepFor(absl::Milliseconds(5));
  absl::Time start = absl::Now();
  server_->Shutdown();
  t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));  // no 10 s batching delay
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(Floats((*queued)[0])[0], 8);
}

// Loads of model "stuck" wait until Open(); everything else is a fake.
class StuckLoader : public BackendLoader {
 public:
  explicit StuckLoader(std::shared_ptr<absl::Notification> open) : open_(std::move(open)) {}
  absl::StatusOr<std::unique_ptr<ModelBackend>> Load(const std::string& path,
                                                     const std::string& device) override {
    if (path.find("/stuck/") != std::string::npos) open_->WaitForNotification();
    return fake_.Load(path, device);
  }

 private:
  std::shared_ptr<absl::Notification> open_;
  testing::FakeLoader fake_;
};

// Issue 13: a model load that never ends (a hung file system) must not hold
// up exit: Shutdown gives up on it after exit_timeout (+1 s) and says so;
// the load goes on in its thread, and the destructor waits for it.
TEST(KilnServerTest, ShutdownDoesNotWaitForAStuckLoad) {
  std::string repo = MakeRepo("stuck_load");
  ::mkdir((repo + "/stuck").c_str(), 0755);
  ::mkdir((repo + "/stuck/1").c_str(), 0755);
  WriteFile(repo + "/stuck/1/model.onnx", "fake");
  KilnServerOptions o;
  o.model_repository = repo;
  o.address = "127.0.0.1";
  o.grpc_port = 0;
  o.metrics_port = -1;
  o.mode = ControlMode::kExplicit;
  o.load_models = {"fast"};
  o.exit_timeout = absl::Milliseconds(500);
  o.load_timeout = absl::Milliseconds(200);
  auto open = std::make_shared<absl::Notification>();
  auto s = KilnServer::Start(o, std::make_unique<StuckLoader>(open));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->manager()->Load("stuck").code(), absl::StatusCode::kDeadlineExceeded);
  const absl::Time start = absl::Now();
  EXPECT_FALSE((*s)->Shutdown());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE((*s)->Shutdown());  // later calls: nothing left to do
  EXPECT_EQ((*s)->manager()->Busy(), std::vector<std::string>{"stuck"});
  open->Notify();                 // the load ends; the destructor joins it
  s->reset();
}

// Without a stuck load Shutdown reports a clean stop.
TEST(KilnServerTest, ShutdownIsCleanWithoutStuckLoads) {
  KilnServerOptions o;
  o.model_repository = MakeRepo("clean_stop");
  o.address = "127.0.0.1";
  o.grpc_port = 0;
  o.metrics_port = -1;
  o.mode = ControlMode::kExplicit;
  o.load_models = {"fast"};
  auto s = KilnServer::Start(o, std::make_unique<testing::FakeLoader>());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Shutdown());
}

}  // namespace
}  // namespace kiln

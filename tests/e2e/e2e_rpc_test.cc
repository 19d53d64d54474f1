// End to end: the real kilnd binary on free loopback ports, serving the
// shipped `simple` model through the engine; every RPC and every error code
// of the protocol, bearer-token auth and TLS.
#include <signal.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/testing/http_get.h"
#include "tests/e2e/e2e_util.h"

namespace kiln::e2e {
namespace {

using ::testing::HasSubstr;

constexpr char kKilnd[] = "server/kilnd";

constexpr char kTinyQueue[] = R"pb(
  max_batch_size: 8
  input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
          { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
  output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
           { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
  dynamic_batching {
    preferred_batch_size: [ 8 ]
    max_queue_delay_microseconds: 20000000
    default_queue_policy { max_queue_size: 1 allow_timeout_override: true }
  }
)pb";

constexpr char kNoBatch[] = R"pb(
  max_batch_size: 0
  input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 16 ] },
          { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1, 16 ] } ]
)pb";

std::vector<ClientTensor> Inputs(int rows, float base) {
  std::vector<float> a(rows * 16), b(rows * 16);
  for (int i = 0; i < rows * 16; ++i) {
    a[i] = base + static_cast<float>(i) - 8;
    b[i] = 0.5f * static_cast<float>(i % 5) - 1;
  }
  return {FloatTensor("INPUT0", a, {rows, 16}), FloatTensor("INPUT1", b, {rows, 16})};
}

void ExpectSimpleOutputs(const std::vector<ClientTensor>& in, const std::vector<ClientTensor>& out) {
  ASSERT_EQ(out.size(), 2u);
  std::vector<float> a = Floats(in[0]), b = Floats(in[1]);
  std::vector<float> sum = Floats(out[0]), relu = Floats(out[1]);
  ASSERT_EQ(out[0].name, "OUTPUT0");
  ASSERT_EQ(out[0].shape, in[0].shape);
  ASSERT_EQ(sum.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_FLOAT_EQ(sum[i], a[i] + b[i]);
    EXPECT_FLOAT_EQ(relu[i], std::max(0.0f, a[i] * b[i]));
  }
}

class E2eRpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto repo = MakeRepo("rpc_repo", {{"tiny_queue", kTinyQueue},
                                      {"derived", ""},
                                      {"nobatch", kNoBatch},
                                      {"broken", "optimization { }\n"}});
    ASSERT_TRUE(repo.ok()) << repo.status();
    auto p = KilnProcess::Start(kKilnd, {"--model-repository=" + *repo, "--exit-timeout=5"});
    ASSERT_TRUE(p.ok()) << p.status();
    kilnd_ = p->release();
  }
  static void TearDownTestSuite() {
    if (kilnd_) {
      kilnd_->Signal(SIGTERM);
      auto code = kilnd_->Wait(absl::Seconds(30));
      EXPECT_TRUE(code.ok() && *code == 0) << "kilnd did not exit cleanly";
      delete kilnd_;
      kilnd_ = nullptr;
    }
  }
  void SetUp() override {
    ASSERT_NE(kilnd_, nullptr);
    client_ = kilnd_->Client();
  }
  static KilnProcess* kilnd_;
  std::unique_ptr<KilnClient> client_;
};
KilnProcess* E2eRpcTest::kilnd_ = nullptr;

TEST_F(E2eRpcTest, EveryRpc) {
  EXPECT_TRUE(*client_->ServerLive());
  EXPECT_TRUE(*client_->ServerReady());
  EXPECT_EQ(*client_->Health(), "SERVING");
  EXPECT_EQ(client_->ServerMetadata()->name(), "kiln");
  EXPECT_TRUE(*client_->ModelReady("simple"));
  EXPECT_TRUE(*client_->ModelReady("simple", "1"));
  auto meta = client_->ModelMetadata("derived");
  ASSERT_TRUE(meta.ok()) << meta.status();
  ASSERT_EQ(meta->inputs_size(), 2);
  EXPECT_EQ(meta->inputs(0).datatype(), "FP32");
  EXPECT_EQ(meta->outputs(1).name(), "OUTPUT1");
  auto config = client_->ModelConfig("derived");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->config().max_batch_size(), 8);  // derived: batch dim is dynamic
  EXPECT_TRUE(config->config().has_dynamic_batching());
  EXPECT_EQ(client_->ModelConfig("simple")->config().model_warmup_size(), 1);

  auto in = Inputs(3, 1);
  auto out = client_->Infer("simple", in);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectSimpleOutputs(in, *out);
  // Typed contents in, raw out; and only the output asked for.
  inference::ModelInferRequest req;
  req.set_model_name("simple");
  for (int k = 0; k < 2; ++k) {
    auto* t = req.add_inputs();
    t->set_name(in[k].name);
    t->set_datatype("FP32");
    t->add_shape(3);
    t->add_shape(16);
    for (float v : Floats(in[k])) t->mutable_contents()->add_fp32_contents(v);
  }
  req.add_outputs()->set_name("OUTPUT1");
  inference::ModelInferResponse resp;
  ASSERT_TRUE(client_->InferRaw(req, &resp).ok());
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.outputs(0).name(), "OUTPUT1");
  EXPECT_EQ(resp.raw_output_contents(0), (*out)[1].data);

  // Streaming.
  grpc::ClientContext ctx;
  auto stream = client_->stub()->ModelStreamInfer(&ctx);
  for (int i = 0; i < 4; ++i) {
    InferOptions o;
    o.id = absl::StrCat("r", i);
    ASSERT_TRUE(stream->Write(BuildInferRequest("simple", Inputs(1, i), o)));
  }
  stream->WritesDone();
  int answered = 0;
  inference::ModelStreamInferResponse sr;
  while (stream->Read(&sr)) {
    EXPECT_TRUE(sr.error_message().empty()) << sr.error_message();
    int i = sr.infer_response().id()[1] - '0';
    ExpectSimpleOutputs(Inputs(1, i), *ParseInferResponse(sr.infer_response()));
    ++answered;
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered, 4);

  auto stats = client_->ModelStatistics("simple");
  ASSERT_TRUE(stats.ok());
  EXPECT_GE(stats->model_stats(0).inference_stats().success().count(), 6u);
  EXPECT_GT(stats->model_stats(0).inference_stats().compute_infer().ns(), 0u);
  auto index = client_->RepositoryIndex();
  ASSERT_TRUE(index.ok());
  std::map<std::string, std::string> states;
  for (const auto& m : index->models()) states[m.name()] = m.state() + " " + m.reason();
  EXPECT_THAT(states["simple"], HasSubstr("READY"));
  EXPECT_THAT(states["broken"], HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(states["broken"], HasSubstr("not supported by kiln"));
}

TEST_F(E2eRpcTest, EveryErrorCode) {
  auto code = [](const absl::Status& s) { return s.code(); };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  // NOT_FOUND
  EXPECT_EQ(code(client_->Infer("nope", Inputs(1, 0)).status()), absl::StatusCode::kNotFound);
  InferOptions v2;
  v2.version = "2";
  EXPECT_EQ(code(client_->Infer("simple", Inputs(1, 0), v2).status()), absl::StatusCode::kNotFound);
  // INVALID_ARGUMENT
  auto in = Inputs(1, 0);
  in[0].datatype = "INT32";
  EXPECT_EQ(code(client_->Infer("simple", in).status()), kInvalid);
  in = Inputs(1, 0);
  in[0].shape = {1, 8};
  EXPECT_EQ(code(client_->Infer("simple", in).status()), kInvalid);
  in = Inputs(1, 0);
  in[1].data.pop_back();
  EXPECT_EQ(code(client_->Infer("simple", in).status()), kInvalid);
  in = Inputs(1, 0);
  in[1].name = "INPUT9";
  EXPECT_EQ(code(client_->Infer("simple", in).status()), kInvalid);
  in = Inputs(1, 0);
  in.pop_back();
  EXPECT_EQ(code(client_->Infer("simple", in).status()), kInvalid);
  EXPECT_EQ(code(client_->Infer("simple", Inputs(9, 0)).status()), kInvalid);  // batch > 8
  inference::ModelInferRequest both = BuildInferRequest("simple", Inputs(1, 0), {});
  both.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
  inference::ModelInferResponse resp;
  EXPECT_EQ(code(client_->InferRaw(both, &resp)), kInvalid);
  for (int64_t rows : {int64_t{1} << 62, int64_t{1} << 32}) {  // overflow; over the byte limit
    inference::ModelInferRequest huge = BuildInferRequest("nobatch", Inputs(1, 0), {});
    huge.mutable_inputs(0)->set_shape(0, rows);
    huge.mutable_inputs(1)->set_shape(0, rows);
    absl::Status s = client_->InferRaw(huge, &resp);
    EXPECT_EQ(code(s), kInvalid) << s;
  }
  // UNAVAILABLE: model not ready; queue timeout; queue full.
  EXPECT_EQ(code(client_->Infer("broken", Inputs(1, 0)).status()), absl::StatusCode::kUnavailable);
  InferOptions t;
  t.timeout_us = 50000;
  auto timed = client_->Infer("tiny_queue", Inputs(1, 0), t);
  EXPECT_EQ(code(timed.status()), absl::StatusCode::kUnavailable);
  EXPECT_THAT(timed.status().message(), HasSubstr("timed out"));
  // One request fills the queue (it waits for a batch of 8) ...
  auto ctx = client_->NewContext();
  absl::Status first;
  std::thread waiter([&] {
    inference::ModelInferRequest r = BuildInferRequest("tiny_queue", Inputs(1, 0), {});
    inference::ModelInferResponse rr;
    first = FromGrpcStatus(client_->stub()->ModelInfer(ctx.get(), r, &rr));
  });
  const std::string kQueued = "kiln_pending_requests{model=\"tiny_queue\",version=\"1\"} 1";
  for (absl::Time deadline = absl::Now() + absl::Seconds(60); absl::Now() < deadline;) {
    if (testing::HttpGet(kilnd_->metrics_port(), "/metrics").value_or("").find(kQueued) !=
        std::string::npos)
      break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  absl::Status second = client_->Infer("tiny_queue", Inputs(1, 1)).status();
  EXPECT_EQ(code(second), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.message(), HasSubstr("full"));
  // ... and CANCELLED when its client gives up.
  ctx->TryCancel();
  waiter.join();
  EXPECT_EQ(code(first), absl::StatusCode::kCancelled);
  // FAILED_PRECONDITION: repository control needs explicit mode.
  EXPECT_EQ(code(client_->LoadModel("simple")), absl::StatusCode::kFailedPrecondition);

  // The server saw each failure (the cancellation too) and still serves right.
  std::string metrics;
  for (absl::Time deadline = absl::Now() + absl::Seconds(60); absl::Now() < deadline;) {
    metrics = testing::HttpGet(kilnd_->metrics_port(), "/metrics").value_or("");
    if (metrics.find("reason=\"cancelled\"") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(metrics, HasSubstr("kiln_inference_requests_failure_total{model=\"tiny_queue\","
                                 "reason=\"cancelled\",version=\"1\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("reason=\"invalid_argument\""));
  auto good = Inputs(2, 3);
  auto out = client_->Infer("simple", good);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectSimpleOutputs(good, *out);
  EXPECT_TRUE(kilnd_->Running());
}

TEST(E2eAuthTest, BearerTokenAndTls) {
  std::string dir = TempDir("tls");
  std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  int rc = Shell(absl::StrCat(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout ", key, " -out ", cert,
      " >/dev/null 2>&1"));
  ASSERT_EQ(rc, 0) << "openssl could not make a test certificate";
  auto repo = MakeRepo("auth_repo", {});
  ASSERT_TRUE(repo.ok());
  // --http-port=-1: HTTPS on the REST port is e2e_http_test's.
  auto p = KilnProcess::Start(kKilnd, {"--model-repository=" + *repo, "--auth-token=t0ken",
                                       "--tls-cert=" + cert, "--tls-key=" + key,
                                       "--http-port=-1"});
  ASSERT_TRUE(p.ok()) << p.status();
  ClientOptions o;
  o.address = (*p)->address();
  o.tls = true;
  o.ca_cert_file = cert;
  o.tls_server_name = "localhost";
  o.timeout = absl::Seconds(10);
  auto anon = *KilnClient::Connect(o);
  EXPECT_EQ(anon->ServerLive().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(*anon->Health(), "SERVING");
  o.auth_token = "t0ken";
  auto authed = *KilnClient::Connect(o);
  auto in = Inputs(1, 2);
  auto out = authed->Infer("simple", in);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectSimpleOutputs(in, *out);
  {
    ClientOptions plain;
    plain.address = (*p)->address();
    plain.auth_token = "t0ken";
    plain.timeout = absl::Seconds(1);
    EXPECT_FALSE((*KilnClient::Connect(plain))->ServerLive().ok());  // TLS only
  }
  (*p)->Signal(SIGTERM);
  EXPECT_EQ(*(*p)->Wait(absl::Seconds(30)), 0);
}

}  // namespace
}  // namespace kiln::e2e

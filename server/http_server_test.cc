// The HTTP/REST port's own parts: routing, health without auth, bearer
// auth, the body limit (413 before reading), 404 / 405, keep-alive, a bind
// failure, and HTTPS. (Everything that needs models is in tests/e2e.)
#include "server/http_server.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/testing/http_get.h"
#include "third_party/civetweb_tls/test_tls.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(HttpRouteTest, Routes) {
  struct Case {
    const char* method;
    const char* path;
    const char* op;
    const char* model;
    const char* version;
    int status;
  } cases[] = {
      {"GET", "/v2", "ServerMetadata", "", "", 0},
      {"GET", "/v2/", "ServerMetadata", "", "", 0},
      {"GET", "/v2/health/live", "ServerLive", "", "", 0},
      {"GET", "/v2/health/ready", "ServerReady", "", "", 0},
      {"GET", "/v2/models/stats", "ModelStatistics", "", "", 0},
      {"GET", "/v2/models/m", "ModelMetadata", "m", "", 0},
      {"GET", "/v2/models/m/versions/3", "ModelMetadata", "m", "3", 0},
      {"GET", "/v2/models/m/ready", "ModelReady", "m", "", 0},
      {"GET", "/v2/models/m/versions/3/ready", "ModelReady", "m", "3", 0},
      {"GET", "/v2/models/m/config", "ModelConfig", "m", "", 0},
      {"GET", "/v2/models/m/versions/2/stats", "ModelStatistics", "m", "2", 0},
      {"POST", "/v2/models/m/infer", "ModelInfer", "m", "", 0},
      {"POST", "/v2/models/m/versions/1/infer", "ModelInfer", "m", "1", 0},
      {"POST", "/v2/repository/index", "RepositoryIndex", "", "", 0},
      {"POST", "/v2/repository/models/m/load", "RepositoryModelLoad", "m", "", 0},
      {"POST", "/v2/repository/models/m/unload", "RepositoryModelUnload", "m", "", 0},
      {"GET", "/v2/models/m/infer", "", "", "", 405},
      {"POST", "/v2/health/live", "", "", "", 405},
      {"DELETE", "/v2/models/m", "", "", "", 405},
      {"GET", "/v2/repository/index", "", "", "", 405},
      {"GET", "/", "", "", "", 404},
      {"GET", "/v1/models/m", "", "", "", 404},
      {"GET", "/v2/nope", "", "", "", 404},
      {"GET", "/v2/models/m/versions/1/ready/x", "", "", "", 404},
      {"POST", "/v2/repository/models/m/reload", "", "", "", 404},
  };
  for (const Case& c : cases) {
    HttpRoute r = RouteOf(c.method, c.path);
    EXPECT_EQ(r.op, c.op) << c.method << " " << c.path;
    EXPECT_EQ(r.http_status, c.status) << c.method << " " << c.path;
    if (c.status == 0) {
      EXPECT_EQ(r.model, c.model) << c.path;
      EXPECT_EQ(r.version, c.version) << c.path;
    }
  }
  EXPECT_STREQ(RouteOf("PUT", "/v2/models/m/infer").allow, "POST");
}

TEST(HttpRouteTest, SharedMemoryPaths) {
  struct Case {
    const char* method;
    const char* path;
    const char* op;
    const char* region;
    int status;
  };
  const Case cases[] = {
      {"GET", "/v2/systemsharedmemory/status", "SystemSharedMemoryStatus", "", 0},
      {"POST", "/v2/systemsharedmemory/status", "SystemSharedMemoryStatus", "", 0},
      {"GET", "/v2/systemsharedmemory/region/r1/status", "SystemSharedMemoryStatus", "r1", 0},
      {"POST", "/v2/systemsharedmemory/region/r1/register", "SystemSharedMemoryRegister", "r1", 0},
      {"POST", "/v2/systemsharedmemory/unregister", "SystemSharedMemoryUnregister", "", 0},
      {"POST", "/v2/systemsharedmemory/region/r1/unregister", "SystemSharedMemoryUnregister",
       "r1", 0},
      {"GET", "/v2/systemsharedmemory/region/r1/register", "", "", 405},
      {"DELETE", "/v2/systemsharedmemory/status", "", "", 405},
      {"POST", "/v2/systemsharedmemory/register", "", "", 404},
      {"GET", "/v2/systemsharedmemory/region/status", "", "", 404},
      {"GET", "/v2/systemsharedmemory/region/r1/x/status", "", "", 404},
      {"GET", "/v2/cudasharedmemory/status", "", "", 404},
  };
  for (const Case& c : cases) {
    HttpRoute r = RouteOf(c.method, c.path);
    EXPECT_EQ(r.op, c.op) << c.method << " " << c.path;
    EXPECT_EQ(r.http_status, c.status) << c.method << " " << c.path;
    if (c.status == 0) EXPECT_EQ(r.region, c.region) << c.path;
  }
}

// Sends `request` on a new connection; returns the whole response.
std::string Exchange(int port, const std::string& request) {
  return kiln::testing::HttpExchange(port, request);
}

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(const std::string& token, int64_t max_body = 1 << 20, int64_t max_json = 1 << 20) {
    InferenceCore::Options co;
    co.auth_token = token;
    core_ = std::make_unique<InferenceCore>(nullptr, nullptr, &state_, co);
    HttpServerOptions o;
    o.address = "127.0.0.1";
    o.port = 0;
    o.num_threads = 2;
    o.max_body_bytes = max_body;
    o.max_json_bytes = max_json;
    auto s = HttpServer::Start(o, core_.get(), nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }

  ServerState state_;
  std::unique_ptr<InferenceCore> core_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, HealthAuthLimitsAndErrors) {
  Start("t0ken", 1000);
  const int port = server_->port();
  ASSERT_GT(port, 0);
  const std::string close = "Connection: close\r\n\r\n";
  // Health is open; not ready yet is 400, as Triton.
  EXPECT_THAT(Exchange(port, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n" + close),
              StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(Exchange(port, "GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n" + close),
              StartsWith("HTTP/1.1 400"));
  state_.ready = true;
  EXPECT_THAT(Exchange(port, "GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n" + close),
              StartsWith("HTTP/1.1 200"));
  // Everything else needs the token.
  std::string denied = Exchange(port, "GET /v2 HTTP/1.1\r\nHost: x\r\n" + close);
  EXPECT_THAT(denied, StartsWith("HTTP/1.1 401"));
  EXPECT_THAT(denied, HasSubstr("WWW-Authenticate: Bearer"));
  EXPECT_THAT(denied, HasSubstr(R"({"error":"missing or wrong bearer token)"));
  EXPECT_THAT(Exchange(port, "GET /v2 HTTP/1.1\r\nAuthorization: Bearer nope\r\n" + close),
              StartsWith("HTTP/1.1 401"));
  std::string meta = Exchange(port, "GET /v2 HTTP/1.1\r\nAuthorization: Bearer t0ken\r\n" + close);
  EXPECT_THAT(meta, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(meta, HasSubstr("Content-Type: application/json"));
  EXPECT_THAT(meta, HasSubstr(R"("name":"kiln")"));
  EXPECT_THAT(meta, HasSubstr(R"("binary_tensor_data")"));
  // 404 / 405 with a JSON error.
  std::string missing = Exchange(port, "GET /nope HTTP/1.1\r\n" + close);
  EXPECT_THAT(missing, StartsWith("HTTP/1.1 404"));
  EXPECT_THAT(missing, HasSubstr(R"({"error":"no such endpoint: /nope"})"));
  std::string wrong = Exchange(port, "PUT /v2/health/live HTTP/1.1\r\n" + close);
  EXPECT_THAT(wrong, StartsWith("HTTP/1.1 405"));
  EXPECT_THAT(wrong, HasSubstr("Allow: GET"));
  // A body above the limit is refused by its Content-Length, unread.
  std::string big = Exchange(port,
                             "POST /v2/repository/index HTTP/1.1\r\nAuthorization: Bearer t0ken\r\n"
                             "Content-Length: 1000000000\r\n" +
                                 close);
  EXPECT_THAT(big, StartsWith("HTTP/1.1 413"));
  EXPECT_THAT(big, HasSubstr("above --http-max-body-bytes 1000"));
  // Keep-alive: two requests on one connection.
  std::string two = Exchange(port,
                             "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
                             "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n" +
                                 close);
  size_t first = two.find("HTTP/1.1 200");
  ASSERT_NE(first, std::string::npos) << two;
  EXPECT_NE(two.find("HTTP/1.1 200", first + 1), std::string::npos) << two;
}

// The JSON part of a request has its own, smaller bound (parsed JSON takes
// many times its size): a JSON body, or an infer header before binary data,
// above it is refused with 413 before it is parsed.
TEST_F(HttpServerTest, JsonPartHasItsOwnLimit) {
  Start("", 1 << 20, 100);
  const int port = server_->port();
  const std::string json(200, ' ');
  std::string index = Exchange(port, "POST /v2/repository/index HTTP/1.1\r\nContent-Length: 200\r\n"
                                     "Connection: close\r\n\r\n" + json);
  EXPECT_THAT(index, StartsWith("HTTP/1.1 413"));
  EXPECT_THAT(index, HasSubstr("above --http-max-json-bytes 100"));
  std::string infer = Exchange(port,
                               "POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: 200\r\n"
                               "Inference-Header-Content-Length: 150\r\n"
                               "Connection: close\r\n\r\n" + json);
  EXPECT_THAT(infer, StartsWith("HTTP/1.1 413"));
  EXPECT_THAT(infer, HasSubstr("send large tensors as binary data"));
  // Under the bound the body is parsed (and this one is not JSON).
  std::string small = Exchange(port, "POST /v2/repository/index HTTP/1.1\r\nContent-Length: 5\r\n"
                                     "Connection: close\r\n\r\n{nope");
  EXPECT_THAT(small, StartsWith("HTTP/1.1 400"));
}

TEST_F(HttpServerTest, PortInUseAndBadTlsOptions) {
  Start("");
  HttpServerOptions o;
  o.address = "127.0.0.1";
  o.port = server_->port();
  auto again = HttpServer::Start(o, core_.get(), nullptr);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  o.port = 0;
  testing::TestCert cert = testing::MakeSelfSignedCert();
  o.tls_cert_pem = cert.cert_pem;
  EXPECT_EQ(HttpServer::Start(o, core_.get(), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);  // a certificate without a key
  o.tls_key_pem = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
  auto bad = HttpServer::Start(o, core_.get(), nullptr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--tls-key"));
}

// HTTPS with OpenSSL 3 (Debian's civetweb is built for 1.1 and crashed on
// the first TLS connection before //third_party/civetweb_tls): requests
// are answered over TLS, the certificate verifies for "localhost", and a
// plain-text request on the port gets no HTTP answer.
TEST_F(HttpServerTest, HttpsServesAndRefusesPlainText) {
  InferenceCore::Options co;
  co.auth_token = "t0ken";
  core_ = std::make_unique<InferenceCore>(nullptr, nullptr, &state_, co);
  testing::TestCert cert = testing::MakeSelfSignedCert();
  ASSERT_FALSE(cert.cert_pem.empty());
  HttpServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  o.num_threads = 2;
  o.tls_cert_pem = cert.cert_pem;
  o.tls_key_pem = cert.key_pem;
  auto s = HttpServer::Start(o, core_.get(), nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  server_ = *std::move(s);
  EXPECT_TRUE(server_->tls());
  const int port = server_->port();
  const std::string close = "Connection: close\r\n\r\n";
  for (int i = 0; i < 3; ++i) {  // more than one connection, each a full handshake
    EXPECT_THAT(
        testing::HttpsExchange(port, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n" + close,
                               cert.cert_pem),
        StartsWith("HTTP/1.1 200"));
  }
  // Auth applies as on plain HTTP.
  EXPECT_THAT(testing::HttpsExchange(port, "GET /v2 HTTP/1.1\r\nHost: x\r\n" + close,
                                     cert.cert_pem),
              StartsWith("HTTP/1.1 401"));
  // Another CA does not verify it.
  testing::TestCert other = testing::MakeSelfSignedCert();
  EXPECT_THAT(testing::HttpsExchange(port, "GET /v2/health/live HTTP/1.1\r\n" + close,
                                     other.cert_pem),
              StartsWith("tls failed"));
  // Plain text on the TLS port: no HTTP response.
  std::string plain = Exchange(port, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n" + close);
  EXPECT_THAT(plain, ::testing::Not(HasSubstr("HTTP/1.1 200")));
  // And it still serves TLS afterwards.
  EXPECT_THAT(
      testing::HttpsExchange(port, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n" + close,
                             cert.cert_pem),
      StartsWith("HTTP/1.1 200"));
}

}  // namespace
}  // namespace kiln

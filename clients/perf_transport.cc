#include "clients/perf_transport.h"

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace kiln {
namespace {

// ---- gRPC: one KilnClient (one channel) shared by every worker ----

class GrpcWorker : public PerfWorker {
 public:
  GrpcWorker(KilnClient* client, inference::ModelInferRequest request)
      : client_(client), request_(std::move(request)) {}
  absl::Status Infer() override { return client_->InferRaw(request_, &response_); }

 private:
  KilnClient* client_;
  const inference::ModelInferRequest request_;
  inference::ModelInferResponse response_;
};

class GrpcTransport : public PerfTransport {
 public:
  explicit GrpcTransport(std::unique_ptr<KilnClient> client) : client_(std::move(client)) {}
  Protocol protocol() const override { return Protocol::kGrpc; }
  absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(
      const std::string& model, const std::string& version) override {
    return client_->ModelMetadata(model, version);
  }
  absl::StatusOr<inference::ModelConfigResponse> ModelConfig(const std::string& model,
                                                             const std::string& version) override {
    return client_->ModelConfig(model, version);
  }
  absl::StatusOr<inference::ModelStatisticsResponse> Statistics(
      const std::string& model, const std::string& version) override {
    return client_->ModelStatistics(model, version);
  }
  absl::StatusOr<std::unique_ptr<PerfWorker>> NewWorker(
      const inference::ModelInferRequest& request) override {
    return std::unique_ptr<PerfWorker>(new GrpcWorker(client_.get(), request));
  }
  absl::StatusOr<inference::ModelInferResponse> InferOnce(
      const inference::ModelInferRequest& request) override {
    inference::ModelInferResponse response;
    if (absl::Status s = client_->InferRaw(request, &response); !s.ok()) return s;
    return response;
  }
  absl::Status RegisterSystemSharedMemory(const std::string& name, const std::string& key,
                                          uint64_t byte_size, uint64_t offset) override {
    return client_->RegisterSystemSharedMemory(name, key, byte_size, offset);
  }
  absl::Status UnregisterSystemSharedMemory(const std::string& name) override {
    return client_->UnregisterSystemSharedMemory(name);
  }

 private:
  std::unique_ptr<KilnClient> client_;  // thread-safe
};

// ---- HTTP: one connection per worker, one more for the control calls ----

class HttpWorker : public PerfWorker {
 public:
  HttpWorker(std::unique_ptr<HttpClient> http, HttpInferBody body)
      : http_(std::move(http)), body_(std::move(body)) {}
  absl::Status Infer() override { return http_->Infer(body_, &response_); }

 private:
  std::unique_ptr<HttpClient> http_;
  const HttpInferBody body_;
  inference::ModelInferResponse response_;
};

class HttpTransport : public PerfTransport {
 public:
  HttpTransport(HttpClientOptions options, std::unique_ptr<HttpClient> control)
      : options_(std::move(options)), control_(std::move(control)) {}
  Protocol protocol() const override { return Protocol::kHttp; }
  absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(
      const std::string& model, const std::string& version) override {
    absl::MutexLock l(&mu_);
    return control_->ModelMetadata(model, version);
  }
  absl::StatusOr<inference::ModelConfigResponse> ModelConfig(const std::string& model,
                                                             const std::string& version) override {
    absl::MutexLock l(&mu_);
    return control_->ModelConfig(model, version);
  }
  absl::StatusOr<inference::ModelStatisticsResponse> Statistics(
      const std::string& model, const std::string& version) override {
    absl::MutexLock l(&mu_);
    return control_->ModelStatistics(model, version);
  }
  absl::StatusOr<std::unique_ptr<PerfWorker>> NewWorker(
      const inference::ModelInferRequest& request) override {
    auto body = EncodeBinaryInferRequest(request);
    if (!body.ok()) return body.status();
    auto http = HttpClient::Create(options_);
    if (!http.ok()) return http.status();
    return std::unique_ptr<PerfWorker>(new HttpWorker(std::move(*http), std::move(*body)));
  }
  absl::StatusOr<inference::ModelInferResponse> InferOnce(
      const inference::ModelInferRequest& request) override {
    auto body = EncodeBinaryInferRequest(request);
    if (!body.ok()) return body.status();
    inference::ModelInferResponse response;
    absl::MutexLock l(&mu_);
    if (absl::Status s = control_->Infer(*body, &response); !s.ok()) return s;
    return response;
  }
  absl::Status RegisterSystemSharedMemory(const std::string& name, const std::string& key,
                                          uint64_t byte_size, uint64_t offset) override {
    absl::MutexLock l(&mu_);
    return control_->RegisterSystemSharedMemory(name, key, byte_size, offset);
  }
  absl::Status UnregisterSystemSharedMemory(const std::string& name) override {
    absl::MutexLock l(&mu_);
    return control_->UnregisterSystemSharedMemory(name);
  }

 private:
  const HttpClientOptions options_;
  absl::Mutex mu_;
  std::unique_ptr<HttpClient> control_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<inference::ModelInferResponse> PerfTransport::InferOnce(
    const inference::ModelInferRequest&) {
  return absl::UnimplementedError("this perf transport cannot send a single request");
}

absl::Status PerfTransport::RegisterSystemSharedMemory(const std::string&, const std::string&,
                                                       uint64_t, uint64_t) {
  return absl::UnimplementedError("this perf transport has no shared memory");
}

absl::Status PerfTransport::UnregisterSystemSharedMemory(const std::string&) {
  return absl::UnimplementedError("this perf transport has no shared memory");
}

absl::StatusOr<Protocol> ParseProtocol(const std::string& text) {
  if (text == "grpc") return Protocol::kGrpc;
  if (text == "http") return Protocol::kHttp;
  return absl::InvalidArgumentError("--protocol: '" + text + "' (use grpc or http)");
}

const char* ProtocolName(Protocol p) { return p == Protocol::kHttp ? "http" : "grpc"; }

const char* DefaultAddress(Protocol p) {
  return p == Protocol::kHttp ? "localhost:8000" : "localhost:8001";
}

absl::StatusOr<std::unique_ptr<PerfTransport>> NewPerfTransport(const PerfTransportOptions& o) {
  if (o.protocol == Protocol::kGrpc) {
    auto client = KilnClient::Connect(o.client);
    if (!client.ok()) return client.status();
    return std::unique_ptr<PerfTransport>(new GrpcTransport(std::move(*client)));
  }
  if (!o.client.tls_server_name.empty())
    return absl::InvalidArgumentError("--tls-server-name applies to gRPC only");
  HttpClientOptions h;
  h.url = o.client.address;
  h.tls = o.client.tls;
  h.ca_cert_file = o.client.ca_cert_file;
  h.auth_token = o.client.auth_token;
  h.timeout = o.client.timeout;
  h.max_response_bytes = o.client.max_message_bytes;
  auto control = HttpClient::Create(h);
  if (!control.ok()) return control.status();
  return std::unique_ptr<PerfTransport>(new HttpTransport(std::move(h), std::move(*control)));
}

}  // namespace kiln

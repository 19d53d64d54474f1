// KilnClient: a C++ client for kilnd (or any KServe v2 / Triton gRPC
// server) over the generated stubs of proto/grpc_service.proto.
//
//   ASSIGN_OR_RETURN(auto client, KilnClient::Connect({.address = "localhost:8001"}));
//   ClientTensor x{"INPUT0", "FP32", {1, 16}, bytes};
//   ASSIGN_OR_RETURN(std::vector<ClientTensor> outs, client->Infer("simple", {x, y}));
//
// Every call returns absl::Status(Or) with the server's gRPC code and
// message. Calls use ClientOptions::timeout as their deadline.
//
// Thread safety: a KilnClient is thread-safe (one channel, shared stubs);
// many threads may call it at once.
#ifndef KILN_CLIENTS_CLIENT_H_
#define KILN_CLIENTS_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/grpc_service.grpc.pb.h"
#include "proto/health.grpc.pb.h"

namespace kiln {

struct ClientOptions {
  std::string address = "localhost:8001";
  bool tls = false;
  std::string ca_cert_file;  // PEM roots for TLS (empty: system roots)
  std::string tls_server_name;  // override the name checked in the certificate
  std::string auth_token;    // sent as "authorization: Bearer <token>"
  absl::Duration timeout = absl::Seconds(60);
  int max_message_bytes = 256 << 20;
};

// A tensor as it travels: KServe datatype name, full shape, raw bytes
// (row-major, little-endian).
struct ClientTensor {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;
  std::string data;
};

struct InferOptions {
  std::string version;               // empty: the latest
  std::string id;
  int64_t priority = 0;              // 0: the model's default
  int64_t timeout_us = 0;            // server-side queue timeout, 0: none
  std::vector<std::string> outputs;  // empty: all
};

class KilnClient {
 public:
  static absl::StatusOr<std::unique_ptr<KilnClient>> Connect(const ClientOptions& options);

  absl::StatusOr<bool> ServerLive();
  absl::StatusOr<bool> ServerReady();
  absl::StatusOr<bool> ModelReady(const std::string& model, const std::string& version = "");
  // grpc.health.v1 Check: "SERVING", "NOT_SERVING", ...
  absl::StatusOr<std::string> Health(const std::string& service = "");
  absl::StatusOr<inference::ServerMetadataResponse> ServerMetadata();
  absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(const std::string& model,
                                                                 const std::string& version = "");
  absl::StatusOr<inference::ModelConfigResponse> ModelConfig(const std::string& model,
                                                             const std::string& version = "");
  absl::StatusOr<inference::ModelStatisticsResponse> ModelStatistics(
      const std::string& model = "", const std::string& version = "");
  absl::StatusOr<inference::RepositoryIndexResponse> RepositoryIndex(bool ready_only = false);
  absl::Status LoadModel(const std::string& model);
  absl::Status UnloadModel(const std::string& model);

  absl::StatusOr<std::vector<ClientTensor>> Infer(const std::string& model,
                                                  const std::vector<ClientTensor>& inputs,
                                                  const InferOptions& options = {});
  // One ModelInfer call with a prepared request (no conversions; for load
  // generation).
  absl::Status InferRaw(const inference::ModelInferRequest& request,
                        inference::ModelInferResponse* response);

  inference::GRPCInferenceService::Stub* stub() { return stub_.get(); }
  // A context with the deadline and auth metadata of this client.
  std::unique_ptr<grpc::ClientContext> NewContext() const;

 private:
  KilnClient() = default;
  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

absl::Status FromGrpcStatus(const grpc::Status& s);

// Builds a ModelInferRequest with raw_input_contents.
inference::ModelInferRequest BuildInferRequest(const std::string& model,
                                               const std::vector<ClientTensor>& inputs,
                                               const InferOptions& options);
// Reads the outputs of a response (raw_output_contents or typed contents).
absl::StatusOr<std::vector<ClientTensor>> ParseInferResponse(
    const inference::ModelInferResponse& response);

// Bytes per element of a KServe datatype (0 for BYTES / unknown).
int DatatypeSize(const std::string& datatype);

}  // namespace kiln

#endif  // KILN_CLIENTS_CLIENT_H_

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
// System shared memory (Triton's extension; kilnd needs --shm-allow):
//
//   ASSIGN_OR_RETURN(auto shm, ClientShm::Create("/kiln_in", 4096));  // creates + maps
//   ASSIGN_OR_RETURN(auto client, KilnClient::Connect({}));
//   RETURN_IF_ERROR(client->RegisterSystemSharedMemory("in", shm->key(), shm->size()));
//   inference::ModelInferRequest req = BuildInferRequest("simple", inputs, {});
//   SetInputSharedMemory(&req, "INPUT0", "in", 64);           // bytes 0..64 of region "in"
//   SetOutputSharedMemory(&req, "OUTPUT0", "in", 64, 128);    // written to bytes 128..192
//   RETURN_IF_ERROR(client->InferRaw(req, &resp));            // OUTPUT0 is in shm->data() + 128
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

  // System shared memory: register [offset, offset + byte_size) of the POSIX
  // shm object `key` ("/name") as region `name`; unregister / status of one
  // region or (name empty) all.
  absl::Status RegisterSystemSharedMemory(const std::string& name, const std::string& key,
                                          uint64_t byte_size, uint64_t offset = 0);
  absl::Status UnregisterSystemSharedMemory(const std::string& name = "");
  absl::StatusOr<inference::SystemSharedMemoryStatusResponse> SystemSharedMemoryStatus(
      const std::string& name = "");

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

// Makes input `input` of `request` read [offset, offset + byte_size) of the
// registered region `region` instead of carrying data: sets the
// shared-memory parameters and drops its contents and raw_input_contents
// entry (the other inputs keep theirs, as Triton's clients send them).
// NOT_FOUND if the request has no such input.
absl::Status SetInputSharedMemory(inference::ModelInferRequest* request,
                                  const std::string& input, const std::string& region,
                                  uint64_t byte_size, uint64_t offset = 0);
// Asks for output `output` in [offset, offset + byte_size) of `region`
// (adding it to the requested outputs if needed). The response then holds
// its name, datatype and shape, and its bytes are in the region.
void SetOutputSharedMemory(inference::ModelInferRequest* request, const std::string& output,
                           const std::string& region, uint64_t byte_size, uint64_t offset = 0);

// A POSIX shared-memory object owned by this process (shm_open + ftruncate
// + mmap), for use as a region. Destruction unmaps and unlinks it.
// Thread safety: the object is immutable; writes to its bytes are the
// caller's to order (the server reads inputs during the infer call and
// writes outputs before the response is sent).
class ClientShm {
 public:
  // Creates `key` ("/name") with `byte_size` bytes (ALREADY_EXISTS if it
  // exists).
  static absl::StatusOr<std::unique_ptr<ClientShm>> Create(const std::string& key,
                                                           uint64_t byte_size);
  ~ClientShm();
  ClientShm(const ClientShm&) = delete;
  ClientShm& operator=(const ClientShm&) = delete;

  const std::string& key() const { return key_; }
  uint64_t size() const { return size_; }
  char* data() const { return data_; }

 private:
  ClientShm() = default;
  std::string key_;
  uint64_t size_ = 0;
  char* data_ = nullptr;
};

}  // namespace kiln

#endif  // KILN_CLIENTS_CLIENT_H_

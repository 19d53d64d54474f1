// PerfTransport: what `kiln perf` needs from a protocol, so the measurement
// loop (perf.h) does not know which one it drives. A transport reads the
// model's metadata, config and statistics and makes workers; a worker sends
// one prepared infer request again and again (one worker per concurrent
// stream: over HTTP each has its own keep-alive connection).
//
//   grpc  KilnClient (clients/client.h): ModelInfer on one shared channel
//   http  HttpClient (clients/http_client.h): KServe v2 REST with binary
//         tensor data; GET v2/models/M[/config|/stats]
//
// A new transport implements these two classes and adds a Protocol value;
// RunPerf does not change. Shared memory (perf_shm.h) is not a protocol but
// a PerfTransport that wraps one: its workers name regions instead of
// carrying tensors.
//
// Thread safety: a PerfTransport is thread-safe (its methods may be called
// from any thread); a PerfWorker is used by one thread at a time.
#ifndef KILN_CLIENTS_PERF_TRANSPORT_H_
#define KILN_CLIENTS_PERF_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "clients/client.h"
#include "clients/http_client.h"
#include "proto/grpc_service.pb.h"

namespace kiln {

enum class Protocol { kGrpc, kHttp };

// "grpc" / "http" (INVALID_ARGUMENT naming the choices otherwise).
absl::StatusOr<Protocol> ParseProtocol(const std::string& text);
const char* ProtocolName(Protocol p);
// Where the server listens by default: localhost:8001 (gRPC), :8000 (HTTP).
const char* DefaultAddress(Protocol p);

class PerfWorker {
 public:
  virtual ~PerfWorker() = default;
  // Sends the worker's request once and waits for the answer.
  virtual absl::Status Infer() = 0;
};

class PerfTransport {
 public:
  virtual ~PerfTransport() = default;
  virtual Protocol protocol() const = 0;
  virtual absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(
      const std::string& model, const std::string& version) = 0;
  virtual absl::StatusOr<inference::ModelConfigResponse> ModelConfig(
      const std::string& model, const std::string& version) = 0;
  virtual absl::StatusOr<inference::ModelStatisticsResponse> Statistics(
      const std::string& model, const std::string& version) = 0;
  // A worker that sends `request` (encoded once, here).
  virtual absl::StatusOr<std::unique_ptr<PerfWorker>> NewWorker(
      const inference::ModelInferRequest& request) = 0;
  // One infer call outside the workers (e.g. a probe for output sizes).
  virtual absl::StatusOr<inference::ModelInferResponse> InferOnce(
      const inference::ModelInferRequest& request);
  // System shared memory over this protocol (`kiln perf --shared-memory`,
  // perf_shm.h). The defaults answer UNIMPLEMENTED.
  virtual absl::Status RegisterSystemSharedMemory(const std::string& name,
                                                  const std::string& key, uint64_t byte_size,
                                                  uint64_t offset);
  virtual absl::Status UnregisterSystemSharedMemory(const std::string& name);
};

struct PerfTransportOptions {
  Protocol protocol = Protocol::kGrpc;
  // address = host:port (gRPC) or host:port / http[s]://host:port (HTTP);
  // tls, ca_cert_file, auth_token, timeout, max_message_bytes apply to both,
  // tls_server_name to gRPC only.
  ClientOptions client;
};

// Connects lazily: errors of the address itself are INVALID_ARGUMENT here,
// an unreachable server shows in the first call.
absl::StatusOr<std::unique_ptr<PerfTransport>> NewPerfTransport(const PerfTransportOptions& options);

}  // namespace kiln

#endif  // KILN_CLIENTS_PERF_TRANSPORT_H_

// InferenceService: kiln's gRPC handlers for inference.GRPCInferenceService
// (the KServe v2 API plus Triton's extensions). Handlers stay thin: check
// auth, look the model up, decode + validate (infer_codec), enqueue,
// wait, encode, count. Every absl::Status maps to the gRPC code of the same
// number (ToGrpcStatus), so NOT_FOUND / INVALID_ARGUMENT / UNAVAILABLE /
// CANCELLED reach clients as the protocol prescribes.
//
// A unary ModelInfer waits for its request while polling for client
// cancellation; on cancellation the request is marked cancelled (the
// batcher drops it if it has not run) and the handler still waits for its
// completion, so no request outlives the message its data points into.
// ModelStreamInfer reads on the handler thread and writes responses from a
// writer thread in completion order; errors travel in-band. Streams are
// bounded: at most max_streams at once (more are refused with
// RESOURCE_EXHAUSTED), and each reads its next request only while fewer
// than max_stream_inflight of its requests are unanswered (a client that
// does not read its responses is slowed by flow control, not buffered).
// At shutdown a stream answers what it has read and is then cancelled.
//
// Thread safety: thread-safe (gRPC calls handlers concurrently).
#ifndef KILN_SERVER_SERVICE_H_
#define KILN_SERVER_SERVICE_H_

#include <atomic>
#include <string>

#include "grpcpp/grpcpp.h"
#include "proto/grpc_service.grpc.pb.h"
#include "server/infer_codec.h"
#include "server/metrics.h"
#include "server/model_manager.h"

namespace kiln {

inline constexpr char kServerName[] = "kiln";
inline constexpr char kServerVersion[] = "0.1.0";

// Liveness / readiness shared by the service, the health service and main.
struct ServerState {
  std::atomic<bool> ready{false};
  std::atomic<bool> shutting_down{false};
};

// The same code; the message is cut to 4 KiB ("...(N bytes)").
grpc::Status ToGrpcStatus(const absl::Status& s);
// "OK", "NOT_FOUND", ... for a gRPC code.
std::string GrpcCodeName(grpc::StatusCode code);
// The failure reason label of a status: its code name in lower case.
std::string ReasonOf(const absl::Status& s);

class InferenceService final : public inference::GRPCInferenceService::Service {
 public:
  struct Options {
    CodecLimits limits;
    std::string auth_token;  // empty: no authentication
    int max_streams = 64;          // concurrent ModelStreamInfer calls
    int max_stream_inflight = 64;  // unanswered requests per stream
  };
  // All pointers must outlive the service; `metrics` may be null.
  InferenceService(ModelManager* manager, Metrics* metrics, ServerState* state, Options options);

  // Handlers currently running (for a graceful shutdown).
  int active_calls() const { return active_.load(); }

  grpc::Status ServerLive(grpc::ServerContext* ctx, const inference::ServerLiveRequest* req,
                          inference::ServerLiveResponse* resp) override;
  grpc::Status ServerReady(grpc::ServerContext* ctx, const inference::ServerReadyRequest* req,
                           inference::ServerReadyResponse* resp) override;
  grpc::Status ModelReady(grpc::ServerContext* ctx, const inference::ModelReadyRequest* req,
                          inference::ModelReadyResponse* resp) override;
  grpc::Status ServerMetadata(grpc::ServerContext* ctx,
                              const inference::ServerMetadataRequest* req,
                              inference::ServerMetadataResponse* resp) override;
  grpc::Status ModelMetadata(grpc::ServerContext* ctx, const inference::ModelMetadataRequest* req,
                             inference::ModelMetadataResponse* resp) override;
  grpc::Status ModelInfer(grpc::ServerContext* ctx, const inference::ModelInferRequest* req,
                          inference::ModelInferResponse* resp) override;
  grpc::Status ModelStreamInfer(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>*
          stream) override;
  grpc::Status ModelConfig(grpc::ServerContext* ctx, const inference::ModelConfigRequest* req,
                           inference::ModelConfigResponse* resp) override;
  grpc::Status ModelStatistics(grpc::ServerContext* ctx,
                               const inference::ModelStatisticsRequest* req,
                               inference::ModelStatisticsResponse* resp) override;
  grpc::Status RepositoryIndex(grpc::ServerContext* ctx,
                               const inference::RepositoryIndexRequest* req,
                               inference::RepositoryIndexResponse* resp) override;
  grpc::Status RepositoryModelLoad(grpc::ServerContext* ctx,
                                   const inference::RepositoryModelLoadRequest* req,
                                   inference::RepositoryModelLoadResponse* resp) override;
  grpc::Status RepositoryModelUnload(grpc::ServerContext* ctx,
                                     const inference::RepositoryModelUnloadRequest* req,
                                     inference::RepositoryModelUnloadResponse* resp) override;

 private:
  // Auth check; OK or UNAUTHENTICATED.
  grpc::Status Authorize(grpc::ServerContext* ctx) const;
  // Counts the RPC and returns `s`.
  grpc::Status Done(const char* method, grpc::Status s);
  // Decodes, validates and enqueues `req`; on success the request will be
  // completed through `callback`. Returns the model for accounting.
  absl::Status Submit(const inference::ModelInferRequest& req, InferRequest::Callback callback,
                      std::shared_ptr<LoadedModel>* model, RequestPtr* request);
  // Success / failure accounting of one finished inference request.
  void Account(LoadedModel* model, absl::Time start, const absl::StatusOr<InferResult>& r);

  // Counts a handler as active for its lifetime.
  struct ActiveCall {
    explicit ActiveCall(std::atomic<int>* n) : n_(n) { ++*n_; }
    ~ActiveCall() { --*n_; }
    std::atomic<int>* n_;
  };

  std::atomic<int> active_{0};
  std::atomic<int> streams_{0};
  ModelManager* const manager_;
  Metrics* const metrics_;
  ServerState* const state_;
  const Options options_;
};

}  // namespace kiln

#endif  // KILN_SERVER_SERVICE_H_

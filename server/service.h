// InferenceService: kiln's gRPC handlers for inference.GRPCInferenceService
// (the KServe v2 API plus Triton's extensions), a thin adapter over
// InferenceCore (inference_core.h), which the HTTP/REST port shares: each
// handler reads the `authorization` metadata, calls the core and counts the
// RPC. Every absl::Status maps to the gRPC code of the same number
// (ToGrpcStatus), so NOT_FOUND / INVALID_ARGUMENT / UNAVAILABLE /
// CANCELLED reach clients as the protocol prescribes.
//
// A unary ModelInfer passes the core gRPC's cancellation flag
// (ServerContext::IsCancelled) to poll.
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
#include "server/inference_core.h"
#include "server/metrics.h"
#include "server/status_codes.h"

namespace kiln {

// The same code; the message is cut to 4 KiB ("...(N bytes)").
grpc::Status ToGrpcStatus(const absl::Status& s);
// "OK", "NOT_FOUND", ... for a gRPC code (status_codes.h's table).
std::string GrpcCodeName(grpc::StatusCode code);

class InferenceService final : public inference::GRPCInferenceService::Service {
 public:
  struct Options {
    int max_streams = 64;          // concurrent ModelStreamInfer calls
    int max_stream_inflight = 64;  // unanswered requests per stream
  };
  // `core` must outlive the service; `metrics` may be null.
  InferenceService(InferenceCore* core, Metrics* metrics, Options options);

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
  grpc::Status SystemSharedMemoryStatus(grpc::ServerContext* ctx,
                                        const inference::SystemSharedMemoryStatusRequest* req,
                                        inference::SystemSharedMemoryStatusResponse* resp) override;
  grpc::Status SystemSharedMemoryRegister(
      grpc::ServerContext* ctx, const inference::SystemSharedMemoryRegisterRequest* req,
      inference::SystemSharedMemoryRegisterResponse* resp) override;
  grpc::Status SystemSharedMemoryUnregister(
      grpc::ServerContext* ctx, const inference::SystemSharedMemoryUnregisterRequest* req,
      inference::SystemSharedMemoryUnregisterResponse* resp) override;

 private:
  // Auth check of the call's `authorization` metadata.
  absl::Status Authorize(grpc::ServerContext* ctx) const;
  // Counts the RPC and returns `s` as a grpc::Status.
  grpc::Status Done(const char* method, const absl::Status& s);

  std::atomic<int> streams_{0};
  InferenceCore* const core_;
  Metrics* const metrics_;
  const Options options_;
};

}  // namespace kiln

#endif  // KILN_SERVER_SERVICE_H_

#include "server/service.h"

#include <optional>

#include "absl/strings/string_view.h"

namespace kiln {

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), ErrorMessageOf(s));
}

std::string GrpcCodeName(grpc::StatusCode code) {
  return StatusCodeName(static_cast<absl::StatusCode>(code));
}

InferenceService::InferenceService(InferenceCore* core, Metrics* metrics, Options options)
    : core_(core), metrics_(metrics), options_(options) {}

absl::Status InferenceService::Authorize(grpc::ServerContext* ctx) const {
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  std::optional<absl::string_view> value;
  if (it != md.end()) value = absl::string_view(it->second.data(), it->second.size());
  return core_->Authorize(value);
}

grpc::Status InferenceService::Done(const char* method, const absl::Status& s) {
  if (metrics_) metrics_->CountRpc(method, StatusCodeName(s.code()));
  return ToGrpcStatus(s);
}

grpc::Status InferenceService::ServerLive(grpc::ServerContext* ctx,
                                          const inference::ServerLiveRequest*,
                                          inference::ServerLiveResponse* resp) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ServerLive", a);
  resp->set_live(core_->Live());
  return Done("ServerLive", absl::OkStatus());
}

grpc::Status InferenceService::ServerReady(grpc::ServerContext* ctx,
                                           const inference::ServerReadyRequest*,
                                           inference::ServerReadyResponse* resp) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ServerReady", a);
  resp->set_ready(core_->Ready());
  return Done("ServerReady", absl::OkStatus());
}

grpc::Status InferenceService::ModelReady(grpc::ServerContext* ctx,
                                          const inference::ModelReadyRequest* req,
                                          inference::ModelReadyResponse* resp) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ModelReady", a);
  absl::StatusOr<bool> ready = core_->ModelReady(req->name(), req->version());
  if (!ready.ok()) return Done("ModelReady", ready.status());
  resp->set_ready(*ready);
  return Done("ModelReady", absl::OkStatus());
}

grpc::Status InferenceService::ServerMetadata(grpc::ServerContext* ctx,
                                              const inference::ServerMetadataRequest*,
                                              inference::ServerMetadataResponse* resp) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ServerMetadata", a);
  core_->ServerMetadata(resp);
  return Done("ServerMetadata", absl::OkStatus());
}

grpc::Status InferenceService::ModelMetadata(grpc::ServerContext* ctx,
                                             const inference::ModelMetadataRequest* req,
                                             inference::ModelMetadataResponse* resp) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ModelMetadata", a);
  return Done("ModelMetadata", core_->ModelMetadata(req->name(), req->version(), resp));
}

grpc::Status InferenceService::ModelInfer(grpc::ServerContext* ctx,
                                          const inference::ModelInferRequest* req,
                                          inference::ModelInferResponse* resp) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ModelInfer", a);
  return Done("ModelInfer", core_->Infer(
                                *req, [ctx] { return ctx->IsCancelled(); }, resp));
}

grpc::Status InferenceService::ModelConfig(grpc::ServerContext* ctx,
                                           const inference::ModelConfigRequest* req,
                                           inference::ModelConfigResponse* resp) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ModelConfig", a);
  return Done("ModelConfig", core_->ModelConfig(req->name(), req->version(), resp));
}

grpc::Status InferenceService::ModelStatistics(grpc::ServerContext* ctx,
                                               const inference::ModelStatisticsRequest* req,
                                               inference::ModelStatisticsResponse* resp) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ModelStatistics", a);
  return Done("ModelStatistics", core_->ModelStatistics(req->name(), req->version(), resp));
}

grpc::Status InferenceService::RepositoryIndex(grpc::ServerContext* ctx,
                                               const inference::RepositoryIndexRequest* req,
                                               inference::RepositoryIndexResponse* resp) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("RepositoryIndex", a);
  core_->RepositoryIndex(req->ready(), resp);
  return Done("RepositoryIndex", absl::OkStatus());
}

grpc::Status InferenceService::RepositoryModelLoad(grpc::ServerContext* ctx,
                                                   const inference::RepositoryModelLoadRequest* req,
                                                   inference::RepositoryModelLoadResponse*) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("RepositoryModelLoad", a);
  return Done("RepositoryModelLoad", core_->Load(*req));
}

grpc::Status InferenceService::RepositoryModelUnload(
    grpc::ServerContext* ctx, const inference::RepositoryModelUnloadRequest* req,
    inference::RepositoryModelUnloadResponse*) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("RepositoryModelUnload", a);
  return Done("RepositoryModelUnload", core_->Unload(req->model_name()));
}

grpc::Status InferenceService::SystemSharedMemoryStatus(
    grpc::ServerContext* ctx, const inference::SystemSharedMemoryStatusRequest* req,
    inference::SystemSharedMemoryStatusResponse* resp) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("SystemSharedMemoryStatus", a);
  return Done("SystemSharedMemoryStatus", core_->ShmStatus(req->name(), resp));
}

grpc::Status InferenceService::SystemSharedMemoryRegister(
    grpc::ServerContext* ctx, const inference::SystemSharedMemoryRegisterRequest* req,
    inference::SystemSharedMemoryRegisterResponse*) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("SystemSharedMemoryRegister", a);
  return Done("SystemSharedMemoryRegister", core_->ShmRegister(*req));
}

grpc::Status InferenceService::SystemSharedMemoryUnregister(
    grpc::ServerContext* ctx, const inference::SystemSharedMemoryUnregisterRequest* req,
    inference::SystemSharedMemoryUnregisterResponse*) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("SystemSharedMemoryUnregister", a);
  return Done("SystemSharedMemoryUnregister", core_->ShmUnregister(req->name()));
}

}  // namespace kiln

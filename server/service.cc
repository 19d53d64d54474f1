#include "server/service.h"

#include <cctype>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "engine/base/status.h"
#include "server/echo.h"

namespace kiln {
namespace {

constexpr size_t kMaxErrorMessageBytes = 4096;

bool ConstantTimeEqual(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

uint64_t NowMs() { return static_cast<uint64_t>(absl::ToUnixMillis(absl::Now())); }

void FillTensorMetadata(const ModelSpec& spec, const TensorSpec& t,
                        inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(t.name);
  out->set_datatype(t.dtype.KServeName());
  for (int64_t d : spec.FullDims(t, -1)) out->add_shape(d);
}

}  // namespace

std::string ReasonOf(const absl::Status& s) {
  std::string name = GrpcCodeName(static_cast<grpc::StatusCode>(s.code()));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  // Names a request echoes are cut where they are formatted (Echo); this
  // bounds whatever else a message may carry.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      Echo(s.message(), kMaxErrorMessageBytes));
}

std::string GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

InferenceService::InferenceService(ModelManager* manager, Metrics* metrics, ServerState* state,
                                   Options options)
    : manager_(manager), metrics_(metrics), state_(state), options_(std::move(options)) {}

grpc::Status InferenceService::Authorize(grpc::ServerContext* ctx) const {
  if (options_.auth_token.empty()) return grpc::Status::OK;
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it != md.end()) {
    std::string value(it->second.data(), it->second.size());
    const std::string kBearer = "Bearer ";
    if (absl::StartsWith(value, kBearer) &&
        ConstantTimeEqual(value.substr(kBearer.size()), options_.auth_token))
      return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong bearer token (metadata 'authorization: Bearer <token>')");
}

grpc::Status InferenceService::Done(const char* method, grpc::Status s) {
  if (metrics_) metrics_->CountRpc(method, GrpcCodeName(s.error_code()));
  return s;
}

grpc::Status InferenceService::ServerLive(grpc::ServerContext* ctx,
                                          const inference::ServerLiveRequest*,
                                          inference::ServerLiveResponse* resp) {
  ActiveCall active(&active_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ServerLive", a);
  resp->set_live(true);
  return Done("ServerLive", grpc::Status::OK);
}

grpc::Status InferenceService::ServerReady(grpc::ServerContext* ctx,
                                           const inference::ServerReadyRequest*,
                                           inference::ServerReadyResponse* resp) {
  ActiveCall active(&active_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ServerReady", a);
  resp->set_ready(state_->ready.load() && !state_->shutting_down.load());
  return Done("ServerReady", grpc::Status::OK);
}

grpc::Status InferenceService::ModelReady(grpc::ServerContext* ctx,
                                          const inference::ModelReadyRequest* req,
                                          inference::ModelReadyResponse* resp) {
  ActiveCall active(&active_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ModelReady", a);
  auto m = manager_->Get(req->name(), req->version());
  if (!m.ok() && m.status().code() == absl::StatusCode::kNotFound)
    return Done("ModelReady", ToGrpcStatus(m.status()));
  resp->set_ready(m.ok() && !state_->shutting_down.load());
  return Done("ModelReady", grpc::Status::OK);
}

grpc::Status InferenceService::ServerMetadata(grpc::ServerContext* ctx,
                                              const inference::ServerMetadataRequest*,
                                              inference::ServerMetadataResponse* resp) {
  ActiveCall active(&active_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ServerMetadata", a);
  resp->set_name(kServerName);
  resp->set_version(kServerVersion);
  for (const char* e : {"model_repository", "model_repository(unload_dependents)",
                        "schedule_policy", "model_configuration", "statistics",
                        "binary_tensor_data", "parameters"})
    resp->add_extensions(e);
  return Done("ServerMetadata", grpc::Status::OK);
}

grpc::Status InferenceService::ModelMetadata(grpc::ServerContext* ctx,
                                             const inference::ModelMetadataRequest* req,
                                             inference::ModelMetadataResponse* resp) {
  ActiveCall active(&active_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ModelMetadata", a);
  auto m = manager_->Get(req->name(), req->version());
  if (!m.ok()) return Done("ModelMetadata", ToGrpcStatus(m.status()));
  const ModelSpec& spec = (*m)->spec();
  resp->set_name(spec.name);
  for (int64_t v : manager_->ReadyVersions(spec.name)) resp->add_versions(absl::StrCat(v));
  resp->set_platform(spec.platform);
  for (const TensorSpec& t : spec.inputs) FillTensorMetadata(spec, t, resp->add_inputs());
  for (const TensorSpec& t : spec.outputs) FillTensorMetadata(spec, t, resp->add_outputs());
  return Done("ModelMetadata", grpc::Status::OK);
}

absl::Status InferenceService::Submit(const inference::ModelInferRequest& req,
                                      InferRequest::Callback callback,
                                      std::shared_ptr<LoadedModel>* model, RequestPtr* request) {
  if (state_->shutting_down.load()) return absl::UnavailableError("the server is shutting down");
  // A reload swaps in a new version and drains the old one: a request that
  // picked the old one just before the swap goes to its successor instead.
  for (int attempt = 0;; ++attempt) {
    ASSIGN_OR_RETURN(*model, manager_->Get(req.model_name(), req.model_version()));
    LoadedModel& m = **model;
    ASSIGN_OR_RETURN(DecodedRequest d,
                     DecodeInferRequest(req, m.spec(), m.version(), options_.limits));
    d.request->set_callback(callback);
    absl::Status enq = m.Enqueue(d.request, d.timeout);
    if (enq.ok()) {
      *request = d.request;
      return absl::OkStatus();
    }
    auto now = manager_->Get(req.model_name(), req.model_version());
    if (attempt >= 3 || !absl::IsUnavailable(enq) || !now.ok() || now->get() == model->get())
      return enq;
  }
}

void InferenceService::Account(LoadedModel* model, absl::Time start,
                               const absl::StatusOr<InferResult>& r) {
  if (model == nullptr) return;
  uint64_t ns = static_cast<uint64_t>(absl::ToInt64Nanoseconds(absl::Now() - start));
  if (r.ok()) {
    model->stats().RecordSuccess(ns, r->timings, NowMs());
    if (ModelMetrics* mm = model->metrics()) {
      mm->success->Increment();
      mm->request_duration->Observe(static_cast<double>(ns) * 1e-9);
    }
  } else {
    model->stats().RecordFailure(ns, NowMs());
    if (ModelMetrics* mm = model->metrics()) mm->Failure(ReasonOf(r.status()));
  }
}

grpc::Status InferenceService::ModelInfer(grpc::ServerContext* ctx,
                                          const inference::ModelInferRequest* req,
                                          inference::ModelInferResponse* resp) {
  ActiveCall active(&active_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ModelInfer", a);
  absl::Time start = absl::Now();
  struct Waiter {
    absl::Notification done;
    absl::StatusOr<InferResult> result;
  };
  auto waiter = std::make_shared<Waiter>();
  std::shared_ptr<LoadedModel> model;
  RequestPtr request;
  absl::Status s = Submit(
      *req,
      [waiter](absl::StatusOr<InferResult> r) {
        waiter->result = std::move(r);
        waiter->done.Notify();
      },
      &model, &request);
  if (!s.ok()) {
    Account(model.get(), start, s);
    return Done("ModelInfer", ToGrpcStatus(s));
  }
  bool cancelled = false;
  while (!waiter->done.WaitForNotificationWithTimeout(absl::Milliseconds(5))) {
    if (!cancelled && ctx->IsCancelled()) {
      cancelled = true;
      request->Cancel();
      model->Wake();
    }
  }
  if (cancelled && waiter->result.ok())
    waiter->result = absl::CancelledError("request cancelled by the client");
  Account(model.get(), start, waiter->result);
  if (!waiter->result.ok()) return Done("ModelInfer", ToGrpcStatus(waiter->result.status()));
  EncodeInferResponse(*std::move(waiter->result), model->name(), model->version_string(), req->id(), resp);
  return Done("ModelInfer", grpc::Status::OK);
}

grpc::Status InferenceService::ModelConfig(grpc::ServerContext* ctx,
                                           const inference::ModelConfigRequest* req,
                                           inference::ModelConfigResponse* resp) {
  ActiveCall active(&active_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ModelConfig", a);
  auto m = manager_->Get(req->name(), req->version());
  if (!m.ok()) return Done("ModelConfig", ToGrpcStatus(m.status()));
  *resp->mutable_config() = (*m)->spec().config;
  return Done("ModelConfig", grpc::Status::OK);
}

grpc::Status InferenceService::ModelStatistics(grpc::ServerContext* ctx,
                                               const inference::ModelStatisticsRequest* req,
                                               inference::ModelStatisticsResponse* resp) {
  ActiveCall active(&active_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ModelStatistics", a);
  std::vector<std::shared_ptr<LoadedModel>> models;
  if (req->name().empty()) {
    models = manager_->Ready();
  } else if (req->version().empty()) {
    models = manager_->Ready(req->name());
    if (models.empty()) {
      auto m = manager_->Get(req->name(), "");
      return Done("ModelStatistics", ToGrpcStatus(m.status()));
    }
  } else {
    auto m = manager_->Get(req->name(), req->version());
    if (!m.ok()) return Done("ModelStatistics", ToGrpcStatus(m.status()));
    models.push_back(*m);
  }
  for (const auto& m : models) {
    inference::ModelStatistics* s = resp->add_model_stats();
    s->set_name(m->name());
    s->set_version(m->version_string());
    m->stats().Fill(s);
  }
  return Done("ModelStatistics", grpc::Status::OK);
}

grpc::Status InferenceService::RepositoryIndex(grpc::ServerContext* ctx,
                                               const inference::RepositoryIndexRequest* req,
                                               inference::RepositoryIndexResponse* resp) {
  ActiveCall active(&active_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("RepositoryIndex", a);
  for (const auto& e : manager_->Index(req->ready())) {
    auto* m = resp->add_models();
    m->set_name(e.name);
    m->set_version(e.version);
    m->set_state(e.state);
    m->set_reason(e.reason);
  }
  return Done("RepositoryIndex", grpc::Status::OK);
}

grpc::Status InferenceService::RepositoryModelLoad(
    grpc::ServerContext* ctx, const inference::RepositoryModelLoadRequest* req,
    inference::RepositoryModelLoadResponse*) {
  ActiveCall active(&active_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("RepositoryModelLoad", a);
  if (!req->parameters().empty())
    return Done("RepositoryModelLoad",
                grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                             "load parameters (config / file overrides) are not supported"));
  return Done("RepositoryModelLoad", ToGrpcStatus(manager_->Load(req->model_name())));
}

grpc::Status InferenceService::RepositoryModelUnload(
    grpc::ServerContext* ctx, const inference::RepositoryModelUnloadRequest* req,
    inference::RepositoryModelUnloadResponse*) {
  ActiveCall active(&active_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("RepositoryModelUnload", a);
  return Done("RepositoryModelUnload", ToGrpcStatus(manager_->Unload(req->model_name())));
}

}  // namespace kiln

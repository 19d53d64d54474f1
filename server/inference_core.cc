#include "server/inference_core.h"

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "engine/base/status.h"
#include "server/status_codes.h"

namespace kiln {
namespace {

uint64_t NowMs() { return static_cast<uint64_t>(absl::ToUnixMillis(absl::Now())); }

void FillTensorMetadata(const ModelSpec& spec, const TensorSpec& t,
                        inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(t.name);
  out->set_datatype(t.dtype.KServeName());
  for (int64_t d : spec.FullDims(t, -1)) out->add_shape(d);
}

}  // namespace

bool ConstantTimeEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

InferenceCore::InferenceCore(ModelManager* manager, Metrics* metrics, ServerState* state,
                             Options options)
    : manager_(manager),
      metrics_(metrics),
      state_(state),
      options_(std::move(options)),
      shm_(options_.shm) {}

absl::Status InferenceCore::Authorize(std::optional<absl::string_view> authorization) const {
  if (options_.auth_token.empty()) return absl::OkStatus();
  if (authorization) {
    absl::string_view value = absl::StripAsciiWhitespace(*authorization);
    if (absl::StartsWithIgnoreCase(value, "Bearer ") &&
        ConstantTimeEqual(absl::StripLeadingAsciiWhitespace(value.substr(7)), options_.auth_token))
      return absl::OkStatus();
  }
  return absl::UnauthenticatedError(
      "missing or wrong bearer token ('authorization: Bearer <token>')");
}

bool InferenceCore::Ready() const { return state_->ready.load() && !state_->shutting_down.load(); }

absl::StatusOr<bool> InferenceCore::ModelReady(const std::string& name,
                                               const std::string& version) const {
  auto m = manager_->Get(name, version);
  if (!m.ok() && m.status().code() == absl::StatusCode::kNotFound) return m.status();
  return m.ok() && !state_->shutting_down.load();
}

void InferenceCore::ServerMetadata(inference::ServerMetadataResponse* resp) const {
  resp->set_name(kServerName);
  resp->set_version(kServerVersion);
  for (const char* e :
       {"model_repository", "model_repository(unload_dependents)", "schedule_policy",
        "model_configuration", "statistics", "binary_tensor_data", "parameters"})
    resp->add_extensions(e);
  if (shm_.enabled()) resp->add_extensions("system_shared_memory");
}

absl::Status InferenceCore::ModelMetadata(const std::string& name, const std::string& version,
                                          inference::ModelMetadataResponse* resp) const {
  ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> m, manager_->Get(name, version));
  const ModelSpec& spec = m->spec();
  resp->set_name(spec.name);
  for (int64_t v : manager_->ReadyVersions(spec.name)) resp->add_versions(absl::StrCat(v));
  resp->set_platform(spec.platform);
  for (const TensorSpec& t : spec.inputs) FillTensorMetadata(spec, t, resp->add_inputs());
  for (const TensorSpec& t : spec.outputs) FillTensorMetadata(spec, t, resp->add_outputs());
  return absl::OkStatus();
}

absl::Status InferenceCore::ModelConfig(const std::string& name, const std::string& version,
                                        inference::ModelConfigResponse* resp) const {
  ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> m, manager_->Get(name, version));
  *resp->mutable_config() = m->spec().config;
  return absl::OkStatus();
}

absl::Status InferenceCore::ModelStatistics(const std::string& name, const std::string& version,
                                            inference::ModelStatisticsResponse* resp) const {
  std::vector<std::shared_ptr<LoadedModel>> models;
  if (name.empty()) {
    models = manager_->Ready();
  } else if (version.empty()) {
    models = manager_->Ready(name);
    if (models.empty()) return manager_->Get(name, "").status();
  } else {
    ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> m, manager_->Get(name, version));
    models.push_back(std::move(m));
  }
  for (const auto& m : models) {
    inference::ModelStatistics* s = resp->add_model_stats();
    s->set_name(m->name());
    s->set_version(m->version_string());
    m->stats().Fill(s);
  }
  return absl::OkStatus();
}

void InferenceCore::RepositoryIndex(bool ready_only,
                                    inference::RepositoryIndexResponse* resp) const {
  for (const auto& e : manager_->Index(ready_only)) {
    auto* m = resp->add_models();
    m->set_name(e.name);
    m->set_version(e.version);
    m->set_state(e.state);
    m->set_reason(e.reason);
  }
}

absl::Status InferenceCore::Load(const inference::RepositoryModelLoadRequest& req) {
  if (!req.parameters().empty())
    return absl::InvalidArgumentError(
        "load parameters (config / file overrides) are not supported");
  return manager_->Load(req.model_name());
}

absl::Status InferenceCore::Unload(const std::string& name) { return manager_->Unload(name); }

absl::Status InferenceCore::ShmStatus(const std::string& name,
                                      inference::SystemSharedMemoryStatusResponse* resp) const {
  ASSIGN_OR_RETURN(std::vector<ShmRegionInfo> regions, shm_.Status(name));
  for (const ShmRegionInfo& r : regions) {
    auto& out = (*resp->mutable_regions())[r.name];
    out.set_name(r.name);
    out.set_key(r.key);
    out.set_offset(r.offset);
    out.set_byte_size(r.byte_size);
  }
  return absl::OkStatus();
}

absl::Status InferenceCore::ShmRegister(const inference::SystemSharedMemoryRegisterRequest& req) {
  return shm_.Register(req.name(), req.key(), req.offset(), req.byte_size());
}

absl::Status InferenceCore::ShmUnregister(const std::string& name) {
  return shm_.Unregister(name);
}

absl::Status InferenceCore::Submit(const inference::ModelInferRequest& req,
                                   InferRequest::Callback callback,
                                   std::shared_ptr<LoadedModel>* model, RequestPtr* request) {
  if (state_->shutting_down.load()) return absl::UnavailableError("the server is shutting down");
  // A reload swaps in a new version and drains the old one: a request that
  // picked the old one just before the swap goes to its successor instead.
  for (int attempt = 0;; ++attempt) {
    ASSIGN_OR_RETURN(*model, manager_->Get(req.model_name(), req.model_version()));
    LoadedModel& m = **model;
    ASSIGN_OR_RETURN(DecodedRequest d,
                     DecodeInferRequest(req, m.spec(), m.version(), options_.limits, &shm_));
    if (d.shm_outputs.empty()) {
      d.request->set_callback(callback);
    } else {
      // Outputs in shared memory are written on completion; the slots keep
      // their regions mapped until then.
      d.request->set_callback(
          [callback, slots = std::move(d.shm_outputs)](absl::StatusOr<InferResult> r) {
            if (r.ok()) {
              absl::Status s = WriteShmOutputs(slots, &*r);
              if (!s.ok()) r = s;
            }
            if (callback) callback(std::move(r));
          });
    }
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

void InferenceCore::Account(LoadedModel* model, absl::Time start,
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

absl::Status InferenceCore::Infer(const inference::ModelInferRequest& req,
                                  const std::function<bool()>& cancelled,
                                  inference::ModelInferResponse* resp) {
  absl::Time start = absl::Now();
  struct Waiter {
    absl::Notification done;
    absl::StatusOr<InferResult> result;
  };
  auto waiter = std::make_shared<Waiter>();
  std::shared_ptr<LoadedModel> model;
  RequestPtr request;
  absl::Status s = Submit(
      req,
      [waiter](absl::StatusOr<InferResult> r) {
        waiter->result = std::move(r);
        waiter->done.Notify();
      },
      &model, &request);
  if (!s.ok()) {
    Account(model.get(), start, s);
    return s;
  }
  bool was_cancelled = false;
  while (!waiter->done.WaitForNotificationWithTimeout(absl::Milliseconds(5))) {
    if (!was_cancelled && cancelled && cancelled()) {
      was_cancelled = true;
      request->Cancel();
      model->Wake();
    }
  }
  if (was_cancelled && waiter->result.ok())
    waiter->result = absl::CancelledError("request cancelled by the client");
  Account(model.get(), start, waiter->result);
  if (!waiter->result.ok()) return waiter->result.status();
  EncodeInferResponse(*std::move(waiter->result), model->name(), model->version_string(), req.id(),
                      resp);
  SetShmOutputParameters(req, resp);
  return absl::OkStatus();
}

}  // namespace kiln

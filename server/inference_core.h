// InferenceCore: kiln's KServe v2 API (and Triton's extensions) without a
// transport. The gRPC service (service.h) and the HTTP/REST server
// (http_server.h) are thin adapters over it: they turn their wire format
// into the inference.* protobuf messages, call the core, and turn the
// result and the absl::Status back (status_codes.h maps each code). The
// core checks auth, looks models up, decodes and validates requests
// (infer_codec), enqueues them, waits, encodes the response and accounts
// the request (ModelStatistics and the per-model metrics).
//
// System shared memory (Triton's extension): the core owns the region
// registry (shm_registry.h); requests name regions per tensor
// (infer_codec.h). Submit writes outputs asked in shared memory into their
// regions when the request completes, before the transport's callback runs;
// the request's ShmOutputSlots keep those regions mapped until then, even
// if they are unregistered meanwhile.
//
// Infer waits for its request while polling `cancelled` every 5 ms; on
// cancellation the request is marked cancelled (the batcher drops it if it
// has not run) and Infer still waits for its completion, so no request
// outlives the message its data points into.
//
// Thread safety: thread-safe (both transports call it concurrently).
#ifndef KILN_SERVER_INFERENCE_CORE_H_
#define KILN_SERVER_INFERENCE_CORE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/grpc_service.pb.h"
#include "server/infer_codec.h"
#include "server/metrics.h"
#include "server/model_manager.h"
#include "server/shm_registry.h"

namespace kiln {

inline constexpr char kServerName[] = "kiln";
inline constexpr char kServerVersion[] = "0.1.0";

// Liveness / readiness shared by the transports, the health service and main.
struct ServerState {
  std::atomic<bool> ready{false};
  std::atomic<bool> shutting_down{false};
};

// Constant-time comparison of a presented token with the expected one.
bool ConstantTimeEqual(absl::string_view a, absl::string_view b);

class InferenceCore {
 public:
  struct Options {
    CodecLimits limits;
    std::string auth_token;  // empty: no authentication
    ShmRegistryOptions shm;  // no allowed prefix: shared memory off
  };
  // All pointers must outlive the core; `metrics` may be null.
  InferenceCore(ModelManager* manager, Metrics* metrics, ServerState* state, Options options);

  // Counts a call (of either transport) as in progress for its lifetime.
  class ActiveCall {
   public:
    explicit ActiveCall(InferenceCore* core) : n_(&core->active_) { ++*n_; }
    ~ActiveCall() { --*n_; }
    ActiveCall(const ActiveCall&) = delete;
    ActiveCall& operator=(const ActiveCall&) = delete;

   private:
    std::atomic<int>* n_;
  };
  // Calls in progress (for a graceful shutdown).
  int active_calls() const { return active_.load(); }

  // `authorization`: the value of the request's authorization header /
  // metadata (nullopt: none). OK or UNAUTHENTICATED.
  absl::Status Authorize(std::optional<absl::string_view> authorization) const;

  bool Live() const { return true; }
  bool Ready() const;
  // Whether a model version is ready; NOT_FOUND for an unknown one.
  absl::StatusOr<bool> ModelReady(const std::string& name, const std::string& version) const;
  void ServerMetadata(inference::ServerMetadataResponse* resp) const;
  absl::Status ModelMetadata(const std::string& name, const std::string& version,
                             inference::ModelMetadataResponse* resp) const;
  absl::Status ModelConfig(const std::string& name, const std::string& version,
                           inference::ModelConfigResponse* resp) const;
  // `name` empty: every ready model.
  absl::Status ModelStatistics(const std::string& name, const std::string& version,
                               inference::ModelStatisticsResponse* resp) const;
  void RepositoryIndex(bool ready_only, inference::RepositoryIndexResponse* resp) const;
  absl::Status Load(const inference::RepositoryModelLoadRequest& req);
  absl::Status Unload(const std::string& name);

  // System shared memory; `name` empty: every region (see shm_registry.h
  // for the codes).
  absl::Status ShmStatus(const std::string& name,
                         inference::SystemSharedMemoryStatusResponse* resp) const;
  absl::Status ShmRegister(const inference::SystemSharedMemoryRegisterRequest& req);
  absl::Status ShmUnregister(const std::string& name);
  ShmRegistry* shm() { return &shm_; }

  // Runs `req` to completion (see the class comment); `cancelled` may be
  // empty. The response's outputs are raw (raw_output_contents).
  absl::Status Infer(const inference::ModelInferRequest& req,
                     const std::function<bool()>& cancelled,
                     inference::ModelInferResponse* resp);

  // Decodes, validates and enqueues `req`; on success the request will be
  // completed through `callback`. `*model` is set for accounting once the
  // model was found. (The streaming RPC uses this directly.)
  absl::Status Submit(const inference::ModelInferRequest& req, InferRequest::Callback callback,
                      std::shared_ptr<LoadedModel>* model, RequestPtr* request);
  // Success / failure accounting of one finished inference request.
  void Account(LoadedModel* model, absl::Time start, const absl::StatusOr<InferResult>& r);

  ServerState* state() const { return state_; }

 private:
  std::atomic<int> active_{0};
  ModelManager* const manager_;
  Metrics* const metrics_;
  ServerState* const state_;
  const Options options_;
  ShmRegistry shm_;
};

}  // namespace kiln

#endif  // KILN_SERVER_INFERENCE_CORE_H_

// KilnServer: kilnd assembled. Owns the device registry and engine, the
// ONNX backend loader (or an injected one), the metrics registry and its
// HTTP endpoint (MetricsHttpServer), the model manager, the transport-neutral
// InferenceCore, the gRPC service (plus gRPC's standard health service,
// grpc.health.v1) and the gRPC server, and the HTTP/REST server (HttpServer)
// over the same core.
//
// Start binds the ports (0 = any free port; see grpc_port() / http_port() /
// metrics_port()), serves liveness at once, loads the startup models, and
// then reports ready (ServerReady, health SERVING). Shutdown stops
// accepting new calls (both transports answer UNAVAILABLE / 503 while
// the calls in flight finish within exit_timeout, cancelling what is left
// after that), closes the HTTP and gRPC ports, and drains and unloads every
// model. A model load still running then (loads have no cancellation
// points; a hung file system can stall one) is waited for only until
// exit_timeout has passed, plus a second: Shutdown then returns false and
// the load goes on in its own thread, serving nothing; the destructor waits
// for it (kilnd exits instead).
// The metrics endpoint stays up until the server is destroyed.
//
// Thread safety: Start / Shutdown from one thread; the server itself serves
// from gRPC's threads.
#ifndef KILN_SERVER_KILN_SERVER_H_
#define KILN_SERVER_KILN_SERVER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/model_manager.h"
#include "server/runner.h"

namespace kiln {

struct KilnServerOptions {
  std::string model_repository = "models";
  std::string address = "0.0.0.0";  // gRPC (and by default metrics) bind address
  int grpc_port = 8001;              // 0: any free port
  int metrics_port = 8002;           // 0: any free port; -1: no metrics endpoint
  // HTTP/REST (KServe v2 REST): 0 any free port, -1 off (kilnd's
  // --http-port defaults to 8000; in-process users opt in).
  int http_port = -1;
  std::string http_address;          // empty: `address`
  int http_threads = 16;
  int64_t http_max_body_bytes = 0;   // 0: max_message_bytes
  int64_t http_max_json_bytes = int64_t{32} << 20;  // JSON part of a request
  std::string metrics_address;       // empty: `address`
  std::string metrics_auth_token;    // empty: /metrics without authentication
  std::string device = "CPU";
  ControlMode mode = ControlMode::kNone;
  std::vector<std::string> load_models;  // explicit mode: loaded at start
  std::string tls_cert, tls_key;         // PEM files; both or neither
  std::string auth_token;                // empty: no auth
  int64_t max_message_bytes = int64_t{256} << 20;
  int64_t max_input_bytes = int64_t{256} << 20;
  // System shared memory: keys must start with one of these prefixes
  // ("/" + a name prefix); empty: shared memory off. At most
  // shm_max_regions regions at once.
  std::vector<std::string> shm_allow;
  int shm_max_regions = 64;
  // Device memory (bytes in use plus cached) the engine may hold; a request
  // whose plan would pass it gets RESOURCE_EXHAUSTED. 0: no limit.
  uint64_t max_memory_bytes = 0;
  absl::Duration exit_timeout = absl::Seconds(30);
  int max_streams = 64;          // concurrent ModelStreamInfer calls
  int max_stream_inflight = 64;  // unanswered requests per stream
  size_t jit_max_captures = 16;
  // Device bytes the JIT captures of one model instance may hold together
  // (intermediates and outputs kept for replays); the least recently used
  // are dropped past it, and a capture bigger than all of it is not kept.
  size_t jit_max_capture_bytes = size_t{1} << 30;
  // BEAM rounds per new CPU reduce kernel (searched at its first compile,
  // i.e. at load / warm-up; cached on disk); < 0: the BEAM environment
  // variable.
  int beam = -1;
  // A model load (with its warm-up) running longer fails with
  // DEADLINE_EXCEEDED (ModelManager::Options::load_timeout).
  absl::Duration load_timeout = absl::Minutes(10);
  int64_t default_max_batch = 8;
  bool pad_to_captured = true;
  bool exit_on_error = false;  // fail Start when a startup model fails
};

class KilnServer {
 public:
  // `loader` null: kiln's ONNX backend on the engine.
  static absl::StatusOr<std::unique_ptr<KilnServer>> Start(
      const KilnServerOptions& options, std::unique_ptr<BackendLoader> loader = nullptr);
  ~KilnServer();

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  int http_port() const { return http_port_; }  // -1: off
  // Status of loading the startup models (OK when all loaded).
  const absl::Status& startup_status() const { return startup_status_; }
  ModelManager* manager() { return manager_.get(); }

  // True when everything stopped; false when a model load was still
  // running at the deadline (see above). Later calls return true.
  bool Shutdown();

 private:
  struct Impl;
  KilnServer();
  // Joins the drain and releases the transports and the manager.
  void FinishShutdown();

  std::unique_ptr<Impl> impl_;
  std::unique_ptr<ModelManager> manager_;
  int grpc_port_ = 0;
  int metrics_port_ = -1;
  int http_port_ = -1;
  absl::Status startup_status_;
  bool shut_down_ = false;
  // Shutdown's drain of the model manager (StopAll), if it outlived it.
  std::thread drain_;
  std::shared_ptr<absl::Notification> drained_;
};

}  // namespace kiln

#endif  // KILN_SERVER_KILN_SERVER_H_

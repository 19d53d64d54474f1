#include "server/kiln_server.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/onnx/tensor_proto.h"
#include "engine/realize/engine.h"
#include "engine/runtime/device.h"
#include "engine/runtime/thread_pool.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "prometheus/registry.h"
#include "server/clock.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/metrics_http.h"
#include "server/onnx_runner.h"
#include "server/service.h"
#include "server/shm_registry.h"
#include "third_party/civetweb_tls/civetweb_tls.h"

namespace kiln {
namespace {

constexpr char kServiceName[] = "inference.GRPCInferenceService";

// A PEM file, read with a bound (a certificate chain is a few KiB).
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  absl::StatusOr<std::string> pem = ReadFileToString(path, int64_t{1} << 20);
  if (!pem.ok())
    return absl::Status(pem.status().code(), absl::StrCat(flag, ": ", pem.status().message()));
  return pem;
}

}  // namespace

struct KilnServer::Impl {
  KilnServerOptions options;
  std::unique_ptr<DeviceRegistry> registry;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<BackendLoader> loader;
  RealClock clock;
  std::shared_ptr<prometheus::Registry> prom;
  std::unique_ptr<Metrics> metrics;
  std::shared_ptr<EngineCollector> engine_collector;
  std::unique_ptr<MetricsHttpServer> metrics_http;
  ServerState state;
  std::unique_ptr<InferenceCore> core;
  std::unique_ptr<InferenceService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<HttpServer> http;

  void SetServing(bool serving) {
    if (!server) return;
    if (auto* h = server->GetHealthCheckService()) {
      h->SetServingStatus(serving);
      h->SetServingStatus(kServiceName, serving);
    }
  }
};

KilnServer::KilnServer() : impl_(new Impl) {}

KilnServer::~KilnServer() {
  Shutdown();
  if (drain_.joinable()) FinishShutdown();  // waits for a load still running at Shutdown
  impl_->metrics_http.reset();  // civetweb takes ~2 s to stop
}

absl::StatusOr<std::unique_ptr<KilnServer>> KilnServer::Start(
    const KilnServerOptions& options, std::unique_ptr<BackendLoader> loader) {
  std::unique_ptr<KilnServer> s(new KilnServer());
  Impl& im = *s->impl_;
  im.options = options;
  if (options.tls_cert.empty() != options.tls_key.empty())
    return absl::InvalidArgumentError("--tls-cert and --tls-key must be given together");
  if (options.max_message_bytes < 1024 || options.max_message_bytes > (int64_t{2} << 30) - 1)
    return absl::InvalidArgumentError("--max-message-bytes must be in [1 KiB, 2 GiB)");
  for (const std::string& prefix : options.shm_allow)
    RETURN_IF_ERROR(CheckShmKey(prefix, /*prefix=*/true));
  if (options.shm_max_regions < 1 || options.shm_max_regions > 65536)
    return absl::InvalidArgumentError("--shm-max-regions must be in [1, 65536]");

  // Engine (only when kiln's own backend is used).
  if (loader) {
    im.loader = std::move(loader);
  } else {
    im.registry = DeviceRegistry::WithDefaults();
    ASSIGN_OR_RETURN(Device * dev, im.registry->Get(options.device));
    dev->allocator().set_memory_limit(static_cast<size_t>(options.max_memory_bytes));
    EngineOptions eo;
    eo.beam = options.beam;
    im.engine = std::make_unique<Engine>(im.registry.get(), eo);
    im.loader = std::make_unique<OnnxLoader>(im.engine.get());
  }

  // Metrics.
  im.prom = std::make_shared<prometheus::Registry>();
  im.metrics = std::make_unique<Metrics>(im.prom);
  if (options.metrics_port >= 0) {
    Engine* engine = im.engine.get();
    std::string device = options.device;
    im.engine_collector = std::make_shared<EngineCollector>([engine, device]() {
      EngineSnapshot snap;
      if (engine == nullptr) return snap;
      EngineStats es = engine->stats();
      snap.kernels_compiled = static_cast<double>(es.kernels_compiled);
      snap.compile_seconds = es.compile_seconds;
      for (const std::string& name : {device}) {
        auto d = engine->GetDevice(name);
        if (!d.ok()) continue;
        Allocator::Stats as = (*d)->allocator().stats();
        snap.memory.push_back({(*d)->name(), static_cast<double>(as.allocated_bytes),
                               static_cast<double>(as.cached_bytes),
                               static_cast<double>((*d)->allocator().memory_limit())});
      }
      return snap;
    });
    MetricsHttpOptions http;
    http.address = options.metrics_address.empty() ? options.address : options.metrics_address;
    http.port = options.metrics_port;
    http.auth_token = options.metrics_auth_token;
    ASSIGN_OR_RETURN(im.metrics_http,
                     MetricsHttpServer::Start(http, {im.prom, im.engine_collector}));
    s->metrics_port_ = im.metrics_http->port();
  }

  // Models and service.
  ModelManager::Options mo;
  mo.repository = options.model_repository;
  mo.mode = options.mode;
  mo.startup_models = options.load_models;
  mo.device = options.device;
  mo.jit.max_captures = options.jit_max_captures;
  mo.jit.max_capture_bytes = options.jit_max_capture_bytes;
  mo.load_timeout = options.load_timeout;
  mo.default_max_batch = options.default_max_batch;
  // The CPU device's pool has DefaultThreads(); a model of several instances
  // shares them out (InstanceThreads).
  if (im.engine) mo.cpu_threads = ThreadPool::DefaultThreads();
  mo.pad_to_captured = options.pad_to_captured;
  s->manager_ = std::make_unique<ModelManager>(mo, im.loader.get(), im.metrics.get(), &im.clock);
  InferenceCore::Options co;
  co.limits.max_input_bytes = options.max_input_bytes;
  co.auth_token = options.auth_token;
  co.shm.allowed_prefixes = options.shm_allow;
  co.shm.max_regions = options.shm_max_regions;
  im.core = std::make_unique<InferenceCore>(s->manager_.get(), im.metrics.get(), &im.state, co);
  InferenceService::Options so;
  so.max_streams = options.max_streams;
  so.max_stream_inflight = options.max_stream_inflight;
  im.service = std::make_unique<InferenceService>(im.core.get(), im.metrics.get(), so);

  // gRPC server.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> creds;
  std::string cert, key;
  if (!options.tls_cert.empty()) {
    ASSIGN_OR_RETURN(cert, ReadPem(options.tls_cert, "--tls-cert"));
    ASSIGN_OR_RETURN(key, ReadPem(options.tls_key, "--tls-key"));
    // gRPC reports bad PEM text only as a failed start; say which part.
    RETURN_IF_ERROR(CheckServerTls(cert, key));
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({key, cert});
    creds = grpc::SslServerCredentials(ssl);
  } else {
    creds = grpc::InsecureServerCredentials();
  }
  std::string addr = absl::StrCat(options.address, ":", options.grpc_port);
  builder.AddListeningPort(addr, creds, &s->grpc_port_);
  builder.RegisterService(im.service.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  im.server = builder.BuildAndStart();
  if (!im.server || s->grpc_port_ == 0)
    return absl::UnavailableError(absl::StrCat("cannot serve gRPC on ", addr));
  im.SetServing(false);

  // HTTP/REST server over the same core.
  if (options.http_port >= 0) {
    HttpServerOptions ho;
    ho.address = options.http_address.empty() ? options.address : options.http_address;
    ho.port = options.http_port;
    ho.num_threads = options.http_threads;
    ho.max_body_bytes = options.http_max_body_bytes > 0 ? options.http_max_body_bytes
                                                        : options.max_message_bytes;
    ho.max_json_bytes = options.http_max_json_bytes;
    ho.tls_cert_pem = cert;  // HTTPS with the gRPC port's certificate
    ho.tls_key_pem = key;
    ASSIGN_OR_RETURN(im.http, HttpServer::Start(ho, im.core.get(), im.metrics.get()));
    s->http_port_ = im.http->port();
  }

  s->startup_status_ = s->manager_->Start();
  if (!s->startup_status_.ok() && options.exit_on_error) return s->startup_status_;
  im.state.ready = true;
  im.SetServing(true);
  return s;
}

bool KilnServer::Shutdown() {
  if (shut_down_) return true;
  shut_down_ = true;
  Impl& im = *impl_;
  // New requests are refused (UNAVAILABLE) from here on; queued ones are
  // sent without further batching delay while gRPC stops accepting calls
  // and waits for the in-flight ones (up to exit_timeout, then cancels them).
  im.state.shutting_down = true;
  im.state.ready = false;
  im.SetServing(false);
  drained_ = std::make_shared<absl::Notification>();
  drain_ = std::thread([m = manager_.get(), done = drained_] {
    if (m) m->StopAll();
    done->Notify();
  });
  // First every call that started before the signal finishes, while new
  // ones are refused with UNAVAILABLE by the handlers (gRPC's own shutdown
  // would cancel calls it has accepted but not yet handed to a handler).
  // A short quiet spell lets calls sent at that moment get their
  // UNAVAILABLE too. Then gRPC's graceful shutdown: no new calls, and the
  // responses still being written are sent (cancelled only at the
  // deadline). Streams end themselves once they have answered what they read.
  absl::Time deadline = absl::Now() + im.options.exit_timeout;
  absl::Time quiet_since = absl::Now();
  while (im.core && absl::Now() < deadline) {
    if (im.core->active_calls() > 0) quiet_since = absl::Now();
    else if (absl::Now() - quiet_since >= absl::Milliseconds(100)) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  // HTTP: cancels what still waits (past the deadline), closes the port and
  // waits for its handlers.
  if (im.http) im.http->Stop();
  if (im.server) {
    im.server->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now() + absl::Seconds(1))));
    im.server->Wait();
  }
  // Loads in progress end first in StopAll; one that does not end by the
  // deadline (plus a second) is left running (see the header).
  const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
  if (!drained_->WaitForNotificationWithTimeout(left + absl::Seconds(1))) {
    const std::vector<std::string> loading = manager_->Busy();
    std::fprintf(stderr,
                 "kilnd: %zu model load(s) still running after --exit-timeout (%s); not waiting "
                 "for them\n",
                 loading.size(), absl::StrJoin(loading, ", ").c_str());
    return false;
  }
  FinishShutdown();
  return true;
}

void KilnServer::FinishShutdown() {
  drain_.join();
  Impl& im = *impl_;
  im.server.reset();
  im.http.reset();
  im.service.reset();
  im.core.reset();
  manager_.reset();
}

}  // namespace kiln

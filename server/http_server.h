// HttpServer: kilnd's KServe v2 HTTP/REST port (Open Inference Protocol
// REST plus Triton's binary tensor data, model repository, model
// configuration and statistics extensions) on civetweb's C API, the HTTP
// server kilnd already links for /metrics (see docs/design-notes.md).
//
// Shared memory (Triton's system shared-memory extension):
// GET/POST v2/systemsharedmemory[/region/NAME]/status,
// POST v2/systemsharedmemory/region/NAME/register and
// POST v2/systemsharedmemory[/region/NAME]/unregister.
//
// It is a thin adapter over InferenceCore, the same core the gRPC service
// calls: routing (HttpRoute below), the bearer token (the core's check),
// the body size limit, and the JSON / binary conversions of rest_json.h;
// every absl::Status becomes the HTTP status of status_codes.h's table
// with the body {"error": "<message>"}.
//
// HTTPS: with a certificate and key (kilnd's --tls-cert / --tls-key, the
// gRPC port's) the port speaks TLS 1.2+ only; civetweb's OpenSSL 1.1 table
// is made to work with OpenSSL 3 by //third_party/civetweb_tls.
//
// Limits: a body above max_body_bytes is refused with 413 before any of it
// is read (by its Content-Length; a chunked body is read up to the limit);
// civetweb bounds the request line and headers (16 KiB, 431 / 413) and
// gives a client request_timeout per read or write; `num_threads` workers
// each serve one connection at a time; an idle keep-alive connection is
// closed after keep_alive_timeout. /v2/health/live and /v2/health/ready are
// open (probes, as grpc.health.v1); every other path needs the token when
// one is set.
//
// Thread safety: Start / Stop / destruction from one thread; requests are
// served on civetweb's threads.
#ifndef KILN_SERVER_HTTP_SERVER_H_
#define KILN_SERVER_HTTP_SERVER_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/inference_core.h"
#include "server/metrics.h"

struct mg_context;
struct mg_connection;

namespace kiln {

struct HttpServerOptions {
  std::string address = "0.0.0.0";  // IPv4 address to bind
  int port = 8000;                   // 0: any free port
  int num_threads = 16;
  int64_t max_body_bytes = int64_t{256} << 20;
  // The JSON part of a request (the whole body, or the header before binary
  // tensor data): a parsed JSON value takes ~16-32 bytes of memory per
  // value of 2 text bytes ("0,"), so it gets a bound of its own (413).
  int64_t max_json_bytes = int64_t{32} << 20;
  // PEM text (not paths): both set = HTTPS only. The certificate chain
  // starts with the leaf; the key must belong to it.
  std::string tls_cert_pem, tls_key_pem;
  absl::Duration request_timeout = absl::Seconds(30);
  absl::Duration keep_alive_timeout = absl::Seconds(5);
};

// What a request asks for: the operation (named as the gRPC method that
// does the same), the model and version from the path, and an HTTP status
// when the path is unknown (404) or the method is wrong (405).
struct HttpRoute {
  std::string op;  // "ServerLive", "ModelInfer", ...; "" when http_status is set
  std::string model, version;
  std::string region;         // a shared-memory region (empty: all)
  int http_status = 0;        // 404 / 405 when the request cannot be routed
  const char* allow = "";     // the method the path takes (for 405's Allow)
};
HttpRoute RouteOf(absl::string_view method, absl::string_view path);

class HttpServer {
 public:
  // Binds and serves. `core` (and `metrics`, may be null) must outlive the
  // server. UNAVAILABLE when the address cannot be bound, INVALID_ARGUMENT
  // for bad options or TLS PEM text, FAILED_PRECONDITION when civetweb's
  // TLS cannot be made to work in this process.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           InferenceCore* core, Metrics* metrics);
  ~HttpServer();

  int port() const { return port_; }
  bool tls() const { return !options_.tls_cert_pem.empty(); }
  // Cancels the inferences HTTP requests still wait for, stops accepting
  // and waits for the handlers (civetweb takes up to ~2 s to stop).
  void Stop();

 private:
  HttpServer() = default;
  static int Handle(mg_connection* conn, void* self);
  static int InitTls(void* ssl_ctx, void* self);
  // Serves one request; returns the HTTP status sent.
  int Serve(mg_connection* conn);

  HttpServerOptions options_;
  InferenceCore* core_ = nullptr;
  Metrics* metrics_ = nullptr;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
  std::atomic<bool> abort_{false};
};

}  // namespace kiln

#endif  // KILN_SERVER_HTTP_SERVER_H_

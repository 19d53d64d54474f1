// MetricsHttpServer: kilnd's Prometheus endpoint, GET /metrics in the text
// format, on civetweb's C++ API (the HTTP server under prometheus-cpp's
// Exposer, used directly so that the endpoint has timeouts, a worker count
// and bearer authentication; prometheus-cpp 1.0's own auth is HTTP Basic).
//
// civetweb serves a connection on one of `num_threads` workers, and a worker
// waits at most `request_timeout` for a client to finish sending its
// request. (With prometheus-cpp's Exposer defaults, 2 workers and civetweb's
// 30 s, two half-sent requests held every scrape for 30 s.) Here fewer slow
// clients than workers cost a scrape nothing, and more hold it back at most
// `request_timeout`; responses are written under the same timeout.
//
// With an auth token, /metrics answers only requests that carry
// `Authorization: Bearer <token>`, others get 401. Other paths get 404.
//
// Thread safety: Start and destruction from one thread; requests are served
// on civetweb's threads (the collectables must be thread-safe).
#ifndef KILN_SERVER_METRICS_HTTP_H_
#define KILN_SERVER_METRICS_HTTP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "prometheus/collectable.h"

class CivetServer;

namespace kiln {

struct MetricsHttpOptions {
  std::string address = "0.0.0.0";  // IPv4 or IPv6 address to bind
  int port = 8002;                   // 0: any free port
  std::string auth_token;            // empty: no authentication
  int num_threads = 8;
  absl::Duration request_timeout = absl::Seconds(5);
};

class MetricsHttpServer {
 public:
  // Binds and serves the metrics of `collectables` (a collectable that is
  // gone is skipped). UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const MetricsHttpOptions& options,
      std::vector<std::weak_ptr<prometheus::Collectable>> collectables);
  // Stops serving (civetweb takes up to ~2 s to stop its threads).
  ~MetricsHttpServer();

  // The bound port (the chosen one when options.port was 0).
  int port() const { return port_; }

 private:
  class Handler;
  MetricsHttpServer() = default;

  std::unique_ptr<Handler> handler_;      // outlives server_
  std::unique_ptr<CivetServer> server_;
  int port_ = 0;
};

}  // namespace kiln

#endif  // KILN_SERVER_METRICS_HTTP_H_

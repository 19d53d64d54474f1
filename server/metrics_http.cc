#include "server/metrics_http.h"

#include <exception>
#include <utility>

#include "CivetServer.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace kiln {
namespace {

bool ConstantTimeEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

void Reply(mg_connection* conn, const char* status, const std::string& extra_headers,
           const std::string& content_type, const std::string& body) {
  std::string head = absl::StrCat("HTTP/1.1 ", status, "\r\n", extra_headers,
                                  "Content-Type: ", content_type, "\r\nContent-Length: ",
                                  body.size(), "\r\nConnection: close\r\n\r\n");
  mg_write(conn, head.data(), head.size());
  mg_write(conn, body.data(), body.size());
}

}  // namespace

class MetricsHttpServer::Handler : public CivetHandler {
 public:
  Handler(std::string token, std::vector<std::weak_ptr<prometheus::Collectable>> collectables)
      : token_(std::move(token)), collectables_(std::move(collectables)) {}

  bool handleGet(CivetServer*, mg_connection* conn) override {
    if (!Authorized(conn)) {
      Reply(conn, "401 Unauthorized", "WWW-Authenticate: Bearer realm=\"kiln\"\r\n",
            "text/plain", "missing or wrong bearer token (Authorization: Bearer <token>)\n");
      return true;
    }
    // Nothing may throw into civetweb's C code.
    try {
      std::vector<prometheus::MetricFamily> families;
      for (const auto& weak : collectables_) {
        std::shared_ptr<prometheus::Collectable> c = weak.lock();
        if (!c) continue;
        for (prometheus::MetricFamily& f : c->Collect()) families.push_back(std::move(f));
      }
      Reply(conn, "200 OK", "", "text/plain; version=0.0.4; charset=utf-8",
            prometheus::TextSerializer().Serialize(families));
    } catch (const std::exception& e) {
      Reply(conn, "500 Internal Server Error", "", "text/plain",
            absl::StrCat("cannot collect the metrics: ", e.what(), "\n"));
    }
    return true;
  }

 private:
  bool Authorized(mg_connection* conn) const {
    if (token_.empty()) return true;
    const char* header = mg_get_header(conn, "Authorization");
    if (header == nullptr) return false;
    absl::string_view value = absl::StripAsciiWhitespace(header);
    if (!absl::StartsWithIgnoreCase(value, "Bearer ")) return false;
    return ConstantTimeEqual(absl::StripLeadingAsciiWhitespace(value.substr(7)), token_);
  }

  const std::string token_;
  const std::vector<std::weak_ptr<prometheus::Collectable>> collectables_;
};

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const MetricsHttpOptions& options,
    std::vector<std::weak_ptr<prometheus::Collectable>> collectables) {
  if (options.num_threads < 1 || options.request_timeout <= absl::ZeroDuration())
    return absl::InvalidArgumentError("metrics server: bad thread count or request timeout");
  // civetweb writes IPv6 addresses in brackets.
  std::string host = options.address;
  if (absl::StrContains(host, ':') && !absl::StartsWith(host, "[")) host = "[" + host + "]";
  std::string where = absl::StrCat(host, ":", options.port);
  std::vector<std::string> civet = {
      "listening_ports", where,
      "num_threads", absl::StrCat(options.num_threads),
      "request_timeout_ms", absl::StrCat(absl::ToInt64Milliseconds(options.request_timeout)),
      "enable_keep_alive", "no",
  };
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer());
  s->handler_ = std::make_unique<Handler>(options.auth_token, std::move(collectables));
  try {
    s->server_ = std::make_unique<CivetServer>(civet);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", where, ": ", e.what()));
  }
  s->server_->addHandler("/metrics", s->handler_.get());
  std::vector<int> ports = s->server_->getListeningPorts();
  s->port_ = ports.empty() ? options.port : ports[0];
  return s;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (server_) server_->close();  // no request runs the handler after this
}

}  // namespace kiln

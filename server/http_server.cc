#include "server/http_server.h"

#include <cstring>
#include <exception>
#include <fstream>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "civetweb.h"
#include "server/echo.h"
#include "server/rest_json.h"
#include "server/status_codes.h"
#include "third_party/civetweb_tls/civetweb_tls.h"

namespace kiln {
namespace {

constexpr char kJson[] = "application/json";

using Headers = std::vector<std::pair<std::string, std::string>>;

void Send(mg_connection* conn, int status, const char* content_type, absl::string_view body,
          const Headers& headers = {}) {
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", content_type, -1);
  std::string length = absl::StrCat(body.size());
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  for (const auto& [k, v] : headers) mg_response_header_add(conn, k.c_str(), v.c_str(), -1);
  mg_response_header_send(conn);
  size_t sent = 0;
  while (sent < body.size()) {
    int n = mg_write(conn, body.data() + sent, body.size() - sent);
    if (n <= 0) break;  // the client went away
    sent += static_cast<size_t>(n);
  }
}

// Reads the whole body (at most `limit` bytes). 413 / 400 as an HTTP
// status when it is too large or shorter than its Content-Length.
absl::StatusOr<std::string> ReadBody(mg_connection* conn, int64_t limit, int* http_status) {
  const mg_request_info* info = mg_get_request_info(conn);
  std::string body;
  if (info->content_length > limit) {
    *http_status = 413;
    return absl::ResourceExhaustedError(absl::StrCat(
        "the body has ", info->content_length, " bytes, above --http-max-body-bytes ", limit));
  }
  if (info->content_length >= 0) {
    body.resize(static_cast<size_t>(info->content_length));
    size_t got = 0;
    while (got < body.size()) {
      int n = mg_read(conn, body.data() + got, body.size() - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got < body.size()) {
      *http_status = 400;
      return absl::InvalidArgumentError(
          absl::StrCat("the body ended after ", got, " of ", body.size(), " bytes"));
    }
    return body;
  }
  // No Content-Length: a chunked body (civetweb decodes it), read up to the
  // limit. The buffer is on the heap: civetweb's worker stacks are small
  // (a 64 KiB array overflowed one under AddressSanitizer).
  std::vector<char> buf(65536);
  while (true) {
    int n = mg_read(conn, buf.data(), buf.size());
    if (n <= 0) break;
    if (static_cast<int64_t>(body.size()) + n > limit) {
      *http_status = 413;
      return absl::ResourceExhaustedError(
          absl::StrCat("the body is larger than --http-max-body-bytes ", limit));
    }
    body.append(buf.data(), static_cast<size_t>(n));
  }
  return body;
}

std::optional<absl::string_view> Header(mg_connection* conn, const char* name) {
  const char* v = mg_get_header(conn, name);
  if (v == nullptr) return std::nullopt;
  return absl::string_view(v);
}

}  // namespace

HttpRoute RouteOf(absl::string_view method, absl::string_view path) {
  HttpRoute r;
  std::vector<absl::string_view> seg = absl::StrSplit(path, '/', absl::SkipEmpty());
  auto want = [&](const char* m, const char* op) {
    r.allow = m;
    if (method == m) {
      r.op = op;
    } else {
      r.http_status = 405;
    }
    return r;
  };
  r.http_status = 404;
  if (seg.empty() || seg[0] != "v2") return r;
  r.http_status = 0;
  size_t n = seg.size();
  if (n == 1) return want("GET", "ServerMetadata");
  if (seg[1] == "health" && n == 3) {
    if (seg[2] == "live") return want("GET", "ServerLive");
    if (seg[2] == "ready") return want("GET", "ServerReady");
  }
  if (seg[1] == "models" && n == 3 && seg[2] == "stats") return want("GET", "ModelStatistics");
  if (seg[1] == "models" && n >= 3) {
    r.model = std::string(seg[2]);
    size_t i = 3;
    if (n >= 5 && seg[3] == "versions") {
      r.version = std::string(seg[4]);
      i = 5;
    }
    if (i == n) return want("GET", "ModelMetadata");
    if (i + 1 == n) {
      if (seg[i] == "ready") return want("GET", "ModelReady");
      if (seg[i] == "config") return want("GET", "ModelConfig");
      if (seg[i] == "stats") return want("GET", "ModelStatistics");
      if (seg[i] == "infer") return want("POST", "ModelInfer");
    }
  }
  if (seg[1] == "repository") {
    if (n == 3 && seg[2] == "index") return want("POST", "RepositoryIndex");
    if (n == 5 && seg[2] == "models") {
      r.model = std::string(seg[3]);
      if (seg[4] == "load") return want("POST", "RepositoryModelLoad");
      if (seg[4] == "unload") return want("POST", "RepositoryModelUnload");
    }
  }
  if (seg[1] == "systemsharedmemory") {
    size_t i = 2;
    if (n >= 4 && seg[2] == "region") {
      r.region = std::string(seg[3]);
      i = 4;
    }
    if (i + 1 == n) {
      if (seg[i] == "status") {
        // GET as Triton's protocol; POST as Triton's own client sends it.
        if (method == "POST") return want("POST", "SystemSharedMemoryStatus");
        return want("GET", "SystemSharedMemoryStatus");
      }
      if (seg[i] == "unregister") return want("POST", "SystemSharedMemoryUnregister");
      if (seg[i] == "register" && i == 4) return want("POST", "SystemSharedMemoryRegister");
    }
  }
  HttpRoute none;
  none.http_status = 404;
  return none;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              InferenceCore* core,
                                                              Metrics* metrics) {
  if (options.num_threads < 1 || options.num_threads > 1024)
    return absl::InvalidArgumentError("--http-threads must be in [1, 1024]");
  if (options.max_body_bytes < 1) return absl::InvalidArgumentError("--http-max-body-bytes < 1");
  if (options.max_json_bytes < 1) return absl::InvalidArgumentError("--http-max-json-bytes < 1");
  if (options.tls_cert_pem.empty() != options.tls_key_pem.empty())
    return absl::InvalidArgumentError("--tls-cert and --tls-key must be given together");
  const bool tls = !options.tls_cert_pem.empty();
  if (tls) {
    if (absl::Status s = CheckServerTls(options.tls_cert_pem, options.tls_key_pem); !s.ok())
      return s;
    if (absl::Status s = EnableCivetwebTls(); !s.ok())
      return absl::FailedPreconditionError(
          absl::StrCat("the HTTP/REST port cannot serve HTTPS: ", s.message()));
  }
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->options_ = options;
  s->core_ = core;
  s->metrics_ = metrics;
  std::string where = absl::StrCat(options.address, ":", options.port);
  std::vector<std::string> opts = {
      "listening_ports",       absl::StrCat(where, tls ? "s" : ""),  // "s": TLS only
      "num_threads",           absl::StrCat(options.num_threads),
      "request_timeout_ms",    absl::StrCat(absl::ToInt64Milliseconds(options.request_timeout)),
      "keep_alive_timeout_ms", absl::StrCat(absl::ToInt64Milliseconds(options.keep_alive_timeout)),
      "enable_keep_alive",     "yes",
      "tcp_nodelay",           "1",
  };
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  argv.push_back(nullptr);
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };  // quiet
  if (tls) callbacks.init_ssl = &HttpServer::InitTls;  // the certificate, from memory
  char error[256] = "";
  mg_init_data init;
  std::memset(&init, 0, sizeof(init));
  init.callbacks = &callbacks;
  init.user_data = s.get();
  init.configuration_options = argv.data();
  mg_error_data err;
  std::memset(&err, 0, sizeof(err));
  err.text = error;
  err.text_buffer_size = sizeof(error);
  s->ctx_ = mg_start2(&init, &err);
  if (s->ctx_ == nullptr)
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", where, ": ", error));
  mg_set_request_handler(s->ctx_, "/", &HttpServer::Handle, s.get());
  mg_server_port ports[4];
  int n = mg_get_server_ports(s->ctx_, 4, ports);
  s->port_ = n > 0 ? ports[0].port : options.port;
  return s;
}

// civetweb's init_ssl: 1 = the context is set up, -1 = fail the start.
int HttpServer::InitTls(void* ssl_ctx, void* self) {
  const HttpServerOptions& o = static_cast<HttpServer*>(self)->options_;
  return ConfigureServerTls(ssl_ctx, o.tls_cert_pem, o.tls_key_pem).ok() ? 1 : -1;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  abort_ = true;
  if (ctx_) mg_stop(ctx_);
  ctx_ = nullptr;
}

int HttpServer::Handle(mg_connection* conn, void* self) {
  // Nothing may throw into civetweb's C code.
  try {
    return static_cast<HttpServer*>(self)->Serve(conn);
  } catch (const std::bad_alloc&) {
    Send(conn, 500, kJson, ErrorJson("out of memory"));
  } catch (const std::exception& e) {
    Send(conn, 500, kJson, ErrorJson(absl::StrCat("internal error: ", e.what())));
  } catch (...) {
    Send(conn, 500, kJson, ErrorJson("internal error"));
  }
  mg_disable_connection_keep_alive(conn);
  return 500;
}

int HttpServer::Serve(mg_connection* conn) {
  InferenceCore::ActiveCall active(core_);
  const mg_request_info* info = mg_get_request_info(conn);
  const absl::string_view method = info->request_method ? info->request_method : "";
  const char* uri = info->local_uri ? info->local_uri : "";
  HttpRoute route = RouteOf(method, uri);
  auto count = [&](int http) {
    if (metrics_) metrics_->CountHttp(route.op.empty() ? "other" : route.op, http);
    return http;
  };
  auto fail = [&](int http, const absl::Status& s, const Headers& headers = {}) {
    Send(conn, http, kJson, ErrorJson(ErrorMessageOf(s)), headers);
    return count(http);
  };
  auto error = [&](const absl::Status& s) { return fail(HttpStatusOf(s.code()), s); };
  auto reply = [&](int http, const std::string& json) {
    Send(conn, http, kJson, json);
    return count(http);
  };
  if (route.http_status != 0) {
    if (info->content_length != 0) mg_disable_connection_keep_alive(conn);
    if (route.http_status == 405)
      return fail(
          405,
          absl::InvalidArgumentError(absl::StrCat(method.substr(0, 16), " is not allowed on ",
                                                  Echo(uri), " (", route.allow, " is)")),
          {{"Allow", route.allow}});
    return fail(404, absl::NotFoundError(absl::StrCat("no such endpoint: ", Echo(uri))));
  }
  const std::string& op = route.op;
  if (op != "ServerLive" && op != "ServerReady") {
    if (absl::Status a = core_->Authorize(Header(conn, "Authorization")); !a.ok()) {
      if (info->content_length != 0) mg_disable_connection_keep_alive(conn);
      return fail(401, a, {{"WWW-Authenticate", "Bearer realm=\"kiln\""}});
    }
  }
  int body_status = 0;
  absl::StatusOr<std::string> body = ReadBody(conn, options_.max_body_bytes, &body_status);
  if (!body.ok()) {
    mg_disable_connection_keep_alive(conn);
    return fail(body_status, body.status());
  }
  // The JSON part is bounded on its own: parsed, it takes many times its size.
  if (op != "ModelInfer" && static_cast<int64_t>(body->size()) > options_.max_json_bytes)
    return fail(413, absl::ResourceExhaustedError(absl::StrCat(
                         "the JSON body has ", body->size(), " bytes, above --http-max-json-bytes ",
                         options_.max_json_bytes)));
  // Health: the status code is the answer (200 yes, 400 no), as Triton.
  if (op == "ServerLive") return reply(core_->Live() ? 200 : 400, "");
  if (op == "ServerReady") return reply(core_->Ready() ? 200 : 400, "");
  if (op == "ModelReady") {
    absl::StatusOr<bool> ready = core_->ModelReady(route.model, route.version);
    if (!ready.ok()) return error(ready.status());
    return reply(*ready ? 200 : 400, "");
  }
  if (op == "ServerMetadata") {
    inference::ServerMetadataResponse resp;
    core_->ServerMetadata(&resp);
    return reply(200, MessageToJson(resp));
  }
  if (op == "ModelMetadata") {
    inference::ModelMetadataResponse resp;
    if (absl::Status s = core_->ModelMetadata(route.model, route.version, &resp); !s.ok())
      return error(s);
    return reply(200, MessageToJson(resp));
  }
  if (op == "ModelConfig") {
    inference::ModelConfigResponse resp;
    if (absl::Status s = core_->ModelConfig(route.model, route.version, &resp); !s.ok())
      return error(s);
    return reply(200, MessageToJson(resp.config()));
  }
  if (op == "ModelStatistics") {
    inference::ModelStatisticsResponse resp;
    if (absl::Status s = core_->ModelStatistics(route.model, route.version, &resp); !s.ok())
      return error(s);
    return reply(200, MessageToJson(resp));
  }
  if (op == "RepositoryIndex") {
    absl::StatusOr<bool> ready = ParseIndexRequest(*body);
    if (!ready.ok()) return error(ready.status());
    inference::RepositoryIndexResponse resp;
    core_->RepositoryIndex(*ready, &resp);
    return reply(200, RepositoryIndexJson(resp));
  }
  if (op == "RepositoryModelLoad") {
    inference::RepositoryModelLoadRequest req;
    req.set_model_name(route.model);
    if (absl::Status s = ParseRepositoryParameters(*body, req.mutable_parameters()); !s.ok())
      return error(s);
    if (absl::Status s = core_->Load(req); !s.ok()) return error(s);
    return reply(200, "");
  }
  if (op == "RepositoryModelUnload") {
    inference::RepositoryModelUnloadRequest req;
    if (absl::Status s = ParseRepositoryParameters(*body, req.mutable_parameters()); !s.ok())
      return error(s);
    if (absl::Status s = core_->Unload(route.model); !s.ok()) return error(s);
    return reply(200, "");
  }
  if (op == "SystemSharedMemoryStatus") {
    inference::SystemSharedMemoryStatusResponse resp;
    if (absl::Status s = core_->ShmStatus(route.region, &resp); !s.ok()) return error(s);
    return reply(200, ShmStatusJson(resp));
  }
  if (op == "SystemSharedMemoryRegister") {
    auto req = ParseShmRegisterRequest(*body, route.region);
    if (!req.ok()) return error(req.status());
    if (absl::Status s = core_->ShmRegister(*req); !s.ok()) return error(s);
    return reply(200, "");
  }
  if (op == "SystemSharedMemoryUnregister") {
    if (absl::Status s = core_->ShmUnregister(route.region); !s.ok()) return error(s);
    return reply(200, "");
  }
  // ModelInfer.
  std::optional<uint64_t> header_length;
  if (auto h = Header(conn, "Inference-Header-Content-Length")) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(*h, &v))
      return error(absl::InvalidArgumentError(absl::StrCat(
          "Inference-Header-Content-Length '", Echo(*h), "' is not a non-negative integer")));
    header_length = v;
  }
  const uint64_t json_bytes = header_length ? *header_length : body->size();
  if (json_bytes > static_cast<uint64_t>(options_.max_json_bytes))
    return fail(413, absl::ResourceExhaustedError(absl::StrCat(
                         "the request's JSON has ", json_bytes,
                         " bytes, above --http-max-json-bytes ", options_.max_json_bytes,
                         "; send large tensors as binary data (binary_data_size)")));
  absl::StatusOr<RestInferRequest> req =
      ParseInferRequest(*body, header_length, route.model, route.version);
  std::string().swap(*body);  // the request holds its own copy of the data
  if (!req.ok()) return error(req.status());
  inference::ModelInferResponse resp;
  absl::Status s = core_->Infer(
      req->request, [this] { return abort_.load(); }, &resp);
  if (!s.ok()) return error(s);
  absl::StatusOr<RestBody> out = EncodeInferResponse(resp, *req);
  if (!out.ok()) return error(out.status());
  if (out->header_length) {
    Send(conn, 200, "application/octet-stream", out->body,
         {{"Inference-Header-Content-Length", absl::StrCat(*out->header_length)}});
  } else {
    Send(conn, 200, kJson, out->body);
  }
  return count(200);
}

}  // namespace kiln

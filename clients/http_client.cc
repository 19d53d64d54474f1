// HttpClient's transport: libcurl's easy interface, one handle (and so one
// kept-alive connection) per HttpClient. The wire format (JSON header +
// binary data) is in http_infer_codec.cc.
#include "clients/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"
#include <nlohmann/json.hpp>

namespace kiln {
namespace {

// libcurl's process-wide setup, once, before the first handle (curl's
// documentation asks for it before any other thread uses libcurl). Never
// undone: handles may live until exit.
absl::Status InitCurlOnce() {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (rc != CURLE_OK)
    return absl::InternalError(absl::StrCat("libcurl init failed: ", curl_easy_strerror(rc)));
  return absl::OkStatus();
}

// Where a response body goes: appended up to `max` bytes.
struct Sink {
  std::string* out;
  int64_t max;
  bool too_large = false;
};

size_t WriteBody(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t bytes = size * n;
  if (static_cast<int64_t>(sink->out->size() + bytes) > sink->max) {
    sink->too_large = true;
    return 0;  // makes curl fail the transfer with CURLE_WRITE_ERROR
  }
  sink->out->append(data, bytes);
  return bytes;
}

absl::Status CurlStatus(CURLcode rc, const char* detail, const Sink& sink, int64_t max,
                        absl::string_view what) {
  std::string msg = absl::StrCat(what, ": ", curl_easy_strerror(rc));
  if (detail[0] != '\0') absl::StrAppend(&msg, " (", detail, ")");
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
      return absl::DeadlineExceededError(msg);
    case CURLE_WRITE_ERROR:
      if (sink.too_large)
        return absl::ResourceExhaustedError(
            absl::StrCat(what, ": the response is larger than ", max, " bytes"));
      return absl::InternalError(msg);
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return absl::InvalidArgumentError(msg);
    default:
      // Connection refused / reset, unresolvable host, TLS failures, ...
      return absl::UnavailableError(msg);
  }
}

template <typename T>
absl::StatusOr<T> ParseJsonMessage(const std::string& json, absl::string_view what) {
  T message;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto s = google::protobuf::util::JsonStringToMessage(json, &message, options);
  if (!s.ok())
    return absl::DataLossError(absl::StrCat(what, ": the response is not the expected JSON: ",
                                            std::string(s.message())));
  return message;
}

}  // namespace

struct HttpClient::Reply {
  long status = 0;
  std::optional<uint64_t> header_length;  // Inference-Header-Content-Length
};

absl::StatusOr<std::string> HttpBaseUrl(const std::string& url, bool tls) {
  std::string u(absl::StripAsciiWhitespace(url));
  if (u.empty()) return absl::InvalidArgumentError("empty HTTP address");
  for (char c : u)
    if (static_cast<unsigned char>(c) <= ' ' || c == '?' || c == '#' || c == '\x7f')
      return absl::InvalidArgumentError(
          absl::StrCat("HTTP address '", u, "' has a space, control character, query or fragment"));
  std::string scheme = tls ? "https" : "http";
  size_t sep = u.find("://");
  if (sep != std::string::npos) {
    std::string given = absl::AsciiStrToLower(u.substr(0, sep));
    if (given != "http" && given != "https")
      return absl::InvalidArgumentError(
          absl::StrCat("HTTP address '", u, "': the scheme must be http:// or https://"));
    if (tls && given == "http")
      return absl::InvalidArgumentError(
          absl::StrCat("HTTP address '", u, "' is http:// but TLS was asked for"));
    scheme = given;
    u = u.substr(sep + 3);
  }
  while (!u.empty() && u.back() == '/') u.pop_back();
  if (u.empty() || u.front() == '/')
    return absl::InvalidArgumentError(absl::StrCat("HTTP address '", url, "' has no host"));
  return absl::StrCat(scheme, "://", u);
}

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Create(const HttpClientOptions& options) {
  if (options.timeout <= absl::ZeroDuration())
    return absl::InvalidArgumentError("HTTP client: the timeout must be positive");
  if (options.max_response_bytes <= 0)
    return absl::InvalidArgumentError("HTTP client: max_response_bytes must be positive");
  // A newline in the token would end the header (and start another).
  for (char ch : options.auth_token)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
      return absl::InvalidArgumentError(
          "the auth token contains a control character (a newline?); pass the token alone");
  auto base = HttpBaseUrl(options.url, options.tls);
  if (!base.ok()) return base.status();
  if (absl::Status s = InitCurlOnce(); !s.ok()) return s;
  std::unique_ptr<HttpClient> client(new HttpClient());
  client->options_ = options;
  client->base_ = *base;
  CURL* c = curl_easy_init();
  if (c == nullptr) return absl::InternalError("curl_easy_init failed");
  client->curl_ = c;
  // Workers are threads: no signals (no SIGALRM for name lookups).
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(options.timeout));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(std::min<int64_t>(ms, LONG_MAX)));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &WriteBody);
  if (!options.ca_cert_file.empty())
    curl_easy_setopt(c, CURLOPT_CAINFO, options.ca_cert_file.c_str());
  return client;
}

HttpClient::~HttpClient() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

std::string HttpClient::Escape(const std::string& s) {
  char* e = curl_easy_escape(static_cast<CURL*>(curl_), s.data(), static_cast<int>(s.size()));
  std::string out = e ? e : "";
  curl_free(e);
  return out;
}

std::string HttpClient::ModelPath(const std::string& model, const std::string& version) {
  std::string path = absl::StrCat(base_, "/v2/models/", Escape(model));
  if (!version.empty()) absl::StrAppend(&path, "/versions/", Escape(version));
  return path;
}

absl::Status HttpClient::Perform(const std::string& url, const HttpInferBody* post,
                                 Reply* reply) {
  CURL* c = static_cast<CURL*>(curl_);
  response_.clear();
  Sink sink{&response_, options_.max_response_bytes};
  char error[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  // No "Expect: 100-continue" round trip before large bodies.
  headers = curl_slist_append(headers, "Expect:");
  if (!options_.auth_token.empty())
    headers = curl_slist_append(
        headers, absl::StrCat("Authorization: Bearer ", options_.auth_token).c_str());
  if (post != nullptr) {
    const bool binary = post->header_length < post->body.size();
    headers = curl_slist_append(
        headers, binary ? "Content-Type: application/octet-stream" : "Content-Type: application/json");
    if (binary)
      headers = curl_slist_append(
          headers,
          absl::StrCat("Inference-Header-Content-Length: ", post->header_length).c_str());
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, post->body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(post->body.size()));
  } else {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  CURLcode rc = curl_easy_perform(c);
  // The handle must not keep pointers to what dies here.
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, nullptr);
  if (post != nullptr) curl_easy_setopt(c, CURLOPT_POSTFIELDS, nullptr);
  curl_slist_free_all(headers);
  const std::string what = absl::StrCat(post ? "POST " : "GET ", url);
  if (rc != CURLE_OK) return CurlStatus(rc, error, sink, options_.max_response_bytes, what);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply->status);
  reply->header_length.reset();
  curl_header* h = nullptr;
  if (curl_easy_header(c, "Inference-Header-Content-Length", 0, CURLH_HEADER, -1, &h) ==
      CURLHE_OK) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(h->value, &v))
      return absl::DataLossError(absl::StrCat(what, ": bad Inference-Header-Content-Length '",
                                              std::string(h->value).substr(0, 64), "'"));
    reply->header_length = v;
  }
  if (reply->status != 200) return HttpErrorStatus(reply->status, response_, what);
  return absl::OkStatus();
}

absl::StatusOr<std::string> HttpClient::GetJson(const std::string& url) {
  Reply reply;
  if (absl::Status s = Perform(url, nullptr, &reply); !s.ok()) return s;
  return response_;
}

absl::StatusOr<inference::ModelMetadataResponse> HttpClient::ModelMetadata(
    const std::string& model, const std::string& version) {
  std::string url = ModelPath(model, version);
  auto body = GetJson(url);
  if (!body.ok()) return body.status();
  return ParseJsonMessage<inference::ModelMetadataResponse>(*body, "GET " + url);
}

absl::StatusOr<inference::ModelConfigResponse> HttpClient::ModelConfig(
    const std::string& model, const std::string& version) {
  std::string url = ModelPath(model, version) + "/config";
  auto body = GetJson(url);
  if (!body.ok()) return body.status();
  auto config = ParseJsonMessage<inference::ModelConfig>(*body, "GET " + url);
  if (!config.ok()) return config.status();
  inference::ModelConfigResponse resp;
  *resp.mutable_config() = std::move(*config);
  return resp;
}

absl::StatusOr<inference::ModelStatisticsResponse> HttpClient::ModelStatistics(
    const std::string& model, const std::string& version) {
  std::string url =
      model.empty() ? base_ + "/v2/models/stats" : ModelPath(model, version) + "/stats";
  auto body = GetJson(url);
  if (!body.ok()) return body.status();
  return ParseJsonMessage<inference::ModelStatisticsResponse>(*body, "GET " + url);
}

absl::Status HttpClient::Infer(const HttpInferBody& body, inference::ModelInferResponse* response) {
  std::string url = ModelPath(body.model, body.version) + "/infer";
  Reply reply;
  if (absl::Status s = Perform(url, &body, &reply); !s.ok()) return s;
  absl::Status s = DecodeBinaryInferResponse(response_, reply.header_length, response);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("POST ", url, ": ", s.message()));
  return absl::OkStatus();
}

absl::Status HttpClient::PostJson(const std::string& url, std::string json) {
  HttpInferBody post;
  post.body = std::move(json);
  post.header_length = post.body.size();  // all JSON: Content-Type application/json
  Reply reply;
  return Perform(url, &post, &reply);
}

absl::Status HttpClient::RegisterSystemSharedMemory(const std::string& name,
                                                    const std::string& key, uint64_t byte_size,
                                                    uint64_t offset) {
  nlohmann::json j = {{"key", key}, {"offset", offset}, {"byte_size", byte_size}};
  return PostJson(
      absl::StrCat(base_, "/v2/systemsharedmemory/region/", Escape(name), "/register"),
      j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

absl::Status HttpClient::UnregisterSystemSharedMemory(const std::string& name) {
  std::string url = base_ + "/v2/systemsharedmemory";
  if (!name.empty()) absl::StrAppend(&url, "/region/", Escape(name));
  return PostJson(url + "/unregister", "");
}

}  // namespace kiln

// HttpClient: a KServe v2 HTTP/REST client (Open Inference Protocol REST
// with Triton's binary tensor data extension) on libcurl, for kilnd's
// `--http-port` or any v2 REST server.
//
//   ASSIGN_OR_RETURN(auto http, HttpClient::Create({.url = "localhost:8000"}));
//   ASSIGN_OR_RETURN(HttpInferBody body, EncodeBinaryInferRequest(request));
//   RETURN_IF_ERROR(http->Infer(body, &response));
//
// Metadata, config and statistics come back as the same protobuf messages
// the gRPC API answers (the server's JSON parsed with protobuf's JSON
// parser), so callers do not care which transport they use. Infer sends
// every input as binary data (`Inference-Header-Content-Length`, per-input
// `binary_data_size`) and asks for every output as binary data
// (`binary_data_output`, or `binary_data` per requested output); outputs
// come back in raw_output_contents.
//
// Errors: connection failures (refused, unresolvable, TLS) are UNAVAILABLE,
// a timeout DEADLINE_EXCEEDED, an HTTP status other than 200 the absl code
// of kilnd's status table (server/status_codes.cc, read backwards) with the
// server's JSON `error` message; a malformed response is DATA_LOSS.
//
// One HttpClient is one keep-alive connection (a curl easy handle that is
// reused, so consecutive calls share the TCP connection).
//
// Thread safety: an HttpClient is thread-compatible: one thread at a time
// (give each thread its own). Create may be called from any thread. The
// free functions are pure.
#ifndef KILN_CLIENTS_HTTP_CLIENT_H_
#define KILN_CLIENTS_HTTP_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/grpc_service.pb.h"

namespace kiln {

struct HttpClientOptions {
  // host:port, or a URL with scheme http:// or https:// (and an optional
  // path prefix). Without a scheme: http://, or https:// when `tls`.
  std::string url = "localhost:8000";
  bool tls = false;
  std::string ca_cert_file;  // PEM roots for https (empty: system roots)
  std::string auth_token;    // sent as "Authorization: Bearer <token>"
  absl::Duration timeout = absl::Seconds(60);  // per call
  int64_t max_response_bytes = int64_t{256} << 20;
};

// An infer request body ready to send: `header_length` bytes of JSON, then
// the binary data of every input in input order.
struct HttpInferBody {
  std::string model, version;
  std::string body;
  size_t header_length = 0;
};

class HttpClient {
 public:
  // INVALID_ARGUMENT for a bad URL or options. Does not connect yet.
  static absl::StatusOr<std::unique_ptr<HttpClient>> Create(const HttpClientOptions& options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // GET v2/health/ready: true on 200, false on 400 (not ready).
  absl::StatusOr<bool> ServerReady();
  // GET v2/models/M[/versions/V]
  absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(const std::string& model,
                                                                 const std::string& version = "");
  // GET v2/models/M[/versions/V]/config (the config itself is the body).
  absl::StatusOr<inference::ModelConfigResponse> ModelConfig(const std::string& model,
                                                             const std::string& version = "");
  // GET v2/models/M[/versions/V]/stats, or v2/models/stats for all models.
  absl::StatusOr<inference::ModelStatisticsResponse> ModelStatistics(
      const std::string& model = "", const std::string& version = "");
  // POST v2/models/M[/versions/V]/infer with a prepared body.
  absl::Status Infer(const HttpInferBody& body, inference::ModelInferResponse* response);
  // System shared memory (Triton's extension): POST
  // v2/systemsharedmemory/region/NAME/register with {"key", "offset",
  // "byte_size"}; POST v2/systemsharedmemory[/region/NAME]/unregister (name
  // empty: every region).
  absl::Status RegisterSystemSharedMemory(const std::string& name, const std::string& key,
                                          uint64_t byte_size, uint64_t offset = 0);
  absl::Status UnregisterSystemSharedMemory(const std::string& name = "");

  // The base URL requests go to (scheme://host:port[/prefix]).
  const std::string& base_url() const { return base_; }

 private:
  struct Reply;
  HttpClient() = default;
  std::string ModelPath(const std::string& model, const std::string& version);
  std::string Escape(const std::string& s);
  // POST `json` to `url`; the answer's body is ignored.
  absl::Status PostJson(const std::string& url, std::string json);
  // One request on the kept-alive handle; `post` null for GET.
  absl::Status Perform(const std::string& url, const HttpInferBody* post, Reply* reply);
  absl::StatusOr<std::string> GetJson(const std::string& path);

  HttpClientOptions options_;
  std::string base_;
  void* curl_ = nullptr;  // CURL*
  std::string response_;  // reused across calls (keeps its capacity)
};

// Splits host:port / URL into the base URL (INVALID_ARGUMENT when it is
// empty, has another scheme, a query or a fragment).
absl::StatusOr<std::string> HttpBaseUrl(const std::string& url, bool tls);

// Encodes `request` for the binary extension. Every input must travel in
// raw_input_contents (INVALID_ARGUMENT otherwise) unless it names a
// shared-memory region (parameter "shared_memory_region": then it has no
// raw entry, or an empty one when every input has an entry, and no
// binary_data_size); requested outputs get "binary_data": true unless they
// go to shared memory, no requested outputs "binary_data_output": true.
absl::StatusOr<HttpInferBody> EncodeBinaryInferRequest(const inference::ModelInferRequest& request);

// Decodes an infer response body: `header_length` from the response's
// Inference-Header-Content-Length (nullopt: the body is all JSON). Only
// binary outputs and outputs written to shared memory (their parameters
// name the region; an empty raw_output_contents entry) are supported (an
// output sent as JSON `data` is UNIMPLEMENTED); DATA_LOSS for malformed
// JSON or sizes that do not add up.
absl::Status DecodeBinaryInferResponse(absl::string_view body,
                                       std::optional<uint64_t> header_length,
                                       inference::ModelInferResponse* response);

// The status for an HTTP error answer: the code from the HTTP status (the
// inverse of kilnd's table), the message from the body's JSON `error` (or
// the body's text), prefixed with `what` (e.g. "GET http://...").
absl::Status HttpErrorStatus(long http_status, absl::string_view body, absl::string_view what);

}  // namespace kiln

#endif  // KILN_CLIENTS_HTTP_CLIENT_H_

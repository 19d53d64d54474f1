// A minimal HTTP/1.0 GET for tests (metrics scrapes, Prometheus' API):
// connects to 127.0.0.1:port, sends the request and returns the body.
// Thread safety: pure function.
#ifndef KILN_SERVER_TESTING_HTTP_GET_H_
#define KILN_SERVER_TESTING_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"

namespace kiln::testing {

// `path` includes the query string. Fails on a non-200 status.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);
// The same to `host` (an IPv4 address) with extra header lines
// ("Authorization: Bearer x\r\n").
absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path,
                                    const std::string& headers);

// Sends `request` (raw bytes: request line, headers, body) on a new
// connection to 127.0.0.1:port and returns everything the server sends
// until it closes the connection or 10 s pass ("connect failed" when it
// cannot connect).
std::string HttpExchange(int port, const std::string& request);

// A connection to 127.0.0.1:port that sent half of a GET request and then
// waits, as a slow or hostile client does; closed when destroyed.
class HalfSentRequest {
 public:
  explicit HalfSentRequest(int port);
  ~HalfSentRequest();
  HalfSentRequest(const HalfSentRequest&) = delete;
  HalfSentRequest& operator=(const HalfSentRequest&) = delete;
  bool connected() const { return connected_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace kiln::testing

#endif  // KILN_SERVER_TESTING_HTTP_GET_H_

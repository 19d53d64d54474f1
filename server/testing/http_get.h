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

}  // namespace kiln::testing

#endif  // KILN_SERVER_TESTING_HTTP_GET_H_

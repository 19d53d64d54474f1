// The one table of kiln's status codes: each absl::StatusCode with its name
// (the gRPC code's, which has the same number, so gRPC sends the code as
// is) and the HTTP status the REST port answers with. The HTTP statuses
// are those of Google's API design guide and grpc-gateway (google.rpc.Code
// -> HTTP), so a REST client sees what a gRPC-transcoding proxy would
// show. Error messages are bounded the same way for both transports.
//
// Thread safety: pure functions over constant data.
#ifndef KILN_SERVER_STATUS_CODES_H_
#define KILN_SERVER_STATUS_CODES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln {

struct StatusCodeRow {
  absl::StatusCode code;
  const char* name;  // "NOT_FOUND"
  int http_status;   // 404
};

// Every absl::StatusCode, in code order (OK first).
const StatusCodeRow* StatusCodeTable(int* size);

// The row of `code`; a code outside the table gets UNKNOWN's row.
const StatusCodeRow& StatusCodeRowOf(absl::StatusCode code);
inline const char* StatusCodeName(absl::StatusCode code) { return StatusCodeRowOf(code).name; }
inline int HttpStatusOf(absl::StatusCode code) { return StatusCodeRowOf(code).http_status; }
// The failure reason label of a status: its code name in lower case.
std::string ReasonOf(const absl::Status& s);
// "Not Found" for 404 (the statuses kiln sends; "Unknown" otherwise).
const char* HttpReasonPhrase(int http_status);

// The longest error message kiln sends; longer ones are cut ("...(N bytes)").
inline constexpr size_t kMaxErrorMessageBytes = 4096;
// `s`'s message as a client receives it (cut to kMaxErrorMessageBytes).
std::string ErrorMessageOf(const absl::Status& s);

}  // namespace kiln

#endif  // KILN_SERVER_STATUS_CODES_H_

#include "server/status_codes.h"

#include <cctype>

#include "server/echo.h"

namespace kiln {
namespace {

using C = absl::StatusCode;

// CANCELLED -> 499 ("client closed request", nginx's and grpc-gateway's).
constexpr StatusCodeRow kTable[] = {
    {C::kOk, "OK", 200},
    {C::kCancelled, "CANCELLED", 499},
    {C::kUnknown, "UNKNOWN", 500},
    {C::kInvalidArgument, "INVALID_ARGUMENT", 400},
    {C::kDeadlineExceeded, "DEADLINE_EXCEEDED", 504},
    {C::kNotFound, "NOT_FOUND", 404},
    {C::kAlreadyExists, "ALREADY_EXISTS", 409},
    {C::kPermissionDenied, "PERMISSION_DENIED", 403},
    {C::kResourceExhausted, "RESOURCE_EXHAUSTED", 429},
    {C::kFailedPrecondition, "FAILED_PRECONDITION", 400},
    {C::kAborted, "ABORTED", 409},
    {C::kOutOfRange, "OUT_OF_RANGE", 400},
    {C::kUnimplemented, "UNIMPLEMENTED", 501},
    {C::kInternal, "INTERNAL", 500},
    {C::kUnavailable, "UNAVAILABLE", 503},
    {C::kDataLoss, "DATA_LOSS", 500},
    {C::kUnauthenticated, "UNAUTHENTICATED", 401},
};
constexpr int kTableSize = sizeof(kTable) / sizeof(kTable[0]);

}  // namespace

const StatusCodeRow* StatusCodeTable(int* size) {
  *size = kTableSize;
  return kTable;
}

const StatusCodeRow& StatusCodeRowOf(absl::StatusCode code) {
  int i = static_cast<int>(code);
  if (i >= 0 && i < kTableSize && kTable[i].code == code) return kTable[i];
  return kTable[static_cast<int>(C::kUnknown)];
}

std::string ReasonOf(const absl::Status& s) {
  std::string name = StatusCodeName(s.code());
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

const char* HttpReasonPhrase(int http_status) {
  switch (http_status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
  }
}

std::string ErrorMessageOf(const absl::Status& s) {
  // Names a request echoes are cut where they are formatted (Echo); this
  // bounds whatever else a message may carry.
  return Echo(s.message(), kMaxErrorMessageBytes);
}

}  // namespace kiln

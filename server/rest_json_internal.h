// Helpers shared by rest_json.cc and rest_json_messages.cc (not an API).
//
// Thread safety: pure functions.
#ifndef KILN_SERVER_REST_JSON_INTERNAL_H_
#define KILN_SERVER_REST_JSON_INTERNAL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace kiln::rest_internal {

// Objects keep their keys in insertion order (as the protocol lists them).
using Json = nlohmann::ordered_json;

inline absl::Status Bad(absl::string_view msg) { return absl::InvalidArgumentError(msg); }

// Compact JSON; invalid UTF-8 (echoed from a request) is replaced, not thrown.
inline std::string Dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A JSON value's kind as an error names it.
inline const char* KindOf(const Json& j) { return j.type_name(); }

// Parses `text` without exceptions escaping; INVALID_ARGUMENT with the
// parser's position for malformed JSON.
inline absl::StatusOr<Json> Parse(absl::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return j;
  // Parse again for the position of the error (only for a bad body).
  try {
    Json again = Json::parse(text.begin(), text.end());
    (void)again;
  } catch (const Json::parse_error& e) {
    return Bad(absl::StrCat("malformed JSON: ", e.what()));
  } catch (const Json::exception& e) {
    return Bad(absl::StrCat("malformed JSON: ", e.what()));
  }
  return Bad("malformed JSON");
}

}  // namespace kiln::rest_internal

#endif  // KILN_SERVER_REST_JSON_INTERNAL_H_

// Echo: text that came from a request (a model, version, input, output or
// parameter name, a datatype, a shape) as error messages repeat it. A
// client controls its length, so an error message carries at most
// kMaxEchoBytes of it: longer text is cut (at a UTF-8 character boundary)
// and marked "...(N bytes)" with its full length.
//
// Thread safety: pure functions.
#ifndef KILN_SERVER_ECHO_H_
#define KILN_SERVER_ECHO_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace kiln {

inline constexpr size_t kMaxEchoBytes = 128;

// `text` itself when it has at most `max_bytes` bytes, else its first
// bytes followed by "...(N bytes)".
std::string Echo(absl::string_view text, size_t max_bytes = kMaxEchoBytes);

}  // namespace kiln

#endif  // KILN_SERVER_ECHO_H_

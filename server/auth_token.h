// Bearer tokens of kilnd: where the token of the gRPC service comes from
// (--auth-token, --auth-token-file or $KILN_AUTH_TOKEN) and how token files
// are read. Authentication never fails open: a source that is given but
// holds no usable token (empty, whitespace or newlines only, more than one
// line, characters other than visible ASCII) is an error, never "no auth".
// A token file may end in a newline (echo > file, Kubernetes secrets).
//
// Thread safety: pure functions (they read files).
#ifndef KILN_SERVER_AUTH_TOKEN_H_
#define KILN_SERVER_AUTH_TOKEN_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln {

// The sources as given: nullopt / "" when not given.
struct AuthTokenSources {
  std::optional<std::string> flag;  // --auth-token, also when given as ""
  std::optional<std::string> file;  // --auth-token-file
  std::optional<std::string> env;   // $KILN_AUTH_TOKEN, also when set to ""
};

struct AuthToken {
  std::string token;    // empty: authentication off (no source given)
  std::string warning;  // non-empty: print it (the token is on the command line)
};

// The token from the one source given (--auth-token and --auth-token-file
// together are an error; either wins over $KILN_AUTH_TOKEN).
absl::StatusOr<AuthToken> ResolveAuthToken(const AuthTokenSources& sources);

// Reads the token in `path` (at most 4 KiB; surrounding whitespace such as
// a trailing newline is dropped). `what` names the flag in errors.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, absl::string_view what);

// OK when `token` (already trimmed) is usable as a bearer token.
absl::Status CheckToken(absl::string_view token, absl::string_view what);

}  // namespace kiln

#endif  // KILN_SERVER_AUTH_TOKEN_H_

#include "server/auth_token.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

constexpr size_t kMaxTokenFileBytes = 4096;

}  // namespace

absl::Status CheckToken(absl::string_view token, absl::string_view what) {
  if (token.empty())
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is empty (or only whitespace): refusing to start without authentication; "
              "give a token, or no auth option at all to run without authentication"));
  for (char c : token) {
    if (c == '\n' || c == '\r')
      return absl::InvalidArgumentError(absl::StrCat(what, " holds more than one line"));
    if (c < 0x21 || c > 0x7e)
      return absl::InvalidArgumentError(absl::StrCat(
          what, " holds a space, a control or a non-ASCII character (a bearer token is "
                "visible ASCII)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, absl::string_view what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return absl::NotFoundError(
        absl::StrCat("cannot read ", what, " ", path, ": ", std::strerror(errno)));
  std::string text;
  char buf[1024];
  while (text.size() <= kMaxTokenFileBytes) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return absl::NotFoundError(
          absl::StrCat("cannot read ", what, " ", path, ": ", std::strerror(err)));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (text.size() > kMaxTokenFileBytes)
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " is larger than ", kMaxTokenFileBytes, " bytes"));
  std::string token(absl::StripAsciiWhitespace(text));
  absl::Status s = CheckToken(token, absl::StrCat(what, " ", path));
  if (!s.ok()) return s;
  return token;
}

absl::StatusOr<AuthToken> ResolveAuthToken(const AuthTokenSources& sources) {
  AuthToken out;
  if (sources.flag && sources.file)
    return absl::InvalidArgumentError("give --auth-token or --auth-token-file, not both");
  if (sources.file) {
    absl::StatusOr<std::string> t = ReadTokenFile(*sources.file, "--auth-token-file");
    if (!t.ok()) return t.status();
    out.token = *t;
    return out;
  }
  if (sources.flag) {
    absl::Status s = CheckToken(*sources.flag, "--auth-token");
    if (!s.ok()) return s;
    out.token = *sources.flag;
    out.warning =
        "--auth-token puts the token on the command line, where every local user can read it "
        "(/proc/PID/cmdline, ps); use --auth-token-file=FILE or $KILN_AUTH_TOKEN instead";
    return out;
  }
  if (sources.env) {
    std::string token(absl::StripAsciiWhitespace(*sources.env));
    absl::Status s = CheckToken(token, "$KILN_AUTH_TOKEN");
    if (!s.ok()) return s;
    out.token = token;
  }
  return out;
}

}  // namespace kiln

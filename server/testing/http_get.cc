#include "server/testing/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"

namespace kiln::testing {
namespace {

// A TCP connection to `host` (IPv4) : port with 10 s send / receive timeouts.
absl::StatusOr<int> Connect(const std::string& host, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  struct timeval tv = {10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    ::close(fd);
    return absl::InvalidArgumentError("not an IPv4 address: " + host);
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to ", host, ":", port));
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  return HttpGet("127.0.0.1", port, path, "");
}

absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path,
                                    const std::string& headers) {
  ASSIGN_OR_RETURN(int fd, Connect(host, port));
  std::string req =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host, "\r\n", headers, "\r\n");
  if (::send(fd, req.data(), req.size(), 0) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return absl::UnavailableError("send failed");
  }
  std::string resp;
  char buf[65536];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    resp.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  size_t body = resp.find("\r\n\r\n");
  if (body == std::string::npos) return absl::DataLossError("no HTTP response");
  std::string status = resp.substr(0, resp.find("\r\n"));
  if (status.find(" 200") == std::string::npos)  // the body says why (a PromQL parse error)
    return absl::UnavailableError("HTTP: " + status + ": " + resp.substr(body + 4, 500));
  return resp.substr(body + 4);
}

std::string HttpExchange(int port, const std::string& request) {
  absl::StatusOr<int> fd = Connect("127.0.0.1", port);
  if (!fd.ok()) return "connect failed";
  (void)!::send(*fd, request.data(), request.size(), 0);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(*fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(*fd);
  return out;
}

HalfSentRequest::HalfSentRequest(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
  if (fd_ < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return;
  const std::string half = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  connected_ = ::send(fd_, half.data(), half.size(), 0) == static_cast<ssize_t>(half.size());
}

HalfSentRequest::~HalfSentRequest() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace kiln::testing

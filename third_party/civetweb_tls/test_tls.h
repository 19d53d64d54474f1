// Test helpers for TLS: a self-signed certificate made in memory, and an
// HTTPS client exchange built on OpenSSL. testonly.
#ifndef KILN_THIRD_PARTY_CIVETWEB_TLS_TEST_TLS_H_
#define KILN_THIRD_PARTY_CIVETWEB_TLS_TEST_TLS_H_

#include <string>

namespace kiln::testing {

struct TestCert {
  std::string cert_pem, key_pem;  // empty on failure
};
// An RSA-2048 certificate for CN=localhost with subjectAltName
// DNS:localhost and IP:127.0.0.1, valid for a day.
TestCert MakeSelfSignedCert();

// Connects to 127.0.0.1:port, verifies the server against `ca_pem` for the
// name "localhost", sends `request` and returns all the server sends until
// it closes or 10 s pass. On failure: "connect failed" or
// "tls failed: <OpenSSL's reason>".
std::string HttpsExchange(int port, const std::string& request, const std::string& ca_pem);

}  // namespace kiln::testing

#endif  // KILN_THIRD_PARTY_CIVETWEB_TLS_TEST_TLS_H_

// HTTPS on Debian 12's civetweb 1.15, which was built against OpenSSL 1.1
// and meets OpenSSL 3 at run time.
//
// civetweb loads OpenSSL itself: dlopen("libssl.so") / dlopen("libcrypto.so")
// and dlsym through a table of OpenSSL 1.1 names. Two things break:
//   - OpenSSL 3 has no SSL_get_peer_certificate (a macro for
//     SSL_get1_peer_certificate now); civetweb keeps the null pointer and
//     calls it on every HTTPS connection (SIGSEGV after the handshake);
//   - the unversioned names exist only with libssl-dev installed.
// EnableCivetwebTls loads two small objects built here (ssl_shim.c,
// crypto_shim.c; embedded in the binary, loaded from memory) whose sonames
// are "libssl.so" and "libcrypto.so" and which depend on libssl.so.3 /
// libcrypto.so.3. glibc's dlopen returns an already loaded object whose
// soname matches the name asked for, so civetweb gets the shims, and its
// dlsym finds SSL_get_peer_certificate in the shim and every other name in
// OpenSSL 3 (all 58 others are exported there: checked with nm).
//
// The server's certificate and key are set from PEM text through
// civetweb's init_ssl callback with the OpenSSL 3 this binary links
// (ConfigureServerTls), never through civetweb's file options.
#ifndef KILN_THIRD_PARTY_CIVETWEB_TLS_CIVETWEB_TLS_H_
#define KILN_THIRD_PARTY_CIVETWEB_TLS_CIVETWEB_TLS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln {

// Makes civetweb's TLS usable in this process (idempotent, thread-safe):
// loads the shims, checks that the objects civetweb will open resolve the
// names it needs, and initializes civetweb's TLS feature. FAILED_PRECONDITION
// naming the step that failed; civetweb is then never asked for TLS.
absl::Status EnableCivetwebTls();

// Sets up `ssl_ctx` (an SSL_CTX*) to serve with the certificate chain in
// `cert_pem` (leaf first) and the private key in `key_pem`, TLS 1.2 or newer.
// INVALID_ARGUMENT naming --tls-cert / --tls-key when the PEM text has no
// certificate or key, or the key does not belong to the certificate.
absl::Status ConfigureServerTls(void* ssl_ctx, absl::string_view cert_pem,
                                absl::string_view key_pem);

// ConfigureServerTls on a scratch context: checks the PEM text up front.
absl::Status CheckServerTls(absl::string_view cert_pem, absl::string_view key_pem);

}  // namespace kiln

#endif  // KILN_THIRD_PARTY_CIVETWEB_TLS_CIVETWEB_TLS_H_

#include "third_party/civetweb_tls/test_tls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>

namespace kiln::testing {
namespace {

std::string ToPem(int (*write)(BIO*, void*), void* what) {
  BIO* bio = BIO_new(BIO_s_mem());
  std::string out;
  if (write(bio, what) == 1) {
    char* data = nullptr;
    long n = BIO_get_mem_data(bio, &data);
    out.assign(data, static_cast<size_t>(n));
  }
  BIO_free(bio);
  return out;
}

std::string Reason() {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown";
  if (e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

}  // namespace

TestCert MakeSelfSignedCert() {
  TestCert out;
  EVP_PKEY* key = EVP_RSA_gen(2048);
  X509* x = X509_new();
  bool ok = key != nullptr && x != nullptr;
  if (ok) {
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
    X509_set_pubkey(x, key);
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
    X509_set_issuer_name(x, name);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, nullptr, nullptr, 0);
    X509_EXTENSION* san = X509V3_EXT_conf_nid(nullptr, &v3, NID_subject_alt_name,
                                              "DNS:localhost,IP:127.0.0.1");
    ok = san != nullptr && X509_add_ext(x, san, -1) == 1;
    X509_EXTENSION_free(san);
    ok = ok && X509_sign(x, key, EVP_sha256()) > 0;
  }
  if (ok) {
    out.cert_pem = ToPem([](BIO* b, void* c) { return PEM_write_bio_X509(b, static_cast<X509*>(c)); }, x);
    out.key_pem = ToPem(
        [](BIO* b, void* k) {
          return PEM_write_bio_PrivateKey(b, static_cast<EVP_PKEY*>(k), nullptr, nullptr, 0,
                                          nullptr, nullptr);
        },
        key);
  }
  X509_free(x);
  EVP_PKEY_free(key);
  return out;
}

std::string HttpsExchange(int port, const std::string& request, const std::string& ca_pem) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (fd >= 0) ::close(fd);
    return "connect failed";
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  BIO* bio = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
  X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (ca != nullptr) X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca);
  X509_free(ca);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set1_host(ssl, "localhost");
  SSL_set_tlsext_host_name(ssl, "localhost");
  std::string out;
  if (SSL_connect(ssl) != 1) {
    out = "tls failed: " + Reason();
  } else {
    size_t sent = 0;
    while (sent < request.size()) {
      int n = SSL_write(ssl, request.data() + sent, static_cast<int>(request.size() - sent));
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    char buf[4096];
    while (true) {
      int n = SSL_read(ssl, buf, sizeof(buf));
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    SSL_shutdown(ssl);
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ::close(fd);
  return out;
}

}  // namespace kiln::testing

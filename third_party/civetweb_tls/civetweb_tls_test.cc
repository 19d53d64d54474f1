// The shims make "libssl.so" / "libcrypto.so" resolve what civetweb asks
// for, and the PEM checks name what is wrong. The HTTPS round trip through
// civetweb is //server:http_server_test (HttpsServesAndRefusesPlainText).
#include "third_party/civetweb_tls/civetweb_tls.h"

#include <dlfcn.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "third_party/civetweb_tls/test_tls.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

TEST(CivetwebTlsTest, ShimsResolveWhatCivetwebAsksFor) {
  ASSERT_TRUE(EnableCivetwebTls().ok()) << EnableCivetwebTls();
  EXPECT_TRUE(EnableCivetwebTls().ok());  // once per process, then the same answer
  // civetweb's own lookups: dlopen by the unversioned name, dlsym on it.
  void* ssl = dlopen("libssl.so", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(ssl, nullptr) << dlerror();
  EXPECT_NE(dlsym(ssl, "SSL_get_peer_certificate"), nullptr);  // OpenSSL 1.1's name
  EXPECT_NE(dlsym(ssl, "SSL_get1_peer_certificate"), nullptr);
  EXPECT_NE(dlsym(ssl, "TLS_server_method"), nullptr);
  dlclose(ssl);
  void* crypto = dlopen("libcrypto.so", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(crypto, nullptr) << dlerror();
  EXPECT_NE(dlsym(crypto, "X509_NAME_oneline"), nullptr);
  dlclose(crypto);
}

TEST(CivetwebTlsTest, PemChecksNameTheBadPart) {
  testing::TestCert a = testing::MakeSelfSignedCert();
  testing::TestCert b = testing::MakeSelfSignedCert();
  ASSERT_FALSE(a.cert_pem.empty());
  EXPECT_TRUE(CheckServerTls(a.cert_pem, a.key_pem).ok()) << CheckServerTls(a.cert_pem, a.key_pem);
  // A chain: the leaf first, then more certificates.
  EXPECT_TRUE(CheckServerTls(a.cert_pem + b.cert_pem, a.key_pem).ok());
  struct Case {
    std::string cert, key;
    const char* says;
  } cases[] = {
      {"", a.key_pem, "--tls-cert holds no PEM certificate"},
      {"not pem", a.key_pem, "--tls-cert holds no PEM certificate"},
      {a.key_pem, a.key_pem, "--tls-cert holds no PEM certificate"},
      {a.cert_pem, "", "--tls-key holds no PEM private key"},
      {a.cert_pem, a.cert_pem, "--tls-key holds no PEM private key"},
      {a.cert_pem, b.key_pem, "does not belong to the certificate"},
  };
  for (const Case& c : cases) {
    absl::Status s = CheckServerTls(c.cert, c.key);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.says;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says));
  }
}

}  // namespace
}  // namespace kiln

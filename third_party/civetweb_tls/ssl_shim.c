/* The libssl that Debian 12's civetweb 1.15 finds when it dlopens "libssl.so".
 *
 * civetweb resolves OpenSSL with dlopen("libssl.so") + dlsym through a table
 * of OpenSSL 1.1 names. OpenSSL 3 exports every one of them but
 * SSL_get_peer_certificate (now a macro for SSL_get1_peer_certificate), so
 * civetweb calls a null pointer on each HTTPS connection. This object has
 * the soname "libssl.so" and depends on libssl.so.3: once loaded, glibc
 * hands it to civetweb's dlopen (a loaded object matches by soname), and
 * dlsym finds the missing name here and every other one in libssl.so.3.
 * See civetweb_tls.h. */
#include <openssl/ssl.h>

#undef SSL_get_peer_certificate
X509* SSL_get_peer_certificate(const SSL* ssl);
X509* SSL_get_peer_certificate(const SSL* ssl) { return SSL_get1_peer_certificate(ssl); }

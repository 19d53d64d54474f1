/* The libcrypto that civetweb finds when it dlopens "libcrypto.so": soname
 * "libcrypto.so", depends on libcrypto.so.3, which exports every name
 * civetweb asks for. Without it civetweb needs libssl-dev's unversioned
 * symlink, which a runtime image does not have. See civetweb_tls.h. */
const int kiln_civetweb_crypto_shim = 1;

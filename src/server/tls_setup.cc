#include "server/tls_setup.h"

#include <openssl/err.h>

#include "fmt/format.h"

namespace pagellm {
namespace {

std::string OpenSslError(const std::string& what) {
  const unsigned long code = ERR_get_error();
  char buf[256] = {0};
  if (code != 0) ERR_error_string_n(code, buf, sizeof(buf));
  ERR_clear_error();
  return code != 0 ? fmt::format("{}: {}", what, buf) : what;
}

}  // namespace

bool ConfigureTls(SSL_CTX& ctx, const ServerConfig& c, std::string* error) {
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(&ctx, c.ssl_certfile.c_str()) != 1) {
    *error = OpenSslError(fmt::format("--ssl-certfile {}", c.ssl_certfile));
    return false;
  }
  if (SSL_CTX_use_PrivateKey_file(&ctx, c.ssl_keyfile.c_str(), SSL_FILETYPE_PEM) != 1) {
    *error = OpenSslError(fmt::format("--ssl-keyfile {}", c.ssl_keyfile));
    return false;
  }
  if (SSL_CTX_check_private_key(&ctx) != 1) {
    *error = OpenSslError("--ssl-keyfile does not match --ssl-certfile");
    return false;
  }
  if (!c.ssl_ca_certs.empty() &&
      SSL_CTX_load_verify_locations(&ctx, c.ssl_ca_certs.c_str(), nullptr) != 1) {
    *error = OpenSslError(fmt::format("--ssl-ca-certs {}", c.ssl_ca_certs));
    return false;
  }
  int mode = SSL_VERIFY_NONE;
  if (c.ssl_cert_reqs == 1) mode = SSL_VERIFY_PEER;
  if (c.ssl_cert_reqs == 2) mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  if (c.ssl_cert_reqs < 0 || c.ssl_cert_reqs > 2) {
    *error = fmt::format("--ssl-cert-reqs {}: expected 0 (none), 1 (optional) or 2 (required)",
                         c.ssl_cert_reqs);
    return false;
  }
  SSL_CTX_set_verify(&ctx, mode, nullptr);
  if (!c.ssl_ciphers.empty() && SSL_CTX_set_cipher_list(&ctx, c.ssl_ciphers.c_str()) != 1) {
    *error = OpenSslError(fmt::format("--ssl-ciphers {}", c.ssl_ciphers));
    return false;
  }
  return true;
}

}  // namespace pagellm

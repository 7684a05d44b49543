// TLS for `pagellm serve --ssl-certfile ... --ssl-keyfile ...` (vLLM's uvicorn SSL flags): the
// OpenSSL context cpp-httplib's SSLServer serves with.
#pragma once

#include <openssl/ssl.h>

#include <string>

#include "server/server_config.h"

namespace pagellm {

// Loads the certificate chain and key, the CA bundle for client certificates (--ssl-ca-certs),
// the client verification of --ssl-cert-reqs (0 none, 1 optional, 2 required) and the cipher
// list (--ssl-ciphers); TLS 1.2 at least. False with `*error` set when a file or value is bad.
bool ConfigureTls(SSL_CTX& ctx, const ServerConfig& config, std::string* error);

}  // namespace pagellm

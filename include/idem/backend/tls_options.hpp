// TLS settings, spelled the same way in every store and broker URI that supports TLS
// (docs/security.md):
//
//   tls=1                  connect with TLS; implied by a TLS scheme (e.g. amqps://)
//                          and by any tls_* parameter below; tls=0 with one is refused
//   tls_ca=PATH            CA certificates (PEM) the server's certificate must chain to;
//                          default: the system's trust store
//   tls_cert=PATH          a client certificate (PEM) for mutual TLS, with tls_key
//   tls_key=PATH           its private key (PEM)
//   tls_key_password=…     the key's password: a secret, so tls_key_password_file= or
//                          tls_key_password_env= (StoreUri::parse)
//   tls_insecure=1         accept any certificate and name: encrypted, not authenticated
//
// With TLS the server's certificate is verified against the CA and its name (a DNS name
// or an IP address) against the host of the URI, unless tls_insecure=1.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "idem/backend/store_uri.hpp"
#include "idem/status.hpp"

namespace idem {

struct TlsOptions {
  bool enabled = false;
  std::string ca_file;       // empty: the system's trust store
  std::string cert_file;     // empty: no client certificate
  std::string key_file;      // with cert_file
  std::string key_password;  // empty: the key is not encrypted. Never logged or printed.
  bool insecure = false;     // no verification of the server's certificate or name
};

// The parameters parse_tls() reads, for StoreUri::check_params.
inline constexpr std::array<std::string_view, 6> kTlsParams = {"tls",     "tls_ca",           "tls_cert",
                                                                "tls_key", "tls_key_password", "tls_insecure"};

// Reads the TLS parameters of u; `scheme_is_tls`: the scheme asks for TLS. Returns
// kInvalidArgument for tls=0 beside a TLS scheme or another tls_* parameter, a
// certificate without its key or the reverse, a key password without a key, or a
// file that is not there (named; the password never).
StatusOr<TlsOptions> parse_tls(const StoreUri& u, bool scheme_is_tls);

}  // namespace idem

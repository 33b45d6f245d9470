// The client side of TLS as every connection of idem does it, over OpenSSL, for the
// backends whose client library takes an OpenSSL context from the caller (the Redis
// store and Redis Streams adapter through hiredict, the Pulsar adapter through
// Boost.Asio). Each such component compiles openssl_client.cpp itself: the core does
// not link OpenSSL.
#pragma once

#include <memory>
#include <string>

#include "idem/backend/tls_options.hpp"
#include "idem/status.hpp"

struct ssl_ctx_st;
struct ssl_st;

namespace idem::tls {

struct ContextDeleter {
  void operator()(ssl_ctx_st* ctx) const;
};
using ContextPtr = std::unique_ptr<ssl_ctx_st, ContextDeleter>;

// A client context as `o` asks: TLS 1.2 or later; the CA file or the system's trust
// store; the client certificate and key (the key's password given to OpenSSL, never
// asked on a terminal); the server's certificate verified unless o.insecure. Without
// a client certificate, a server's request for one marks the connection
// (asked_for_certificate). kInvalidArgument naming what cannot be loaded, never the
// password.
StatusOr<ContextPtr> client_context(const TlsOptions& o);

// Prepares `ssl` for a server at `host` (a DNS name or an IP address): the name sent
// (SNI, DNS names only) and, unless insecure, OpenSSL's check of the certificate
// against it. kFailedPrecondition if the name cannot be checked.
Status expect_host(ssl_st* ssl, const std::string& host, bool insecure);

// Whether the server asked `ssl` for a client certificate that the context did not
// have (TLS 1.3 servers refuse such a client after the handshake).
bool asked_for_certificate(const ssl_st* ssl);

// Why a handshake on `ssl` failed, for a message: the certificate's verification
// error, else OpenSSL's last error, else empty (an I/O failure).
std::string handshake_failure(const ssl_st* ssl);

}  // namespace idem::tls

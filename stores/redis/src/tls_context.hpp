// TLS on a hiredict connection, shared by the Redis store and the Redis Streams
// adapter (which compiles this file too). hiredict's own helper sends the server's name
// (SNI) but checks neither it nor an IP address against the certificate, so the
// context is the one src/tls/openssl_client.hpp makes, and each connection's host is
// checked by OpenSSL unless insecure.
#pragma once

#include <memory>
#include <string>

#include "idem/backend/tls_options.hpp"
#include "idem/status.hpp"
#include "openssl_client.hpp"

struct redictContext;

namespace idem::redis_tls {

class Context {
 public:
  // A client context as `o` asks (tls::client_context's errors).
  static StatusOr<std::shared_ptr<const Context>> make(const TlsOptions& o);

  // Runs the TLS handshake on c, connected to `host` (a DNS name or an IP address),
  // and one PING (below). On success c speaks TLS from then on. kFailedPrecondition
  // when the server's certificate or name is not accepted, the server does not speak
  // TLS, or it refuses this client (its certificate, or the lack of one);
  // kUnavailable when the connection failed or timed out meanwhile. The message says
  // why, with `where` in it.
  Status start(redictContext* c, const std::string& host, const std::string& where) const;

 private:
  Context(tls::ContextPtr ctx, bool insecure) : ctx_(std::move(ctx)), insecure_(insecure) {}
  tls::ContextPtr ctx_;
  bool insecure_;
};

}  // namespace idem::redis_tls

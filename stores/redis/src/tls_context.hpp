// TLS on a hiredict connection, shared by the Redis store and the Redis Streams
// adapter (which compiles this file too). hiredict's own helper sends the server's name
// (SNI) but checks neither it nor an IP address against the certificate, so the
// context is OpenSSL's, made here: the CA file or the system's trust store, the
// client certificate with its key (and the key's password, never asked on a
// terminal), and on every connection the host checked by OpenSSL unless insecure.
#pragma once

#include <memory>
#include <string>

#include "idem/backend/tls_options.hpp"
#include "idem/status.hpp"

struct redictContext;
struct ssl_ctx_st;

namespace idem::redis_tls {

class Context {
 public:
  // A client context as `o` asks. kInvalidArgument naming the file that cannot be
  // loaded (or a key password that does not open the key); never the password.
  static StatusOr<std::shared_ptr<const Context>> make(const TlsOptions& o);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Runs the TLS handshake on c, connected to `host` (a DNS name or an IP address).
  // On success c speaks TLS from then on. kFailedPrecondition when the server's
  // certificate or name is not accepted, or the server does not speak TLS;
  // kUnavailable when the connection failed meanwhile. The message says why, with
  // `where` in it.
  Status start(redictContext* c, const std::string& host, const std::string& where) const;

 private:
  Context(ssl_ctx_st* ctx, bool insecure) : ctx_(ctx), insecure_(insecure) {}
  ssl_ctx_st* ctx_;
  bool insecure_;
};

}  // namespace idem::redis_tls

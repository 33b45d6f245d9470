#include "tls_context.hpp"

#include <hiredict/hiredict.h>
#include <hiredict/hiredict_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

namespace idem::redis_tls {
namespace {

// With TLS 1.3 a server that refuses the client for its certificate (or the lack of
// one) does so after the handshake: one PING finds out now, so that the refusal is
// reported as such and not as a connection lost later.
Status first_answer(redictContext* c, SSL* ssl, const std::string& where) {
  ERR_clear_error();
  auto* reply = static_cast<redictReply*>(redictCommand(c, "PING"));
  if (reply != nullptr) {  // PONG, or NOAUTH before AUTH: the server took the client
    freeReplyObject(reply);
    return ok_status();
  }
  if (tls::asked_for_certificate(ssl))
    return failed_precondition("TLS to " + where +
                               ": the server refused this client: it asks for a client certificate "
                               "(tls_cert and tls_key) and none was given");
  if (std::string why = tls::handshake_failure(ssl); !why.empty())
    return failed_precondition("TLS to " + where + ": the server refused this client: " + why);
  return unavailable("TLS to " + where + ": " + c->errstr);
}

}  // namespace

StatusOr<std::shared_ptr<const Context>> Context::make(const TlsOptions& o) {
  auto ctx = tls::client_context(o);
  if (!ctx.ok()) return ctx.status();
  return std::shared_ptr<const Context>(new Context(std::move(ctx).value(), o.insecure));
}

Status Context::start(redictContext* c, const std::string& host, const std::string& where) const {
  SSL* ssl = SSL_new(ctx_.get());
  if (ssl == nullptr) return unavailable("TLS to " + where + ": cannot create a connection");
  if (Status s = tls::expect_host(ssl, host, insecure_); !s.ok()) {
    SSL_free(ssl);
    return failed_precondition("TLS to " + where + ": " + s.message());
  }
  ERR_clear_error();
  if (redictInitiateSSL(c, ssl) == REDICT_OK) return first_answer(c, ssl, where);  // c owns ssl now
  const std::string why = tls::handshake_failure(ssl);
  SSL_free(ssl);  // not taken by c after a failure
  if (!why.empty()) return failed_precondition("TLS to " + where + ": " + why);
  return unavailable("TLS to " + where +
                     ": the handshake did not complete (no answer in time, or the connection closed: "
                     "is it a TLS port?)");
}

}  // namespace idem::redis_tls

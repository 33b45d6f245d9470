#include "tls_context.hpp"

#include <arpa/inet.h>
#include <hiredict/hiredict.h>
#include <hiredict/hiredict_ssl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstring>

namespace idem::redis_tls {
namespace {

bool is_ip_address(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// OpenSSL's password callback: the key's password from the options, never a prompt.
int key_password(char* buf, int size, int /*rwflag*/, void* userdata) {
  const auto* password = static_cast<const std::string*>(userdata);
  if (password->size() > static_cast<std::size_t>(size)) return -1;
  std::memcpy(buf, password->data(), password->size());
  return static_cast<int>(password->size());
}

// The text of OpenSSL's last error, or `fallback`.
std::string openssl_error(const char* fallback) {
  const unsigned long e = ERR_peek_last_error();
  const char* reason = e == 0 ? nullptr : ERR_reason_error_string(e);
  return reason == nullptr ? fallback : reason;
}

// Without a client certificate: called when the server asks for one. Marks the
// connection (its app data) and sends none.
int no_client_certificate(SSL* ssl, X509** /*cert*/, EVP_PKEY** /*key*/) {
  SSL_set_app_data(ssl, ssl);
  return 0;
}

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
  if (SSL_get_app_data(ssl) != nullptr)
    return failed_precondition("TLS to " + where +
                               ": the server refused this client: it asks for a client certificate "
                               "(tls_cert and tls_key) and none was given");
  if (ERR_peek_last_error() != 0)
    return failed_precondition("TLS to " + where + ": the server refused this client: " +
                               openssl_error("no reason given"));
  return unavailable("TLS to " + where + ": " + c->errstr);
}

}  // namespace

StatusOr<std::shared_ptr<const Context>> Context::make(const TlsOptions& o) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return invalid_argument("TLS: cannot create a context");
  std::shared_ptr<const Context> c(new Context(ctx, o.insecure));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  const bool cas = o.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx) == 1
                                     : SSL_CTX_load_verify_locations(ctx, o.ca_file.c_str(), nullptr) == 1;
  if (!cas) return invalid_argument(o.ca_file.empty() ? "TLS: cannot load the system's CAs" : "TLS: cannot load tls_ca");
  if (!o.cert_file.empty()) {
    // The password is read during the load only: the callback's data need not outlive it.
    SSL_CTX_set_default_passwd_cb(ctx, key_password);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, const_cast<std::string*>(&o.key_password));
    const bool loaded = SSL_CTX_use_certificate_chain_file(ctx, o.cert_file.c_str()) == 1 &&
                        SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) == 1 &&
                        SSL_CTX_check_private_key(ctx) == 1;
    SSL_CTX_set_default_passwd_cb_userdata(ctx, nullptr);
    if (!loaded) return invalid_argument("TLS: cannot load tls_cert and tls_key (or the key's password is wrong)");
  } else {
    SSL_CTX_set_client_cert_cb(ctx, no_client_certificate);
  }
  SSL_CTX_set_verify(ctx, o.insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, nullptr);
  return c;
}

Context::~Context() { SSL_CTX_free(ctx_); }

Status Context::start(redictContext* c, const std::string& host, const std::string& where) const {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return unavailable("TLS to " + where + ": cannot create a connection");
  const bool ip = is_ip_address(host);
  if (!ip) SSL_set_tlsext_host_name(ssl, host.c_str());
  if (!insecure_) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    const int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                       : X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
    if (set != 1) {
      SSL_free(ssl);
      return failed_precondition("TLS to " + where + ": cannot check the name \"" + host + "\"");
    }
  }
  ERR_clear_error();
  if (redictInitiateSSL(c, ssl) == REDICT_OK) return first_answer(c, ssl, where);  // c owns ssl now
  Status s;
  const long verified = SSL_get_verify_result(ssl);
  if (verified != X509_V_OK) {
    s = failed_precondition("TLS to " + where + ": the server's certificate is not accepted: " +
                            X509_verify_cert_error_string(verified));
  } else if (ERR_peek_last_error() != 0) {
    s = failed_precondition("TLS to " + where + ": the handshake failed: " + openssl_error(c->errstr));
  } else {
    s = unavailable("TLS to " + where +
                    ": the handshake did not complete (no answer in time, or the connection closed: is it a TLS port?)");
  }
  SSL_free(ssl);  // not taken by c after a failure
  return s;
}

}  // namespace idem::redis_tls

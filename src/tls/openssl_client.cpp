#include "openssl_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstring>

namespace idem::tls {
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

// The connection's mark that the server asked for a client certificate: an ex_data
// slot of idem's own (client libraries keep their own pointers in the app data).
int asked_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// Called when the server asks for a client certificate the context has none of:
// marks the connection and sends none.
int no_client_certificate(SSL* ssl, X509** /*cert*/, EVP_PKEY** /*key*/) {
  SSL_set_ex_data(ssl, asked_index(), ssl);
  return 0;
}

}  // namespace

void ContextDeleter::operator()(ssl_ctx_st* ctx) const { SSL_CTX_free(ctx); }

StatusOr<ContextPtr> client_context(const TlsOptions& o) {
  ContextPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (ctx == nullptr) return invalid_argument("TLS: cannot create a context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  const bool cas = o.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx.get()) == 1
                                     : SSL_CTX_load_verify_locations(ctx.get(), o.ca_file.c_str(), nullptr) == 1;
  if (!cas)
    return invalid_argument(o.ca_file.empty() ? "TLS: cannot load the system's CAs" : "TLS: cannot load tls_ca");
  if (!o.cert_file.empty()) {
    // The password is read during the load only: the callback's data need not outlive it.
    SSL_CTX_set_default_passwd_cb(ctx.get(), key_password);
    SSL_CTX_set_default_passwd_cb_userdata(ctx.get(), const_cast<std::string*>(&o.key_password));
    const bool loaded = SSL_CTX_use_certificate_chain_file(ctx.get(), o.cert_file.c_str()) == 1 &&
                        SSL_CTX_use_PrivateKey_file(ctx.get(), o.key_file.c_str(), SSL_FILETYPE_PEM) == 1 &&
                        SSL_CTX_check_private_key(ctx.get()) == 1;
    SSL_CTX_set_default_passwd_cb_userdata(ctx.get(), nullptr);
    if (!loaded) return invalid_argument("TLS: cannot load tls_cert and tls_key (or the key's password is wrong)");
  } else {
    SSL_CTX_set_client_cert_cb(ctx.get(), no_client_certificate);
  }
  SSL_CTX_set_verify(ctx.get(), o.insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, nullptr);
  return ctx;
}

Status expect_host(ssl_st* ssl, const std::string& host, bool insecure) {
  const bool ip = is_ip_address(host);
  if (!ip) SSL_set_tlsext_host_name(ssl, host.c_str());
  if (insecure) return ok_status();
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  const int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                     : X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  if (set != 1) return failed_precondition("TLS: cannot check the name \"" + host + "\"");
  return ok_status();
}

bool asked_for_certificate(const ssl_st* ssl) { return SSL_get_ex_data(ssl, asked_index()) != nullptr; }

std::string handshake_failure(const ssl_st* ssl) {
  const long verified = SSL_get_verify_result(ssl);
  if (verified != X509_V_OK)
    return std::string("the server's certificate is not accepted: ") + X509_verify_cert_error_string(verified);
  const unsigned long e = ERR_peek_last_error();
  const char* reason = e == 0 ? nullptr : ERR_reason_error_string(e);
  if (reason != nullptr) return std::string("the handshake failed: ") + reason;
  return {};
}

}  // namespace idem::tls

#include "idem/backend/tls_options.hpp"

#include <unistd.h>

namespace idem {
namespace {

Status readable(std::string_view name, const std::string& path) {
  if (path.empty() || ::access(path.c_str(), R_OK) == 0) return ok_status();
  return invalid_argument(std::string(name) + ": cannot read \"" + path + "\"");
}

}  // namespace

StatusOr<TlsOptions> parse_tls(const StoreUri& u, bool scheme_is_tls) {
  TlsOptions t;
  t.ca_file = u.param("tls_ca").value_or("");
  t.cert_file = u.param("tls_cert").value_or("");
  t.key_file = u.param("tls_key").value_or("");
  t.key_password = u.param("tls_key_password").value_or("");
  auto insecure = u.param_bool("tls_insecure", false);
  if (!insecure.ok()) return insecure.status();
  t.insecure = *insecure;
  bool implied = scheme_is_tls;
  for (std::string_view name : kTlsParams)
    if (name != "tls" && u.param(name)) implied = true;
  auto on = u.param_bool("tls", implied);
  if (!on.ok()) return on.status();
  if (!*on && implied) return invalid_argument("tls=0 beside a TLS scheme or a tls_* parameter");
  t.enabled = *on;
  if (t.cert_file.empty() != t.key_file.empty()) return invalid_argument("tls_cert and tls_key go together");
  if (!t.key_password.empty() && t.key_file.empty()) return invalid_argument("tls_key_password without tls_key");
  for (const Status& s : {readable("tls_ca", t.ca_file), readable("tls_cert", t.cert_file),
                          readable("tls_key", t.key_file)})
    if (!s.ok()) return s;
  return t;
}

}  // namespace idem

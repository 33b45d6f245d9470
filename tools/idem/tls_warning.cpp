#include "tls_warning.hpp"

#include <iostream>

#include "idem/backend/store_uri.hpp"

namespace idem::cli {

void warn_if_tls_insecure(std::string_view command, std::string_view uri) {
  auto u = StoreUri::parse(uri);
  if (!u.ok()) return;  // the open that follows says why
  auto insecure = u->param_bool("tls_insecure", false);
  if (!insecure.ok() || !*insecure) return;
  std::cerr << "idem " << command << ": warning: tls_insecure=1 for " << redact_uri(uri)
            << ": the server's certificate and name are not verified, so the connection is encrypted but anyone "
               "on the path can pose as the server\n";
}

}  // namespace idem::cli

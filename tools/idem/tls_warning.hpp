// The warning every command prints when a URI it connects with turns TLS verification
// off (tls_insecure=1, docs/security.md).
#pragma once

#include <string_view>

namespace idem::cli {

// Writes "idem COMMAND: warning: …" to stderr when `uri` has tls_insecure on.
void warn_if_tls_insecure(std::string_view command, std::string_view uri);

}  // namespace idem::cli

// Store URIs as the idem command prints them: never with their password.
#pragma once

#include <string>
#include <string_view>

namespace idem::cli {

// Returns uri with the password of its user part replaced by "***":
// "redis://user:pw@host" → "redis://user:***@host", "redis://:pw@host" →
// "redis://:***@host", "redis://pw@host" → "redis://***@host" (the whole user part
// is the password, as redis-cli -u reads it). A URI without a user part ("//…@") is
// returned as is.
std::string redact_uri(std::string_view uri);

// Returns message with every occurrence of uri replaced by redact_uri(uri) and of
// uri's password (as written and percent-decoded) replaced by "***": safe to print
// whatever a store put in its error.
std::string scrub_secrets(std::string_view message, std::string_view uri);

}  // namespace idem::cli

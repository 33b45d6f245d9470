// Store URIs: "memory:", "sqlite:PATH", "rocksdb:PATH", "redis://HOST:PORT/DB",
// "bloom:?capacity=…", "bloom+rocksdb:PATH", each optionally followed by
// "?name=value&…" parameters (percent-encoded).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/status.hpp"

namespace idem {

struct StoreUri {
  std::string scheme;  // before the first ':', lower-case, e.g. "sqlite", "bloom+rocksdb"
  std::string body;    // between ':' and '?', percent-decoded: a path or "//host:port/db"
  std::vector<std::pair<std::string, std::string>> params;  // decoded, in order

  // Returns kInvalidArgument for a URI without a scheme, a bad %-escape or an empty or
  // repeated parameter name.
  static StatusOr<StoreUri> parse(std::string_view uri);

  // The value of parameter `name`, or nullopt.
  std::optional<std::string> param(std::string_view name) const;

  // Returns kInvalidArgument naming the first parameter not in `known`.
  Status check_params(std::initializer_list<std::string_view> known) const;

  // Parses parameter `name` as an unsigned integer / a boolean (1/0/true/false/on/off)
  // / a double; absent → `fallback`; malformed → kInvalidArgument naming it.
  StatusOr<std::uint64_t> param_uint(std::string_view name, std::uint64_t fallback) const;
  StatusOr<bool> param_bool(std::string_view name, bool fallback) const;
  StatusOr<double> param_double(std::string_view name, double fallback) const;
};

// URIs as idem prints them: never with their password. Every message of the library
// and of the idem command that echoes a store or broker URI passes it through these.
//
// Returns uri with the password of its user part replaced by "***":
// "redis://user:pw@host" → "redis://user:***@host", "redis://:pw@host" →
// "redis://:***@host", "redis://pw@host" → "redis://***@host" (the whole user part is
// the password, as redis-cli -u reads it). The user part runs from the "//" to the
// last '@' (or percent-encoded "%40", which the parsers decode to '@') ahead of the
// query. A URI without "//…@" (a path, such as "sqlite:/data/a@b.db") is returned as
// is.
std::string redact_uri(std::string_view uri);

// Returns message with every occurrence of uri replaced by redact_uri(uri), and of
// uri's password (as written and percent-decoded) replaced by "***": safe to print
// whatever a store or broker put in its error about uri.
std::string scrub_secrets(std::string_view message, std::string_view uri);

}  // namespace idem

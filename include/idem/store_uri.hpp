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

}  // namespace idem

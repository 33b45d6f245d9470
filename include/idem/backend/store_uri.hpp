// Store URIs: "memory:", "sqlite:PATH", "rocksdb:PATH", "redis://HOST:PORT/DB",
// "bloom:?capacity=…", "bloom+rocksdb:PATH", each optionally followed by
// "?name=value&…" parameters (percent-encoded).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
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
  // repeated parameter name, or a secret reference that cannot be resolved.
  //
  // A secret parameter NAME (secret_name(): "password", "token", "sasl_password", …)
  // may be given by reference instead of in the URI's text, where `ps` and
  // /proc/PID/cmdline show it to every user of the host: "NAME_file=PATH" reads it
  // from a regular file of at most 64 KiB (one trailing newline dropped),
  // "NAME_env=VAR" from an environment variable. parse() replaces each reference by
  // NAME=secret, and refuses (naming the parameter and the file or the variable, never
  // the secret) one that cannot be read, an empty secret, and a NAME given both inline
  // and by reference. The password of a URI's user part is the parameter "password":
  // "redis://app@host:6379?password_file=/run/secrets/redis".
  static StatusOr<StoreUri> parse(std::string_view uri);

  // The value of parameter `name`, or nullopt.
  std::optional<std::string> param(std::string_view name) const;

  // Returns kInvalidArgument naming the first parameter not in `known` (or `more`).
  Status check_params(std::initializer_list<std::string_view> known) const;
  Status check_params(std::initializer_list<std::string_view> known, std::span<const std::string_view> more) const;

  // Parses parameter `name` as an unsigned integer / a boolean (1/0/true/false/on/off)
  // / a double; absent → `fallback`; malformed → kInvalidArgument naming it.
  StatusOr<std::uint64_t> param_uint(std::string_view name, std::uint64_t fallback) const;
  StatusOr<bool> param_bool(std::string_view name, bool fallback) const;
  StatusOr<double> param_double(std::string_view name, double fallback) const;
};

// The parts of a URI's authority "[USERINFO@]HOST[:PORT]" that every store and broker
// parser shares. Each parser keeps its own rules on top (which parts are required,
// whether they are percent-decoded) and prefixes errors with its scheme.

// The user part of `*rest`, a URI's text after its "//": up to the LAST '@' (a decoded
// password may hold '@'), split at its first ':'. Removes "USERINFO@" from `*rest`.
// Returns nullopt, and leaves `*rest` as is, when `*rest` has no '@'.
struct UserInfo {
  std::string user;                     // before the first ':'; all of it without one
  std::optional<std::string> password;  // after the first ':'; nullopt without one
};
std::optional<UserInfo> take_userinfo(std::string_view* rest);

// The user and password of a URI from its user part `info` and its parameter
// "password" (given as password_file= or password_env=, see StoreUri::parse). With
// `lone_is_password`, a user part without ':' is the password (as redis-cli -u reads
// "redis://pw@host") unless the parameter gives one; then it is the user. Returns
// kInvalidArgument "the password is given twice" or "empty password".
StatusOr<UserInfo> credentials(std::optional<UserInfo> info, const StoreUri& u, bool lone_is_password);

// Parses a TCP port, a decimal number in 1..65535. On anything else returns
// kInvalidArgument "the port is not a number in 1..65535", without the text: a URI
// whose '@' was forgotten puts its password where the port is read.
StatusOr<std::uint16_t> parse_port(std::string_view text);

// Splits "HOST:PORT" at its last ':' and parses PORT with parse_port(). Returns
// kInvalidArgument "the server is not HOST:PORT" (without the text) when there is no
// ':' or no host.
struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};
StatusOr<HostPort> parse_host_port(std::string_view text);

// URIs as idem prints them: never with their password. Every message of the library
// and of the idem command that echoes a store or broker URI passes it through these.
//
// Returns uri with the password of its user part replaced by "***":
// "redis://user:pw@host" → "redis://user:***@host", "redis://:pw@host" →
// "redis://:***@host", "redis://pw@host" → "redis://***@host" (the whole user part is
// the password, as redis-cli -u reads it; under postgres://, postgresql://, amqp://,
// amqps://, nats:// and tls:// such a part is the user name: "postgres://alice@host"
// is returned as is). The user part runs from the "//" to the last '@' (or
// percent-encoded "%40", which the parsers decode to '@') ahead of the query. A URI
// without "//…@" (a path, such as "sqlite:/data/a@b.db") is returned as is. The value
// of a query parameter whose name holds "password", "secret" or "token" ("password=",
// which libpq reads; Kafka's "sasl_password=" and "rdkafka.ssl.key.password=") is
// replaced too.
std::string redact_uri(std::string_view uri);

// Whether a URI parameter, or a client property, of this (decoded) name holds a
// secret, whose value idem never prints: its name holds "password", "secret" or
// "token" ("password", "sasl_password", Kafka's "ssl.key.password",
// "sasl.oauthbearer.client.secret").
bool secret_name(std::string_view name);

// For "NAME_file" or "NAME_env" where NAME is a secret_name(), returns NAME (the
// parameter such a reference stands for); otherwise nullopt.
std::optional<std::string> secret_reference(std::string_view name);

// Returns message with every occurrence of uri replaced by redact_uri(uri), and of
// uri's password (as written and percent-decoded) replaced by "***": safe to print
// whatever a store or broker put in its error about uri.
std::string scrub_secrets(std::string_view message, std::string_view uri);

}  // namespace idem

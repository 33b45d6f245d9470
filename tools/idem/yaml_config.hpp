// `idem consume --config FILE`: the same keys as the flags, in YAML. A flag given on
// the command line overrides the file.
//
//   source: redis-stream://127.0.0.1:6379/orders?group=g
//   store: sqlite:/var/lib/idem/orders.db
//   handler: http://127.0.0.1:8080/orders
//   key: /account
//   version: /version
//   ordering: strict
//   workers: 8
//   metrics-listen: 127.0.0.1:9464     # or metrics_listen
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace idem::cli {

// Sets, from the YAML file at `path`, every option of `cmd` that the command line left
// unset (a flag given there wins), and runs its checks. The file is a mapping whose
// keys are the long flag names without "--" ('_' and '-' alike) and whose values are
// scalars (a flag: true or false) or lists of scalars. Throws CLI::ConfigError for a
// file that cannot be read or is not YAML (naming the line), another shape, or an
// unknown key, and the option's own CLI::ParseError for a value it refuses (as for
// the same flag on the command line; no message quotes a URI).
// (CLI11 2.1's own config files are read for the top-level app only, and not YAML.)
void apply_yaml_config(CLI::App& cmd, const std::string& path);

}  // namespace idem::cli

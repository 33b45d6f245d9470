// Loading a state machine from a YAML file (docs/statemachines.md):
//
//   name: product
//   initial: offline
//   final: [deleted]
//   max_retries: 5
//   backoff: {initial_ms: 1000, multiplier: 2, max_ms: 60000}
//   transitions:
//     - {from: offline, on: online,  to: online}
//     - {from: online,  on: offline, to: offline}
//     - {from: [online, offline], on: delete, to: deleted}
//
// Every diagnostic carries the file, line and column.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/machine_spec.hpp"

namespace idem {

// Limits that refuse hostile files before (size) and while (depth, nodes) parsing.
struct YamlLimits {
  std::size_t max_file_bytes = 1 << 20;  // bytes; default 1 MiB
  std::size_t max_depth = 16;            // nested collections; default 16 (the format needs 4)
  std::size_t max_nodes = 100'000;       // nodes after alias expansion; default 100,000
};

// Parses and validates the YAML text of a machine. `file` names it in diagnostics.
// Syntax errors, limits, unknown keys and wrong types are errors; then build_table()
// validates the declaration (see its list). Never throws (only std::bad_alloc).
BuildResult load_machine_yaml(std::string_view text, const std::string& file, const YamlLimits& limits = {});

// Reads the file at `path`, then load_machine_yaml(). A file that cannot be read, or is
// larger than max_file_bytes, is an error at `path`.
BuildResult load_machine_file(const std::string& path, const YamlLimits& limits = {});

// The parsing step alone: the declaration, or errors in `diagnostics` (nullopt).
// load_machine_yaml() = parse_machine_yaml() + build_table().
std::optional<MachineSpec> parse_machine_yaml(std::string_view text, const std::string& file, const YamlLimits& limits,
                                              std::vector<Diagnostic>& diagnostics);

}  // namespace idem

// The first pass over a YAML text: counts documents, nesting depth and nodes after
// alias expansion, and stops as soon as a limit is passed, before a tree is built.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "idem/machine_yaml.hpp"

namespace idem::detail {

// What is wrong with the text, with its position; nullopt when within the limits.
struct YamlProblem {
  int line = 0;    // from 1; 0 when unknown
  int column = 0;  // from 1; 0 when unknown
  std::string message;
};

// Returns the first limit passed or syntax error found, or nullopt. The text must hold
// exactly one document.
std::optional<YamlProblem> check_yaml_limits(std::string_view text, const YamlLimits& limits);

}  // namespace idem::detail

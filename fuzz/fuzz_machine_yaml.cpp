// Fuzz target: state-machine YAML files (docs/design.md §6). Any text loads into a
// table or into diagnostics, within the limits of YamlLimits; a loaded table prints as
// DOT.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.hpp"
#include "idem/machine_dot.hpp"
#include "idem/machine_yaml.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const idem::BuildResult r = idem::load_machine_yaml(text, "fuzz.yaml");
  if (r.table) {
    IDEM_FUZZ_CHECK(!idem::to_dot(*r.table).empty());
  }
  return 0;
}

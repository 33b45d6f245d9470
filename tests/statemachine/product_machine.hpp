// The product machine (docs/design.md §6), in its three forms: YAML text, C++ DSL, file.
#pragma once

#include <string>

#include "idem/statemachine.hpp"

namespace idem::testing {

inline const std::string kProductYaml =
    "name: product\n"
    "initial: offline\n"
    "final: [deleted]\n"
    "max_retries: 5\n"
    "backoff: {initial_ms: 1000, multiplier: 2, max_ms: 60000}\n"
    "transitions:\n"
    "  - {from: offline, on: online,  to: online}\n"
    "  - {from: online,  on: offline, to: offline}\n"
    "  - {from: [online, offline], on: delete, to: deleted}\n";

inline std::string product_file() { return std::string(IDEM_SOURCE_DIR) + "/examples/machines/product.yaml"; }

// The product machine declared in C++. REQUIRES: valid (asserted by the tests).
inline TransitionTable product_table() {
  using namespace idem::dsl;
  BuildResult r = Machine("product")
                      .initial("offline")
                      .final_states({"deleted"})
                      .max_retries(5)
                      .backoff({Duration(1000), 2.0, Duration(60'000)})
                      .rows({
                          state("offline") + event("online") = state("online"),
                          state("online") + event("offline") = state("offline"),
                          row({"online", "offline"}, "delete", "deleted"),
                      })
                      .build();
  return std::move(*r.table);
}

}  // namespace idem::testing

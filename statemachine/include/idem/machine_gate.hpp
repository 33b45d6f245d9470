// machine_gate(): a TransitionTable as the pipeline's StateGate (state_gate.hpp), so that
// a consumer applies the table at run time:
//
//   idem::BuildResult table = idem::load_machine_file("product.yaml");
//   if (!table.ok()) die(table.format(idem::Severity::kError));
//   opts.machine = idem::machine_gate(std::move(*table.table));
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "idem/state_gate.hpp"
#include "idem/transition_table.hpp"

namespace idem {

struct MachineGateOptions {
  // Events that must not create an entity: on a key with no state yet they are not
  // yet valid (retry, capped), waiting for an event that creates it. Default: none;
  // every event may create the entity in the initial state.
  std::vector<std::string> not_creating;
  // Overrides of the table's max_retries and backoff (e.g. from a command line).
  std::optional<std::uint32_t> max_retries;
  std::optional<Backoff> backoff;
};

// Returns a gate that answers from `table`. An entity with no stored state is in the
// table's initial state. Thread-safe.
std::shared_ptr<const StateGate> machine_gate(TransitionTable table, MachineGateOptions options = {});

}  // namespace idem

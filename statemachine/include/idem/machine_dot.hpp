// Graphviz DOT export of a state machine.
#pragma once

#include <string>

#include "idem/transition_table.hpp"

namespace idem {

// Returns the table as a DOT digraph: states in id order (the initial one pointed at by
// an arrow from a point, final states as double circles), then one edge per transition
// labelled with its event, in (from, event) order. Deterministic: the same table gives
// the same bytes. Names are quoted and escaped.
std::string to_dot(const TransitionTable& table);

}  // namespace idem

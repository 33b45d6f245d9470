// Umbrella header of idem::statemachine: declared business state machines.
#pragma once

#include "idem/machine_dot.hpp"
#include "idem/machine_dsl.hpp"
#include "idem/machine_gate.hpp"
#include "idem/machine_spec.hpp"
#include "idem/machine_yaml.hpp"
#include "idem/transition_table.hpp"

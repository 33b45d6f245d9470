// Chapter 3 of the demo: a partner's product-status events, out of order, through strict
// ordering and the product state machine.
#pragma once

#include <memory>
#include <string>

#include "idem/clock.hpp"

namespace demo {

// Runs the chapter on the SQLite store at db_path. Returns true iff its audit passed.
bool catalogue(const std::string& db_path, const std::shared_ptr<idem::ManualClock>& clock);

}  // namespace demo

// `idem bench --source` against a real broker, shared by every broker adapter's tests:
// the three rows run and pass their count check (exit 0, one BENCH line each, a RATIO
// line); and remove_destination(), which the bench uses to clear up, deletes what was
// published: messages published to a destination a consumer group already reads are
// gone once it is removed and opened again.
#pragma once

#include <string>

#include "support/consume_kills.hpp"

namespace idem::consume_kills {

// `scheme`: the URI scheme the BENCH lines name. Reports through gtest assertions.
void run_bench_source_test(Broker& broker, const std::string& scheme);

}  // namespace idem::consume_kills

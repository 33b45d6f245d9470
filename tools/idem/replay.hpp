// `idem replay`: runs a trace (one delivery per line) through an idem::Consumer and
// writes its effects and decisions (docs/design.md §8; tools/idem/README.md).
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "consumer_flags.hpp"
#include "idem/clock.hpp"
#include "idem/guarantee.hpp"
#include "idem/ordering.hpp"
#include "idem/state_gate.hpp"

namespace idem::cli {

// The lease owner of every replay run. Fixed, so runs over one durable store behave
// as one consumer that restarted (README.md, "Durable stores").
inline constexpr std::string_view kReplayOwner = "idem-replay";

// Replays every line of `in`, writing effect and decision lines to `out` and the
// reason the run stopped, if it did, to `err`. Returns an exit status
// (exit_codes.hpp): kExitUsage for a store URI or option combination the consumer
// rejects, kExitFailure when the store cannot be opened or fails during the run, or
// when `in` or `out` fails.
int run_replay(const ConsumerSettings& settings, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace idem::cli

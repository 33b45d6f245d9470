// `idem replay`: runs a trace (one delivery per line) through an idem::Consumer and
// writes its effects and decisions (docs/design.md §8; tools/idem/README.md).
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "idem/clock.hpp"
#include "idem/guarantee.hpp"
#include "idem/ordering.hpp"
#include "idem/state_gate.hpp"

namespace idem::cli {

// The lease owner of every replay run. Fixed, so runs over one durable store behave
// as one consumer that restarted (README.md, "Durable stores").
inline constexpr std::string_view kReplayOwner = "idem-replay";

// The largest --lease-ms, --ttl-ms and --backoff-ms: 100 years.
inline constexpr std::int64_t kMaxDurationMs = 100LL * 365 * 24 * 3600 * 1000;

struct ReplaySettings {
  std::string store_uri = "memory:";                  // --store; default memory:
  bool store_given = false;                           // --store was on the command line
  Guarantee guarantee = Guarantee::kEffectivelyOnce;  // --guarantee; default effectively_once
  std::uint32_t max_retries = 5;                      // --max-retries; retry decisions per id; default 5
  Duration backoff{1000};                             // --backoff-ms; first retry delay, doubling; 1 s
  Duration lease{30'000};                             // --lease-ms; in-progress lease; default 30 s
  Duration ttl{7LL * 24 * 3600 * 1000};               // --ttl-ms; how long a done id is remembered; 7 days
  bool flush_every_line = false;                      // flush `out` after each input line (streaming input)
  OrderingOptions ordering;                           // --ordering, --gap-timeout-ms, --gap-policy, --buffer-limit
  std::shared_ptr<const StateGate> machine;           // --machine FILE; null: none
};

// Replays every line of `in`, writing effect and decision lines to `out` and the
// reason the run stopped, if it did, to `err`. Returns an exit status
// (exit_codes.hpp): kExitUsage for a store URI or option combination the consumer
// rejects, kExitFailure when the store cannot be opened or fails during the run, or
// when `in` or `out` fails.
int run_replay(const ReplaySettings& settings, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace idem::cli

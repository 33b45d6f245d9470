// The slow-handler test of `idem consume`, shared by the broker adapters' tests: two
// messages whose handler (examples/sidecar's exec: handler) sleeps three times the
// lease, two consumers of one group, the second started once the first has fetched
// both. Returns what the handler was called with and how many copies met the store's
// lease; each test says what its broker must give (each message called once; copies
// at the lease only where the broker cannot be told that work goes on).
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "support/consume_kills.hpp"

namespace idem::slow_handler {

struct Outcome {
  std::map<std::string, std::vector<int>> calls;  // message id → the attempts it ran with
  std::size_t in_progress = 0;                    // decisions in_progress, both consumers
  std::string logs;                               // both consumers' output, for messages
};

// `lease` is --lease-ms; the handler sleeps 3 × lease.
Outcome run(consume_kills::Broker& broker, const std::string& topic, std::chrono::milliseconds lease);

}  // namespace idem::slow_handler

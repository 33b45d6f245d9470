// The crash point between a dead letter's two steps, shared by every broker adapter's
// tests (label crashpoints). idem records a dead letter in the store, then the broker
// takes it (publish to the dead-letter destination, ack). `idem consume` runs with a
// failure-path throttle so slow that dead letters wait between those steps, and is
// SIGKILLed while they wait; a consumer without the throttle then runs to idle. Every
// poisoned message must be in the dead-letter destination at least once (lost 0),
// every good one have one effect. Prints one line of figures.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "support/consume_kills.hpp"

namespace idem::consume_kills {

struct CrashPointOptions {
  std::string name;  // the broker's name, for the printed line
  std::string topic = "poison";
  std::string group = "g";
  std::string lease_ms = "1000";
  std::string idle_exit_ms = "1500";
  std::vector<std::string> extra_args;  // more `idem consume` flags
  std::chrono::seconds final_timeout{120};
};

// Runs the test against `broker`; reports through gtest assertions.
void run_dead_letter_crash_test(Broker& broker, const CrashPointOptions& options);

}  // namespace idem::consume_kills

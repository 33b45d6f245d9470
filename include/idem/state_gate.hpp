// StateGate: what the pipeline asks a business state machine (docs/design.md §6). The
// statemachine component implements it for a TransitionTable (idem::machine_gate() in
// statemachine/include/idem/machine_gate.hpp); the core needs only this interface.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "idem/options.hpp"

namespace idem {

class StateGate {
 public:
  enum class Answer {
    kApply,        // the transition exists: run the handler, then commit `to`
    kNotYetValid,  // a state reachable from here accepts the event: retry later, capped
    kNeverValid,   // no reachable state accepts it: dead_letter / invalid_transition now
    kRejected,     // unusable input (event name too long, stored state unknown to this
                   // table): dead_letter / bad_message with the reason
  };
  struct Check {
    Answer answer = Answer::kNeverValid;
    std::string_view from;  // the current state's name (the initial one for a new entity)
    std::string_view to;    // kApply: the next state's name
    std::string reason;     // empty for kApply; else names the event and the state
  };

  virtual ~StateGate() = default;

  // The answer for `event` on an entity whose stored state is `state` (empty: the
  // entity has no state yet). Thread-safe; views point into the gate.
  virtual Check check(std::string_view state, std::string_view event) const = 0;
  // Retry decisions for not-yet-valid events per message id before dead_letter.
  virtual std::uint32_t max_retries() const = 0;
  // The delay of the k-th not-yet-valid retry.
  virtual Backoff backoff() const = 0;
};

}  // namespace idem

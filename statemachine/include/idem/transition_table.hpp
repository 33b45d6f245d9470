// TransitionTable: a validated business state machine (docs/design.md §6), with states and
// events interned to small integer ids, so that the run-time check is an array lookup.
//
// Built by build_table() (machine_spec.hpp) from a declaration in C++ (machine_dsl.hpp)
// or in a YAML file (machine_yaml.hpp). Immutable once built; every const member
// function is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "idem/options.hpp"

namespace idem {

using StateId = std::uint16_t;
using EventId = std::uint16_t;

// An id that names no state (or event).
inline constexpr StateId kNoState = 0xFFFF;
inline constexpr EventId kNoEvent = 0xFFFF;

// The answer of the table for an event in a state (docs/design.md §6).
enum class Verdict : std::uint8_t {
  kApply,        // the table has the transition: apply it
  kNotYetValid,  // not here, but a state reachable from here accepts it: retry later
  kNeverValid,   // no reachable state accepts it (or the event is unknown): dead-letter
  kRejected,     // the input is unusable (event name over the limit, stored state
                 // unknown to this table): dead-letter with the reason
};

// Stable snake_case name: "apply", "not_yet_valid", "never_valid", "rejected".
std::string_view verdict_name(Verdict v);

// The answer for one message, with its reason.
struct TransitionCheck {
  Verdict verdict = Verdict::kNeverValid;
  StateId from = kNoState;   // the current state, when known
  EventId event = kNoEvent;  // the event, when known
  StateId to = kNoState;     // the next state; set iff verdict == kApply
  std::string reason;        // empty for kApply; else says why, naming the event and state
};

// One transition of the table, by ids.
struct Transition {
  StateId from;
  EventId event;
  StateId to;
  friend bool operator==(const Transition&, const Transition&) = default;
};

class TransitionTable {
 public:
  // --- the run-time checks -----------------------------------------------------------

  // Returns the state that `event` leads to from `state`, or nullopt when the table has
  // no such transition (or an id is out of range). One array load.
  std::optional<StateId> next(StateId state, EventId event) const noexcept {
    if (state >= states_.size() || event >= events_.size()) return std::nullopt;
    const StateId to = next_[static_cast<std::size_t>(state) * events_.size() + event];
    if (to == kNoState) return std::nullopt;
    return to;
  }

  // Returns kApply, kNotYetValid or kNeverValid for `event` in `state` (precomputed at
  // build time: one array load). Out-of-range ids are kNeverValid.
  Verdict verdict(StateId state, EventId event) const noexcept {
    if (state >= states_.size() || event >= events_.size()) return Verdict::kNeverValid;
    return verdict_[static_cast<std::size_t>(state) * events_.size() + event];
  }

  // Returns the id of the event named `name`, or nullopt. One hash lookup; do it once per
  // message.
  std::optional<EventId> event_id(std::string_view name) const;

  // Returns the id of the state named `name`, following the `renamed` entries (an old
  // name gives the id of its new name), or nullopt.
  std::optional<StateId> state_id(std::string_view name) const;

  // The full answer, with a reason, for `event` (as it arrived) in `state`.
  // kRejected: the event name is longer than max_event_name_bytes().
  // kNeverValid: the event is unknown (the reason names it), or no reachable state
  // accepts it. A state id out of range gives kRejected.
  TransitionCheck check(StateId state, std::string_view event) const;

  // As above for a state name as stored. A stored name that is neither a state nor a
  // renamed one gives kRejected with a reason naming the state and the migration path.
  TransitionCheck check(std::string_view state, std::string_view event) const;

  // --- the declaration -----------------------------------------------------------------

  const std::string& name() const { return name_; }
  StateId initial() const { return initial_; }
  bool is_final(StateId s) const { return s < final_.size() && final_[s] != 0; }
  // The final states, in id order.
  std::vector<StateId> finals() const;
  std::size_t state_count() const { return states_.size(); }
  std::size_t event_count() const { return events_.size(); }
  // REQUIRES: id < state_count() / event_count().
  const std::string& state_name(StateId id) const { return states_[id]; }
  const std::string& event_name(EventId id) const { return events_[id]; }
  // The distinct transitions, ordered by (from, event).
  const std::vector<Transition>& transitions() const { return transitions_; }
  std::uint32_t max_retries() const { return max_retries_; }
  const Backoff& backoff() const { return backoff_; }
  std::size_t max_event_name_bytes() const { return max_event_name_bytes_; }
  // (old name, new name) pairs, in declaration order.
  const std::vector<std::pair<std::string, std::string>>& renamed() const { return renamed_; }

  // True iff both declare the same machine with the same ids (the same names, rows in
  // the same order of first mention, initial, finals, limits, retries, backoff, renames).
  friend bool operator==(const TransitionTable& a, const TransitionTable& b);

 private:
  friend class TableBuilder;  // build_table() (src/build_table.cpp)

  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  using NameMap = std::unordered_map<std::string, std::uint16_t, NameHash, std::equal_to<>>;

  std::string name_;
  std::vector<std::string> states_;
  std::vector<std::string> events_;
  StateId initial_ = 0;
  std::vector<std::uint8_t> final_;  // per state: 1 iff final
  std::vector<StateId> next_;        // [state * event_count + event] → to, or kNoState
  std::vector<Verdict> verdict_;     // [state * event_count + event]
  NameMap state_ids_;                // current names and renamed old names → id
  NameMap event_ids_;
  std::vector<Transition> transitions_;
  std::uint32_t max_retries_ = 5;
  Backoff backoff_;
  std::size_t max_event_name_bytes_ = 256;
  std::vector<std::pair<std::string, std::string>> renamed_;
};

}  // namespace idem

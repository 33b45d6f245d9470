#include "idem/transition_table.hpp"

#include <string>

#include "names.hpp"

namespace idem {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kApply:
      return "apply";
    case Verdict::kNotYetValid:
      return "not_yet_valid";
    case Verdict::kNeverValid:
      return "never_valid";
    case Verdict::kRejected:
      return "rejected";
  }
  return "unknown";
}

std::optional<EventId> TransitionTable::event_id(std::string_view name) const {
  const auto it = event_ids_.find(name);
  if (it == event_ids_.end()) return std::nullopt;
  return it->second;
}

std::optional<StateId> TransitionTable::state_id(std::string_view name) const {
  const auto it = state_ids_.find(name);
  if (it == state_ids_.end()) return std::nullopt;
  return it->second;
}

std::vector<StateId> TransitionTable::finals() const {
  std::vector<StateId> out;
  for (std::size_t s = 0; s < final_.size(); ++s)
    if (final_[s]) out.push_back(static_cast<StateId>(s));
  return out;
}

TransitionCheck TransitionTable::check(StateId state, std::string_view event) const {
  TransitionCheck c;
  if (event.size() > max_event_name_bytes_) {
    c.verdict = Verdict::kRejected;
    c.reason = "event name of " + std::to_string(event.size()) + " bytes exceeds the limit of " +
               std::to_string(max_event_name_bytes_) + " bytes";
    return c;
  }
  if (state >= states_.size()) {
    c.verdict = Verdict::kRejected;
    c.reason = "state id " + std::to_string(state) + " is not a state of machine " + detail::quote_name(name_);
    return c;
  }
  c.from = state;
  const auto e = event_id(event);
  if (!e) {
    c.verdict = Verdict::kNeverValid;
    c.reason =
        "unknown event " + detail::quote_name(event) + ": machine " + detail::quote_name(name_) + " has no such event";
    return c;
  }
  c.event = *e;
  c.verdict = verdict(state, *e);
  switch (c.verdict) {
    case Verdict::kApply:
      c.to = *next(state, *e);
      break;
    case Verdict::kNotYetValid:
      c.reason = "event " + detail::quote_name(event) + " is not valid in state " + detail::quote_name(states_[state]) +
                 " yet: a state reachable from it accepts it";
      break;
    case Verdict::kNeverValid:
      c.reason = "event " + detail::quote_name(event) + " is never valid from state " +
                 detail::quote_name(states_[state]) +
                 (is_final(state) ? " (a final state)" : ": no state reachable from it accepts it");
      break;
    case Verdict::kRejected:
      break;
  }
  return c;
}

TransitionCheck TransitionTable::check(std::string_view state, std::string_view event) const {
  const auto s = state_id(state);
  if (!s) {
    TransitionCheck c;
    c.verdict = Verdict::kRejected;
    c.reason = "stored state " + detail::quote_name(state) + " is not a state of machine " + detail::quote_name(name_) +
               ": declare it again, or map it to a current state with a `renamed` entry (docs/statemachines.md)";
    return c;
  }
  return check(*s, event);
}

bool operator==(const TransitionTable& a, const TransitionTable& b) {
  return a.name_ == b.name_ && a.states_ == b.states_ && a.events_ == b.events_ && a.initial_ == b.initial_ &&
         a.final_ == b.final_ && a.transitions_ == b.transitions_ && a.verdict_ == b.verdict_ &&
         a.max_retries_ == b.max_retries_ && a.backoff_.initial == b.backoff_.initial &&
         a.backoff_.multiplier == b.backoff_.multiplier && a.backoff_.max == b.backoff_.max &&
         a.max_event_name_bytes_ == b.max_event_name_bytes_ && a.renamed_ == b.renamed_;
}

}  // namespace idem

// A TransitionTable answering the pipeline's StateGate questions.
#include "idem/machine_gate.hpp"

#include <algorithm>
#include <utility>

namespace idem {
namespace {

class TableGate final : public StateGate {
 public:
  TableGate(TransitionTable table, MachineGateOptions options)
      : table_(std::move(table)), options_(std::move(options)) {}

  Check check(std::string_view state, std::string_view event) const override {
    Check out;
    const bool fresh = state.empty();
    const TransitionCheck c = fresh ? table_.check(table_.initial(), event) : table_.check(state, event);
    if (c.from != kNoState) out.from = table_.state_name(c.from);
    if (fresh && std::find(options_.not_creating.begin(), options_.not_creating.end(), event) !=
                     options_.not_creating.end()) {
      out.answer = Answer::kNotYetValid;
      out.reason = "the entity does not exist yet and event \"" + std::string(event) + "\" does not create it";
      return out;
    }
    switch (c.verdict) {
      case Verdict::kApply:
        out.answer = Answer::kApply;
        out.to = table_.state_name(c.to);
        break;
      case Verdict::kNotYetValid: out.answer = Answer::kNotYetValid; break;
      case Verdict::kNeverValid: out.answer = Answer::kNeverValid; break;
      case Verdict::kRejected: out.answer = Answer::kRejected; break;
    }
    out.reason = c.reason;
    return out;
  }

  std::uint32_t max_retries() const override { return options_.max_retries.value_or(table_.max_retries()); }
  Backoff backoff() const override { return options_.backoff.value_or(table_.backoff()); }

 private:
  TransitionTable table_;
  MachineGateOptions options_;
};

}  // namespace

std::shared_ptr<const StateGate> machine_gate(TransitionTable table, MachineGateOptions options) {
  return std::make_shared<TableGate>(std::move(table), std::move(options));
}

}  // namespace idem

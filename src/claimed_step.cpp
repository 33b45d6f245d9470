// One message's step through its handler (claimed_step.hpp).
#include "claimed_step.hpp"

namespace idem::detail {

ClaimedStep::ClaimedStep(Pipeline& p, const Subject& subject, std::uint32_t retries, TimePoint start,
                         TimePoint lease_until, Gate* gate, Run* slot)
    : p_(p),
      subject_(subject),
      retries_(retries),
      start_(start),
      gate_(gate),
      run_(slot != nullptr ? slot : &own_run_) {
  ContextAccess::init(ctx_, &p.engine_, subject, retries + 1, p.o_.guarantee, lease_until, gate);
}

EntityKey ClaimedStep::request_key() const {
  return gate_ != nullptr ? EntityKey(gate_->key) : std::nullopt;
}

CommitRequest ClaimedStep::commit(std::span<const OutboxEntry> outbox) {
  CommitRequest req = p_.commit_request(request_key(), subject_.id, subject_.fingerprint, Outcome::kProcessed,
                                        p_.storable_result(*run_, decision_), gate_);
  req.outbox = outbox;
  return req;
}

Decision ClaimedStep::landed(const Status& s) {
  if (s.ok() && gate_ != nullptr && gate_->version) gate_->advanced = true;
  Decision d = decision_;
  p_.after_commit(s, *run_, d);
  return d;
}

Decision ClaimedStep::failed() {
  return p_.after_failure(request_key(), subject_.id, subject_.fingerprint, retries_, *run_, gate_);
}

}  // namespace idem::detail

// One message's step through its handler, the same on every path (docs/design.md §2):
// the handler context made from the message and its claim, the handler run once, then
// the commit request of a success or the decision of a failure. process() (through
// run_claimed), process_batch, the gated batch, the drain of the reorder buffer, the
// lookahead and the guarantees that keep no lease all make their handler calls here,
// so a handler sees the same context whichever path delivered its message. Internal.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "pipeline.hpp"

namespace idem::detail {

// A lease taken at `claimed_at` is renewed (one extend) before a handler that starts
// more than a tenth of it later, so that each handler still gets about a whole lease.
// The rule of every path that claims ahead of its handler (a batch, the lookahead).
inline bool lease_renewal_due(TimePoint claimed_at, TimePoint handler_start, Duration lease) {
  constexpr int kRenewDivisor = 10;
  return handler_start - claimed_at > lease / kRenewDivisor;
}

class ClaimedStep {
 public:
  // The handler of `subject` (its `retries` recorded failures before) starts at `start`
  // under a lease until `lease_until` (unclaimed guarantees: `start`), with the entity
  // write of `gate` if set (its requests then carry gate->key). The run is kept in
  // `*slot` when given (a batch keeps it until its commit lands), else in the step.
  ClaimedStep(Pipeline& p, const Subject& subject, std::uint32_t retries, TimePoint start, TimePoint lease_until,
              Gate* gate = nullptr, Run* slot = nullptr);
  ClaimedStep(const ClaimedStep&) = delete;
  ClaimedStep& operator=(const ClaimedStep&) = delete;

  // Runs `invoke(ctx) -> HandlerResult` once, in `txn` when set, recording what it
  // publishes into `outbox` when set. Returns true iff the run succeeded (ok and, under
  // manual, acked): then commit(), else failed().
  template <class F>
  bool run(F&& invoke, StoreTransaction* txn = nullptr, std::vector<OutboxEntry>* outbox = nullptr);

  // After a successful run: the commit request at the run's end (`outbox`: the
  // messages it carries). Views into the run and the subject.
  CommitRequest commit(std::span<const OutboxEntry> outbox = {});
  // The decision a success gets if its commit lands: ack / processed (with a detail
  // when the result was too large to store).
  const Decision& decision() const { return decision_; }
  // After the commit answered s: the decision. Sets gate->advanced when a version landed.
  Decision landed(const Status& s);
  // After a failed run: release and retry, or dead-letter at the cap.
  Decision failed();

  const Run& result() const { return *run_; }
  // The requests' entity key: gate->key when gated, none otherwise.
  EntityKey request_key() const;

 private:
  Pipeline& p_;
  const Subject subject_;
  const std::uint32_t retries_;
  const TimePoint start_;
  Gate* const gate_;
  Run own_run_;
  Run* const run_;
  Decision decision_ = Decision::ack(Reason::kProcessed);
  HandlerContext ctx_;
};

template <class F>
bool ClaimedStep::run(F&& invoke, StoreTransaction* txn, std::vector<OutboxEntry>* outbox) {
  ContextAccess::set_transaction(ctx_, txn);
  if (outbox != nullptr) ContextAccess::set_outbox(ctx_, outbox);
  *run_ = p_.run_handler_with(invoke, ctx_, start_);
  return run_->kind == HandlerResult::Kind::kOk && !run_->unacknowledged;
}

template <class F>
Decision Pipeline::run_claimed(const Subject& subject, std::uint32_t retries, F&& invoke, TimePoint start, Gate* gate,
                               std::optional<TimePoint> lease_until) {
  ClaimedStep step(*this, subject, retries, start, lease_until.value_or(start + o_.lease), gate);
  std::unique_ptr<StoreTransaction> txn;
  if (o_.transactional) {
    auto t = clock_.timed_store([&] { return impl_.store->begin(clock_.last()); });
    if (!t.ok()) {
      (void)impl_.store->release(release_req(step.request_key(), subject.id, false));
      return store_failure(t.status());
    }
    txn = std::move(t).value();
  }
  std::vector<OutboxEntry> outgoing;  // what the handler publishes (ctx.publish)
  if (!step.run(invoke, txn.get(), txn && impl_.dispatcher ? &outgoing : nullptr)) {
    if (txn) txn->rollback();
    return step.failed();
  }
  if (txn && impl_.dispatcher && deferred_outbox_ == nullptr) (void)impl_.dispatcher->flush_marks(clock_.last());
  for (OutboxEntry& e : outgoing) e.created_at = clock_.last();
  const CommitRequest req = step.commit(outgoing);
  const Status s = clock_.timed_store([&] { return txn ? txn->commit(req) : impl_.store->commit(req); });
  if (s.ok() && !outgoing.empty()) dispatch_committed(outgoing);
  if (!s.ok() && (txn || s.code() == StatusCode::kAborted)) {
    // Nothing was committed: with a transaction the handler's writes were rolled back
    // with it, so a redelivery may run it again at once. kAborted: another consumer
    // changed the entity since the claim read it.
    txn.reset();
    (void)impl_.store->release(release_req(step.request_key(), subject.id, false));
    if (s.code() == StatusCode::kAborted) return concurrent_update(s);
    if (s.code() == StatusCode::kFailedPrecondition) {
      Decision lost = Decision::retry(Reason::kLeaseLost, Duration{0});
      lost.detail = s.message() + " (transaction rolled back)";
      return lost;
    }
    return store_failure(s);
  }
  return step.landed(s);
}

}  // namespace idem::detail

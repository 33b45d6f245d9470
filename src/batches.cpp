// Engine::process_batch (docs/design.md §2): one claim_batch and one commit_batch for
// the batch's first copies, or one store transaction for the whole batch; the gated
// batch is gated_batch.cpp.
#include <string>

#include "batch_index.hpp"
#include "claimed_step.hpp"
#include "pipeline.hpp"

namespace idem::detail {

std::vector<Decision> Pipeline::process_batch(std::span<const MessageView> ms, detail::HandlerThunk h) {
  if (o_.guarantee == Guarantee::kEffectivelyOnce && !o_.transactional && entity_gated(o_))
    return process_batch_gated(ms, h);
  if (batch_in_one_transaction(ms.size())) return process_batch_in_one_transaction(ms, h);
  std::vector<Decision> out(ms.size());
  if (o_.guarantee != Guarantee::kEffectivelyOnce || o_.transactional || entity_gated(o_) ||
      o_.ordering.mode == Ordering::kWatermark) {
    for (std::size_t i = 0; i < ms.size(); ++i) out[i] = process(ms[i], h, i);
    return out;
  }
  // Validate; find each id's first copy in the batch.
  std::vector<bool> finished(ms.size(), false);  // decided and counted by process()
  std::vector<std::size_t> firsts;
  firsts.reserve(ms.size());
  std::vector<std::size_t> repeats;  // later copies of an id seen earlier in the batch
  BatchIndex seen(ms.size());
  for (std::size_t i = 0; i < ms.size(); ++i) {
    if (auto bad_decision = validate(ms[i])) {
      out[i] = *bad_decision;
      continue;
    }
    if (seen.insert(*ms[i].id).second) {
      firsts.push_back(i);
    } else {
      repeats.push_back(i);
      finished[i] = true;
    }
  }
  std::vector<std::optional<std::uint64_t>> fps(ms.size());
  std::vector<ClaimRequest> claims;
  claims.reserve(firsts.size());
  const TimePoint start = clock_.read();
  for (std::size_t i : firsts) {
    fps[i] = fingerprint_of(ms[i]);
    claims.push_back({*ms[i].id, o_.owner, o_.lease, fps[i], start, std::nullopt});
  }
  auto results = clock_.timed_store([&] { return impl_.store->claim_batch(claims); });

  // Run handlers in input order; successes are committed together.
  std::vector<CommitRequest> commits;
  commits.reserve(firsts.size());
  std::vector<std::size_t> commit_index;
  commit_index.reserve(firsts.size());
  std::vector<Run> runs(ms.size());
  std::vector<std::optional<TimePoint>> handler_start(ms.size());
  for (std::size_t k = 0; k < firsts.size(); ++k) {
    const std::size_t i = firsts[k];
    const MessageView& m = ms[i];
    auto& claim = results[k];
    if (!claim.ok() || claim->status != ClaimStatus::kNew) {
      clock_.started(m, start, handler_start[i]);
      out[i] = claim.ok() ? answer_existing(*claim) : fail_open_or_closed(m, h, i, claim.status(), start);
      continue;
    }
    // The latest clock reading (the previous handler's end, or the claim's start): only
    // bookkeeping without store calls has run since, so it is this handler's start.
    // If the lease had to be renewed and was lost meanwhile, this copy goes through the
    // single-message path instead.
    const TimePoint t = clock_.last();
    TimePoint lease_until = start + o_.lease;
    if (lease_renewal_due(start, t, o_.lease)) {
      Status s = clock_.timed_store([&] { return impl_.store->extend({*m.id, o_.owner, o_.lease, t, std::nullopt}); });
      if (!s.ok()) {
        out[i] = process(m, h, i);
        finished[i] = true;
        continue;
      }
      lease_until = t + o_.lease;
    }
    clock_.started(m, t, handler_start[i]);
    ClaimedStep step(*this, subject_of(m, fps[i]), claim->retries, t, lease_until, nullptr, &runs[i]);
    if (!step.run(handler_of(h, i))) {
      out[i] = step.failed();
      continue;
    }
    commits.push_back(step.commit());
    out[i] = step.decision();
    commit_index.push_back(i);
  }
  if (!commits.empty()) {
    auto statuses = clock_.timed_store([&] { return impl_.store->commit_batch(commits); });
    for (std::size_t k = 0; k < commit_index.size(); ++k) {
      const std::size_t i = commit_index[k];
      after_commit(statuses[k], runs[i], out[i]);
    }
  }
  for (std::size_t i = 0; i < ms.size(); ++i) {
    if (!finished[i]) finish(ms[i], out[i], handler_start[i]);
  }
  // A later copy of an id in the same batch meets the store as the earlier copies left
  // it, one at a time, so that it gets exactly the decision sequential process() gives
  // (e.g. a copy after a failed first copy runs the handler again). Repeats are rare;
  // each costs one more store round trip.
  for (std::size_t i : repeats) out[i] = process(ms[i], h, i);
  return out;
}

// Transactional consumers without entity gates or watermarks, over a store with batch
// transactions: one transaction for the batch; each message's handler and commit run
// in a nested transaction (a savepoint: run_claimed's begin() nests), so a failed
// handler's writes roll back alone and the rest commit together. When the batch's
// commit fails nothing landed: every decision that is not bad_message becomes the
// store failure's retry (the metrics count both).
std::vector<Decision> Pipeline::process_batch_in_one_transaction(std::span<const MessageView> ms, detail::HandlerThunk h) {
  std::vector<Decision> out(ms.size());
  auto batch = clock_.timed_store([&] { return impl_.store->begin_batch(clock_.read()); });
  if (!batch.ok()) {
    log_warn(impl_.log, "idem: batch transaction not started ({}); one transaction per message",
             batch.status().to_string());
    for (std::size_t i = 0; i < ms.size(); ++i) out[i] = process(ms[i], h, i);
    return out;
  }
  std::vector<OutboxEntry> outgoing;  // sent once the batch has committed
  if (impl_.dispatcher) deferred_outbox_ = &outgoing;
  for (std::size_t i = 0; i < ms.size(); ++i) out[i] = process(ms[i], h, i);
  deferred_outbox_ = nullptr;
  if (impl_.dispatcher) (void)impl_.dispatcher->flush_marks(clock_.last());  // the earlier batches' sent messages
  const Status s = clock_.timed_store([&] { return (*batch)->commit(); });
  if (s.ok()) {
    if (!outgoing.empty()) (void)impl_.dispatcher->send(outgoing);  // a failure is logged; resent later
    return out;
  }
  const Decision failed = store_failure(s);
  for (Decision& d : out) {
    if (d.reason == Reason::kBadMessage) continue;
    d = failed;
    metrics_.count(d);
  }
  return out;
}

bool Pipeline::batch_in_one_transaction(std::size_t n) const {
  return n > 1 && o_.transactional && !entity_gated(o_) && o_.ordering.mode != Ordering::kWatermark &&
         (o_.guarantee == Guarantee::kEffectivelyOnce || o_.guarantee == Guarantee::kManual) &&
         impl_.store->capabilities().batch_transactions;
}

}  // namespace idem::detail

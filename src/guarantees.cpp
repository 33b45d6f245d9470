// The single-message path (docs/design.md §2): validation, then the path of the
// consumer's guarantee (at_least_once, at_most_once, effectively_once and manual, and
// fail-open when the store fails), each through a ClaimedStep.
#include <algorithm>
#include <string>

#include "claimed_step.hpp"
#include "pipeline.hpp"

namespace idem::detail {

Decision Pipeline::process(const MessageView& m, detail::HandlerThunk h, std::size_t index) {
  std::optional<TimePoint> start;
  Decision d = decide(m, h, index, start);
  if (start && m.received_at) metrics_.queue_wait.record(*start - *m.received_at);
  if (o_.ordering.mode == Ordering::kWatermark && d.action != Action::kRetry && d.action != Action::kHold &&
      d.reason != Reason::kBadMessage)
    impl_.watermarks.advance(*m.stream, *m.position);
  finish(m, d, start);
  return d;
}

Decision Pipeline::decide(const MessageView& m, detail::HandlerThunk h, std::size_t index, std::optional<TimePoint>& start) {
  if (auto bad_decision = validate(m)) return std::move(*bad_decision);
  if (o_.ordering.mode != Ordering::kNone || entity_gated(o_)) {
    if (auto bad_decision = validate_entity(m)) return std::move(*bad_decision);
    if (auto dropped = watermark_filter(m)) return std::move(*dropped);
    maybe_run_buffer_timers(h);
  }
  start.emplace();
  switch (o_.guarantee) {
    case Guarantee::kAtLeastOnce:
      return at_least_once(m, h, index, *start);
    case Guarantee::kAtMostOnce:
      return at_most_once(m, h, index, *start);
    case Guarantee::kEffectivelyOnce:
    case Guarantee::kManual:
      break;
  }
  return effectively_once(m, h, index, *start);
}

Decision Pipeline::at_least_once(const MessageView& m, detail::HandlerThunk h, std::size_t index, TimePoint& start) {
  start = clock_.read();
  // No durable count here: the broker's delivery count (if extracted) caps retries.
  const std::uint32_t delivered = std::max<std::uint32_t>(m.delivery_count.value_or(1), 1);
  const std::uint32_t retries = delivered - 1;
  ClaimedStep step(*this, subject_of(m, std::nullopt), retries, start, start);
  if (step.run(handler_of(h, index))) return Decision::ack(Reason::kProcessed);
  const Run& run = step.result();
  if (run.kind == HandlerResult::Kind::kRejected) return Decision::dead_letter(Reason::kHandlerRejected, run.error);
  if (m.delivery_count && retries >= o_.max_retries) return Decision::dead_letter(Reason::kRetriesExhausted, run.error);
  Decision d = Decision::retry(run.failure_reason, run.delay.count() > 0 ? run.delay : o_.backoff.delay_for(retries));
  d.detail = run.error;
  return d;
}

Decision Pipeline::at_most_once(const MessageView& m, detail::HandlerThunk h, std::size_t index, TimePoint& start) {
  const auto fp = fingerprint_of(m);
  start = clock_.read();
  auto claim = clock_.timed_store([&] { return impl_.store->claim({*m.id, o_.owner, o_.lease, fp, start, std::nullopt}); });
  if (!claim.ok()) return fail_open_or_closed(m, h, index, claim.status(), start);
  if (claim->status != ClaimStatus::kNew) return answer_existing(*claim);
  Status s = clock_.timed_store(
      [&] { return impl_.store->commit(commit_request(std::nullopt, *m.id, fp, Outcome::kProcessed, std::nullopt)); });
  if (!s.ok()) {
    Decision d = Decision::ack(Reason::kProcessed);
    after_commit(s, Run{}, d);
    return d;
  }
  note_commit();
  ClaimedStep step(*this, subject_of(m, fp), claim->retries, start, start);
  if (step.run(handler_of(h, index))) return Decision::ack(Reason::kProcessed);
  const Run& run = step.result();
  if (run.kind == HandlerResult::Kind::kRejected) return Decision::dead_letter(Reason::kHandlerRejected, run.error);
  log_error(impl_.log, "idem: at_most_once: handler failed for id {} and the message is dropped: {}", printable(*m.id),
            run.error);
  Decision d = Decision::ack(Reason::kHandlerFailed);
  d.detail = run.error;
  return d;
}

Decision Pipeline::effectively_once(const MessageView& m, detail::HandlerThunk h, std::size_t index, TimePoint& start) {
  const auto fp = fingerprint_of(m);
  start = clock_.read();  // the lease starts when the handler starts, not at receipt
  ClaimRequest req{*m.id, o_.owner, o_.lease, fp, start, std::nullopt};
  req.check_outbox = impl_.dispatcher != nullptr;
  const bool gated = entity_gated(o_);
  if (gated) req.entity_key = *m.key;
  auto claim = clock_.timed_store([&] { return impl_.store->claim(req); });
  if (!claim.ok()) return fail_open_or_closed(m, h, index, claim.status(), start);
  if (claim->status != ClaimStatus::kNew) {
    // A duplicate whose outgoing messages are still unsent sends them; the claim says
    // so, so a duplicate whose messages were sent reads nothing more.
    if (claim->status == ClaimStatus::kCompleted && claim->outbox_unsent && impl_.dispatcher)
      dispatch_pending_of(*m.id);
    return answer_existing(*claim);
  }
  if (!gated) return run_claimed(subject_of(m, fp), claim->retries, handler_of(h, index), start, nullptr);
  Gate g;
  if (auto early = gate(m, *claim, fp, h, index, g)) {
    if (g.advanced && o_.ordering.mode == Ordering::kStrict) drain(g.key, h);  // a dead-lettered version was used up
    return *early;
  }
  Decision d = run_claimed(subject_of(m, fp), claim->retries, handler_of(h, index), start, &g);
  if (g.advanced && o_.ordering.mode == Ordering::kStrict) drain(g.key, h);
  return d;
}

Decision Pipeline::fail_open_or_closed(const MessageView& m, detail::HandlerThunk h, std::size_t index, const Status& s,
                                       TimePoint start) {
  if (o_.on_store_failure == StoreFailurePolicy::kFailClosed) return store_failure(s);
  log_error(impl_.log, "idem: FAIL-OPEN: store unavailable ({}); running the handler for id {} without dedup",
            s.to_string(), printable(m.id.value_or("")));
  ClaimedStep step(*this, subject_of(m, std::nullopt), 0, start, start);
  if (step.run(handler_of(h, index))) return Decision::ack(Reason::kFailOpen);
  const Run& run = step.result();
  if (run.kind == HandlerResult::Kind::kRejected) return Decision::dead_letter(Reason::kHandlerRejected, run.error);
  Decision d = Decision::retry(run.failure_reason, run.delay.count() > 0 ? run.delay : o_.backoff.delay_for(0));
  d.detail = run.error;
  return d;
}

}  // namespace idem::detail

// The pieces every path of the pipeline (pipeline.hpp) shares: message validation, the
// answer to a claim that found its id held, the commit and release requests, what
// follows a commit or a failed run (retry, dead letter, lease lost), the purge
// cadence, the outbox's dispatch, and the counting of each decision.
#include "pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <string>


namespace idem::detail {

std::optional<Decision> Pipeline::validate(const MessageView& m) const {
  // Sizes the producer controls, checked under every guarantee.
  if (m.payload && m.payload->size() > o_.max_payload_bytes)
    return bad("message payload of " + std::to_string(m.payload->size()) + " bytes exceeds max_payload_bytes (" +
               std::to_string(o_.max_payload_bytes) + ")");
  if (m.event && m.event->size() > o_.max_event_bytes)
    return bad("message event of " + std::to_string(m.event->size()) + " bytes exceeds max_event_bytes (" +
               std::to_string(o_.max_event_bytes) + ")");
  if (!needs_dedup(o_.guarantee)) return std::nullopt;
  if (!m.id) return bad("message has no id (required by guarantee " + std::string(guarantee_name(o_.guarantee)) + ")");
  if (m.id->empty()) return bad("message id is empty");
  if (m.id->size() > o_.max_id_bytes)
    return bad("message id of " + std::to_string(m.id->size()) + " bytes exceeds max_id_bytes (" +
               std::to_string(o_.max_id_bytes) + ")");
  return std::nullopt;
}

Decision Pipeline::answer_existing(const ClaimResult& c) const {
  switch (c.status) {
    case ClaimStatus::kCompleted: {
      Decision d = Decision::ack(Reason::kDuplicate);
      d.result = c.result;
      if (c.dead_lettered) {
        d.detail = "dead-lettered before";
        d.dead_lettered = true;
      }
      return d;
    }
    case ClaimStatus::kInProgress: {
      Decision d = Decision::retry(Reason::kInProgress, c.lease_left);
      d.detail = "lease held by " + c.owner;
      return d;
    }
    case ClaimStatus::kConflict:
      if (o_.on_conflict == ConflictPolicy::kTreatAsDuplicate) return Decision::ack(Reason::kPayloadConflict);
      return Decision::dead_letter(Reason::kPayloadConflict, "id already seen with a different payload");
    case ClaimStatus::kNew:
      break;
  }
  return Decision::ack(Reason::kProcessed);  // not reached
}

Decision Pipeline::store_failure(const Status& s) const {
  log_error(impl_.log, "idem: store unavailable: {}", s.to_string());
  Decision d = Decision::retry(Reason::kStoreUnavailable, o_.store_retry_delay);
  d.detail = s.to_string();
  return d;
}

std::optional<std::string_view> Pipeline::storable_result(const Run& run, Decision& d) const {
  if (!run.result) return std::nullopt;
  if (run.result->size() > o_.max_result_bytes) {
    d.detail = "result of " + std::to_string(run.result->size()) + " bytes exceeds max_result_bytes (" +
               std::to_string(o_.max_result_bytes) + "); not stored";
    log_warn(impl_.log, "idem: {}", d.detail);
    return std::nullopt;
  }
  return *run.result;
}

CommitRequest Pipeline::commit_request(EntityKey key, std::string_view id, std::optional<std::uint64_t> fp,
                                       Outcome outcome, std::optional<std::string_view> result,
                                       const Gate* gate) const {
  CommitRequest c;
  c.id = id;
  c.owner = o_.owner;
  c.fingerprint = fp;
  c.now = clock_.last();
  c.ttl = o_.ttl;
  c.result = result;
  c.outcome = outcome;
  c.entity_key = key;
  if (gate != nullptr) {
    EntityWrite w;
    w.key = gate->key;
    w.expect_revision = gate->revision;
    w.version = gate->version;
    if (!gate->to.empty()) w.state = gate->to;
    if (gate->drained) w.unbuffer = gate->version;
    c.entity = w;
  }
  return c;
}

ReleaseRequest Pipeline::release_req(EntityKey key, std::string_view id, bool count_retry) const {
  return {id, o_.owner, count_retry, clock_.last(), o_.ttl, key};
}

void Pipeline::after_commit(const Status& s, const Run& run, Decision& d) {
  if (s.ok()) {
    d.result = run.result;
    note_commit();
    return;
  }
  if (s.code() == StatusCode::kFailedPrecondition) {
    log_warn(impl_.log, "idem: lease lost before commit: {}", s.message());
    d = Decision::ack(Reason::kLeaseLost);
    d.detail = s.message();
    return;
  }
  d = store_failure(s);
}

Decision Pipeline::after_failure(EntityKey key, std::string_view id, std::optional<std::uint64_t> fp,
                                 std::uint32_t retries, const Run& run, Gate* gate) {
  if (run.unacknowledged) {
    Status s = clock_.timed_store([&] { return impl_.store->release(release_req(key, id, false)).status(); });
    if (!s.ok()) log_error(impl_.log, "idem: release failed: {}", s.to_string());
    Decision d = Decision::hold(Reason::kUnacknowledged);
    d.detail = "manual guarantee: the handler neither acked nor nacked";
    return d;
  }
  if (run.kind == HandlerResult::Kind::kRejected)
    return dead_letter_now(key, id, fp, gate, Reason::kHandlerRejected, run.error);
  if (retries >= o_.max_retries) return dead_letter_now(key, id, fp, gate, Reason::kRetriesExhausted, run.error);
  auto r = clock_.timed_store([&] { return impl_.store->release(release_req(key, id, true)); });
  if (!r.ok()) log_error(impl_.log, "idem: release failed (the lease will expire instead): {}", r.status().to_string());
  const Duration delay = run.delay.count() > 0 ? run.delay : o_.backoff.delay_for(retries);
  Decision d = Decision::retry(run.failure_reason, delay);
  d.detail = run.error;
  return d;
}

void Pipeline::note_commit() {
  if (o_.purge_every == 0) return;
  // A load and a store rather than an atomic increment (a locked instruction per
  // message): commits that race on several threads may count once, which only delays
  // a purge a little.
  const std::uint64_t n = impl_.commits.load(std::memory_order_relaxed) + 1;
  if (n < o_.purge_every) {
    impl_.commits.store(n, std::memory_order_relaxed);
    return;
  }
  impl_.commits.store(0, std::memory_order_relaxed);
  auto r = clock_.timed_store([&] { return impl_.store->purge_expired(clock_.last(), o_.purge_batch); });
  if (!r.ok()) log_warn(impl_.log, "idem: purge of expired records failed: {}", r.status().to_string());
  // A full batch means more may wait (left by a process that was killed, or by counts
  // lost to races): the next purge comes after an eighth of the interval, until one
  // removes less than a batch, so the expired backlog drains instead of lingering.
  if (r.ok() && *r >= o_.purge_batch)
    impl_.commits.store(o_.purge_every - std::max<std::size_t>(1, o_.purge_every / 8), std::memory_order_relaxed);
}

void Pipeline::finish(const MessageView& m, const Decision& d, std::optional<TimePoint> handler_start) {
  metrics_.count(d);
  if (o_.broker_ack_timeout.count() == 0 || !m.received_at) return;
  const TimePoint end = impl_.now();
  const auto total = end - *m.received_at;
  if (total <= o_.broker_ack_timeout) return;
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const TimePoint start = handler_start.value_or(end);
  const auto wait = duration_cast<milliseconds>(start - *m.received_at).count();
  const auto work = duration_cast<milliseconds>(end - start).count();
  metrics_.count_ack_timeout();
  log_warn(impl_.log,
           "idem: id {} took {} ms from receipt to decision, over the broker ack timeout of {} ms "
           "(queue wait {} ms, handler {} ms); cause: {}",
           printable(m.id.value_or("")), duration_cast<milliseconds>(total).count(), o_.broker_ack_timeout.count(),
           wait, work, wait >= work ? "queue wait (the timer started before the handler did)" : "handler time");
}

void Pipeline::dispatch_committed(std::vector<OutboxEntry>& entries) {
  if (deferred_outbox_ != nullptr) {
    for (OutboxEntry& e : entries) deferred_outbox_->push_back(std::move(e));
    return;
  }
  (void)impl_.dispatcher->send(entries);  // a failure is logged; a resend follows
}

void Pipeline::dispatch_pending_of(std::string_view id) {
  if (deferred_outbox_ == nullptr) {
    (void)impl_.dispatcher->send_pending_of(id, clock_.last());
    return;
  }
  (void)impl_.dispatcher->flush_marks(clock_.last());  // joins the open batch transaction
  auto pending = impl_.dispatcher->pending_of(id);
  if (!pending.ok()) return;  // left to the periodic resend
  for (OutboxEntry& e : *pending) deferred_outbox_->push_back(std::move(e));
}

Decision Pipeline::concurrent_update(const Status& s) const {
  log_warn(impl_.log, "idem: entity changed by another consumer before commit: {}", s.message());
  Decision d = Decision::retry(Reason::kConcurrentUpdate, Duration{0});
  d.detail = s.message();
  return d;
}

Decision Pipeline::dead_letter_now(EntityKey key, std::string_view id, std::optional<std::uint64_t> fp, Gate* gate,
                                   Reason why, std::string detail) {
  std::optional<Gate> g;
  if (gate != nullptr && o_.ordering.mode == Ordering::kStrict && gate->version) {
    g = *gate;
    g->to = {};
  }
  std::vector<OutboxEntry> letter;
  if (g && g->drained) letter = buffered_dead_letter(g->key, *g->version, id, g->message, why, detail);
  Status s = clock_.timed_store([&] {
    CommitRequest req = commit_request(key, id, fp, Outcome::kDeadLettered, std::nullopt, g ? &*g : nullptr);
    req.outbox = letter;
    return impl_.store->commit(req);
  });
  if (s.code() == StatusCode::kAborted) {
    (void)impl_.store->release(release_req(key, id, false));
    return concurrent_update(s);
  }
  if (!s.ok() && s.code() != StatusCode::kFailedPrecondition) return store_failure(s);
  if (s.ok() && g) gate->advanced = true;
  if (s.ok() && !letter.empty()) dispatch_committed(letter);
  return Decision::dead_letter(why, std::move(detail));
}

std::vector<OutboxEntry> Pipeline::buffered_dead_letter(std::string_view key, std::uint64_t version,
                                                        std::string_view id, std::string_view message, Reason why,
                                                        std::string_view detail) const {
  std::vector<OutboxEntry> out;
  if (o_.ordering.dead_letter_to.empty()) return out;
  OutboxEntry& e = out.emplace_back();
  e.incoming_id = std::string(id);
  e.destination = o_.ordering.dead_letter_to;
  e.message.id = std::string(id);
  e.message.body = std::string(message);
  e.message.headers = {{"idem-origin", std::string(id)},
                       {"idem-reason", std::string(reason_name(why))},
                       {"idem-detail", std::string(detail)},
                       {"idem-key", std::string(key)},
                       {"idem-version", std::to_string(version)}};
  e.created_at = clock_.last();
  return out;
}

}  // namespace idem::detail

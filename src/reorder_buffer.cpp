// Strict ordering's durable reorder buffer (docs/design.md §5): early versions put
// aside, drains of the versions next in order, the buffer's timers and gap policy.
#include <algorithm>
#include <chrono>
#include <string>

#include "buffer_frame.hpp"
#include "claimed_step.hpp"
#include "pipeline.hpp"

namespace idem::detail {

Decision Pipeline::buffer_early(const MessageView& m, std::optional<std::uint64_t> fp, detail::HandlerThunk h,
                                std::size_t index, std::uint64_t expected) {
  std::string message = frame_buffered(m.event.value_or(""), h.encode(h.self, index));
  if (deferred_puts_ != nullptr) {
    deferred_puts_->push_back({index, expected, std::move(message), clock_.last()});
    return Decision::ack(Reason::kBuffered);  // a placeholder: the batch decides once the put answers
  }
  BufferPut put{*m.key, *m.version, *m.id, message, clock_.last(), o_.ordering.limits};
  Status s = clock_.timed_store([&] { return impl_.store->entities()->buffer_put(put); });
  Decision d = after_buffer_put(m, fp, s, expected);
  if (s.ok()) {
    // The predecessor may have been committed (by another consumer) after our claim
    // read the entity and before the entry was stored: then nobody else will drain it.
    drain(*m.key, h);
  }
  return d;
}

Decision Pipeline::after_buffer_put(const MessageView& m, std::optional<std::uint64_t> fp, const Status& s,
                                    std::uint64_t expected) {
  if (s.code() == StatusCode::kFailedPrecondition) {
    return dead_letter_now(
        *m.key, *m.id, fp, nullptr, Reason::kBadMessage,
        "version " + std::to_string(*m.version) + " of this key is already buffered under another message id");
  }
  (void)clock_.timed_store([&] { return impl_.store->release(release_req(*m.key, *m.id, false)); });
  if (s.code() == StatusCode::kResourceExhausted) {
    log_warn(impl_.log, "idem: {}", s.message());
    Decision d = Decision::retry(Reason::kBufferFull, o_.ordering.buffer_full_delay);
    d.detail = s.message();
    return d;
  }
  if (!s.ok()) return store_failure(s);
  // A non-durable store would lose the buffered message in a crash: the delivery stays
  // unacked (hold) and on_buffered reports when it has been processed.
  Decision d =
      impl_.store->capabilities().durable ? Decision::ack(Reason::kBuffered) : Decision::hold(Reason::kBuffered);
  d.detail = "waiting for version " + std::to_string(expected);
  return d;
}

std::size_t Pipeline::drain(std::string_view key, detail::HandlerThunk h, HeldClaims* held) {
  {
    std::lock_guard lock(impl_.buffered_mu);
    auto nb =
        impl_.drain_not_before.empty() ? impl_.drain_not_before.end() : impl_.drain_not_before.find(std::string(key));
    if (nb != impl_.drain_not_before.end()) {
      if (clock_.read() < nb->second) return 0;
      impl_.drain_not_before.erase(nb);
    }
  }
  if (h.call_encoded == nullptr) return 0;
  const std::string owned_key(key);  // `key` may point into an entry replaced below
  std::size_t drained = 0;
  while (drained < o_.ordering.drain_per_call) {
    // The buffer first: after an in-order commit it is almost always empty, and then
    // this one read is all a drain costs. It must be read after every strict commit,
    // even by a consumer that buffered nothing: another consumer may have buffered the
    // successor after this one's claim read the entity.
    auto entries = clock_.timed_store([&] { return impl_.store->entities()->buffer_read(owned_key, 1); });
    if (!entries.ok() || entries->empty()) return drained;
    auto e = clock_.timed_store([&] { return impl_.store->entities()->read_entity(owned_key); });
    if (!e.ok()) return drained;
    const BufferEntry& next = entries->front();
    if (next.version <= e->version) {  // its version was applied by another message
      (void)clock_.timed_store([&] { return impl_.store->entities()->buffer_remove(owned_key, next.version); });
      report(next, stale_entry(next.version, e->version), nullptr);
      ++drained;
      continue;
    }
    if (next.version != e->version + 1 && e->version != 0) return drained;  // a gap
    if (e->version == 0 && o_.ordering.first_version && next.version != *o_.ordering.first_version) return drained;
    if (!run_buffered(next, h, held)) return drained;
    ++drained;
  }
  return drained;
}

bool Pipeline::run_buffered(const BufferEntry& e, detail::HandlerThunk h, HeldClaims* held) {
  const TimePoint start = clock_.read();
  ClaimRequest req{e.id, o_.owner, o_.lease, std::nullopt, start, e.key};
  auto claim = clock_.timed_store([&] { return impl_.store->claim(req); });
  if (!claim.ok()) return false;
  if (claim->status == ClaimStatus::kInProgress && held != nullptr) {
    auto mine = held->take(e.id, start);
    if (mine) {  // claimed at the caller's start: the entity as of now
      auto ent = clock_.timed_store([&] { return impl_.store->entities()->read_entity(e.key); });
      if (!ent.ok()) {
        (void)impl_.store->release(release_req(e.key, e.id, false));
        return false;
      }
      mine->entity = std::move(ent).value();
      claim = std::move(*mine);
    }
  }
  if (claim->status == ClaimStatus::kCompleted) {
    auto ent = clock_.timed_store([&] { return impl_.store->entities()->read_entity(e.key); });
    if (!ent.ok()) return false;
    if (ent->version >= e.version) {
      // Applied by another consumer (a redelivery of it) since this drain looked.
      (void)clock_.timed_store([&] { return impl_.store->entities()->buffer_remove(e.key, e.version); });
      return true;
    }
    if (ent->version + 1 != e.version) return false;
    // Done before without moving the version (e.g. dead-lettered by a gap policy that
    // stopped before removing the entry): it only uses up its version.
    EntityWrite w{e.key, ent->revision, e.version, std::nullopt, e.version};
    if (!clock_.timed_store([&] { return impl_.store->entities()->write_entity(w); }).ok()) return false;
    report(e, Decision::ack(Reason::kDuplicate), nullptr);
    return true;
  }
  if (claim->status != ClaimStatus::kNew) return false;  // another consumer runs it
  const EntityRecord& ent = claim->entity;
  if (ent.version != 0 && ent.version + 1 != e.version) {  // moved on since we looked
    (void)impl_.store->release(release_req(e.key, e.id, false));
    return ent.version >= e.version;
  }
  const auto frame = unframe_buffered(e.message);
  Gate g;
  g.key = e.key;
  g.revision = ent.revision;
  g.version = e.version;
  g.drained = true;
  g.message = frame ? frame->message : std::string_view(e.message);
  if (!frame) {
    report(
        e,
        dead_letter_now(e.key, e.id, std::nullopt, &g, Reason::kBadMessage, "buffered entry is not in idem's format"),
        &g);
    return g.advanced;
  }
  if (o_.machine) {
    const StateGate::Check chk = o_.machine->check(ent.state, frame->event);
    g.event = frame->event;
    g.from = chk.from;
    if (chk.answer == StateGate::Answer::kNotYetValid && claim->retries < o_.machine->max_retries()) {
      (void)clock_.timed_store([&] { return impl_.store->release(release_req(e.key, e.id, true)); });
      Decision d = Decision::retry(Reason::kInvalidTransition, o_.machine->backoff().delay_for(claim->retries));
      d.detail = chk.reason;
      report_paced(e, d, &g);
      return false;
    }
    if (chk.answer != StateGate::Answer::kApply) {
      const Reason why = chk.answer == StateGate::Answer::kNotYetValid ? Reason::kRetriesExhausted
                         : chk.answer == StateGate::Answer::kRejected  ? Reason::kBadMessage
                                                                       : Reason::kInvalidTransition;
      report(e, dead_letter_now(e.key, e.id, std::nullopt, &g, why, chk.reason), &g);
      return g.advanced;
    }
    g.to = chk.to;
  }
  bool decoded = true;
  auto invoke = [&](HandlerContext& ctx) {
    HandlerResult out = HandlerResult::ok();
    decoded = h.call_encoded(h.self, frame->message, ctx, out);
    return decoded ? out : HandlerResult::fail("the buffered message cannot be decoded");
  };
  const Subject subject{e.id, std::nullopt, e.key, e.version};
  Decision d = run_claimed(subject, claim->retries, invoke, start, &g);
  if (!decoded && d.action == Action::kRetry) {
    // Decoding will not get better with time.
    claim = clock_.timed_store([&] { return impl_.store->claim(req); });
    if (claim.ok() && claim->status == ClaimStatus::kNew) {
      g.revision = claim->entity.revision;
      d = dead_letter_now(e.key, e.id, std::nullopt, &g, Reason::kBadMessage, "the buffered message cannot be decoded");
    }
  }
  report_paced(e, d, &g);
  if (g.advanced && d.reason == Reason::kProcessed) metrics_.count_drained(1);
  return g.advanced;
}

void Pipeline::report_paced(const BufferEntry& e, const Decision& d, const Gate* g) {
  if (d.action == Action::kRetry) {
    std::lock_guard lock(impl_.buffered_mu);
    impl_.drain_not_before[e.key] = clock_.last() + d.delay;
  }
  report(e, d, g);
}

Decision Pipeline::stale_entry(std::uint64_t version, std::uint64_t applied) {
  Decision d = Decision::ack(Reason::kStale);
  d.detail = "version " + std::to_string(version) + " <= applied version " + std::to_string(applied);
  return d;
}

void Pipeline::report(const BufferEntry& e, const Decision& d, const Gate* g) {
  metrics_.count_buffered_outcome(d);
  if (!o_.on_buffered) {
    if (d.action == Action::kDeadLetter)
      log_error(impl_.log,
                "idem: buffered message {} (version {}) dead-lettered ({}) and no on_buffered listener is set",
                printable(e.id), e.version, reason_name(d.reason));
    return;
  }
  BufferedOutcome out;
  out.key = e.key;
  out.version = e.version;
  out.id = e.id;
  if (auto f = unframe_buffered(e.message)) out.message = std::string(f->message);
  out.decision = d;
  if (g != nullptr && d.reason == Reason::kProcessed && !g->to.empty()) {
    out.from = std::string(g->from);
    out.to = std::string(g->to);
  }
  o_.on_buffered(out);
}

std::size_t Pipeline::run_buffer_timers(detail::HandlerThunk h) {
  if (o_.ordering.mode != Ordering::kStrict) return 0;
  constexpr std::size_t kKeysPerTick = 256;
  auto summary =
      clock_.timed_store([&] { return impl_.store->entities()->buffer_summary(std::max(kKeysPerTick, o_.ordering.gap_report_keys)); });
  if (!summary.ok()) {
    log_warn(impl_.log, "idem: reading the reorder buffer failed: {}", summary.status().to_string());
    return 0;
  }
  std::size_t moved = 0;
  for (const BufferedKey& k : summary->keys) {
    moved += drain(k.key, h);
    if (clock_.read() - k.oldest_at >= o_.ordering.gap_timeout) moved += apply_gap_policy(k, h);
  }
  // Refresh the gauges after the work above.
  auto after = impl_.store->entities()->buffer_summary(o_.ordering.gap_report_keys);
  if (after.ok()) {
    std::vector<GapAge> ages;
    const TimePoint now = clock_.read();
    for (const BufferedKey& k : after->keys)
      ages.push_back({k.key, std::chrono::duration_cast<Duration>(now - k.oldest_at), k.count, k.lowest_version});
    metrics_.set_buffer(after->count, after->bytes, std::move(ages));
  }
  return moved;
}

std::size_t Pipeline::apply_gap_policy(const BufferedKey& k, detail::HandlerThunk h) {
  auto ent = clock_.timed_store([&] { return impl_.store->entities()->read_entity(k.key); });
  auto entries = clock_.timed_store([&] { return impl_.store->entities()->buffer_read(k.key, o_.ordering.limits.per_key); });
  if (!ent.ok() || !entries.ok() || entries->empty()) return 0;
  const std::uint64_t lowest = entries->front().version;
  if (lowest == ent->version + 1) return 0;  // no gap (any more)
  switch (o_.ordering.gap_policy) {
    case GapPolicy::kHold:
      return 0;  // reported by the gap-age metrics
    case GapPolicy::kSkip: {
      const std::uint64_t from = ent->version + 1;
      EntityWrite w{k.key, ent->revision, lowest - 1, std::nullopt, std::nullopt};
      if (!clock_.timed_store([&] { return impl_.store->entities()->write_entity(w); }).ok()) return 0;
      metrics_.count_skipped(lowest - from);
      log_warn(impl_.log, "idem: gap timeout on key {}: skipped versions {}..{} after {} ms", printable(k.key), from,
               lowest - 1, o_.ordering.gap_timeout.count());
      return drain(k.key, h);
    }
    case GapPolicy::kDeadLetter:
      return dead_letter_gap(k.key, *entries, ent->version + 1);
  }
  return 0;
}

std::size_t Pipeline::dead_letter_gap(std::string_view key, const std::vector<BufferEntry>& entries,
                                      std::uint64_t missing) {
  const std::string detail = "version " + std::to_string(missing) + " did not arrive within ordering.gap_timeout";
  std::size_t moved = 0;
  for (const BufferEntry& e : entries) {
    const TimePoint now = clock_.read();
    auto claim =
        clock_.timed_store([&] { return impl_.store->claim({e.id, o_.owner, o_.lease, std::nullopt, now, e.key}); });
    if (!claim.ok() || claim->status == ClaimStatus::kInProgress) break;
    if (claim->status == ClaimStatus::kNew) {
      const auto frame = unframe_buffered(e.message);
      std::vector<OutboxEntry> letter = buffered_dead_letter(
          key, e.version, e.id, frame ? frame->message : std::string_view(e.message), Reason::kGapTimeout, detail);
      Status s = clock_.timed_store([&] {
        CommitRequest req = commit_request(key, e.id, std::nullopt, Outcome::kDeadLettered, std::nullopt);
        req.outbox = letter;
        return impl_.store->commit(req);
      });
      if (!s.ok()) break;
      if (!letter.empty()) dispatch_committed(letter);
    }
    (void)clock_.timed_store([&] { return impl_.store->entities()->buffer_remove(e.key, e.version); });
    report(e, Decision::dead_letter(Reason::kGapTimeout, detail), nullptr);
    ++moved;
  }
  return moved;
}

void Pipeline::maybe_run_buffer_timers(detail::HandlerThunk h) {
  if (o_.ordering.mode != Ordering::kStrict) return;
  const std::int64_t now = impl_.now().time_since_epoch().count();
  std::int64_t last = impl_.last_timers_ns.load(std::memory_order_relaxed);
  const std::int64_t every = std::chrono::duration_cast<std::chrono::nanoseconds>(o_.ordering.gap_timeout).count() / 4;
  const bool first = !impl_.timers_ran.load(std::memory_order_relaxed);
  if (!first && now - last < every) return;
  if (!impl_.last_timers_ns.compare_exchange_strong(last, now)) return;
  impl_.timers_ran.store(true, std::memory_order_relaxed);
  run_buffer_timers(h);
}

}  // namespace idem::detail

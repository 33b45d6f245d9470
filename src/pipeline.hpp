// The pipeline of docs/design.md §2, shared by engine.cpp (dedup, guarantees, batches) and
// entity_gate.cpp (ordering, state machines, the reorder buffer). Internal.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "idem/engine.hpp"
#include "idem/fingerprint.hpp"
#include "idem/state_gate.hpp"
#include "log.hpp"
#include "lookahead.hpp"
#include "watermarks.hpp"

namespace idem::detail {

// The outcome of running the handler once.
struct Run {
  HandlerResult::Kind kind = HandlerResult::Kind::kOk;
  std::optional<std::string> result;
  std::string error;
  Duration delay{0};
  Reason failure_reason = Reason::kHandlerFailed;
  bool unacknowledged = false;  // manual: neither ack nor nack
};

// What the entity gates decided for a message that may run: the entity write its
// commit carries.
struct Gate {
  std::string_view key;
  std::uint64_t revision = 0;            // the entity revision read with the claim
  std::optional<std::uint64_t> version;  // the version to apply (ordering)
  std::string_view event, from, to;      // the transition (state machine)
  bool drained = false;                  // the message comes from the reorder buffer
  // Set by the step whose commit carrying `version` landed (a processed message, or a
  // dead-lettered one that uses up its version under strict ordering): the key's
  // successors may be next.
  bool advanced = false;
};

// The entity key a store request carries (ClaimRequest::entity_key): the message's key
// when the consumer is entity-gated, none otherwise.
using EntityKey = std::optional<std::string_view>;

// In process_batch, a claim's lease is renewed at handler start once more than
// 1/kBatchLeaseRenewDivisor of it has passed since the batch was claimed.
constexpr int kBatchLeaseRenewDivisor = 10;

// True iff messages go through the entity gates (ordering by version, a state machine).
inline bool entity_gated(const ConsumerOptions& o) {
  return o.ordering.mode == Ordering::kMonotonic || o.ordering.mode == Ordering::kStrict || o.machine != nullptr;
}

struct Engine::Impl {
  std::shared_ptr<Clock> clock;
  spdlog::logger* log = nullptr;
  Store* store = nullptr;
  std::atomic<bool> warned_manual{false};
  std::atomic<std::uint64_t> commits{0};

  Watermarks watermarks;  // Ordering::kWatermark

  // Strict ordering: per key, no drain before this time (the backoff after a buffered
  // message failed).
  std::mutex buffered_mu;
  std::unordered_map<std::string, TimePoint> drain_not_before;
  std::atomic<std::int64_t> last_tick_ns{0};  // process() ticks every gap_timeout / 4
  std::atomic<bool> ticked{false};            // the first process() ticks at once

  // Consumer::process(m, next): the claim of `next` taken with m's commit (lookahead.cpp).
  Lookahead lookahead;

  TimePoint now() const { return clock->now(); }
};

// HandlerContext's private fields are set and read here only.
struct ContextAccess {
  using Manual = HandlerContext::Manual;
  static void init(HandlerContext& ctx, Engine* e, std::string_view id, std::uint32_t attempt, Guarantee g,
                   TimePoint lease_until, StoreTransaction* txn, const Gate* gate = nullptr,
                   std::optional<std::uint64_t> version = std::nullopt) {
    if (gate != nullptr) {
      ctx.key_ = gate->key;
      ctx.event_ = gate->event;
      ctx.from_ = gate->from;
      ctx.to_ = gate->to;
      ctx.drained_ = gate->drained;
    }
    ctx.version_ = version.value_or(0);
    ctx.engine_ = e;
    ctx.id_ = id;
    ctx.attempt_ = attempt;
    ctx.guarantee_ = g;
    ctx.lease_until_ = lease_until;
    ctx.transaction_ = txn;
  }
  static Manual manual(const HandlerContext& ctx) { return ctx.manual_; }
  static Duration nack_delay(const HandlerContext& ctx) { return ctx.nack_delay_; }
};

class Pipeline {
 public:
  Pipeline(Engine& e, const ConsumerOptions& o, Engine::Impl& impl, Metrics& m)
      : engine_(e), o_(o), impl_(impl), metrics_(m) {}

  // Returns a bad_message decision if m cannot be processed as it is.
  std::optional<Decision> validate(const MessageView& m) const {
    if (!needs_dedup(o_.guarantee)) return std::nullopt;
    if (!m.id)
      return bad("message has no id (required by guarantee " + std::string(guarantee_name(o_.guarantee)) + ")");
    if (m.id->empty()) return bad("message id is empty");
    if (m.id->size() > o_.max_id_bytes)
      return bad("message id of " + std::to_string(m.id->size()) + " bytes exceeds max_id_bytes (" +
                 std::to_string(o_.max_id_bytes) + ")");
    return std::nullopt;
  }

  static Decision bad(std::string why) { return Decision::dead_letter(Reason::kBadMessage, std::move(why)); }

  static std::optional<std::uint64_t> fingerprint_of(const MessageView& m) {
    if (!m.payload) return std::nullopt;
    return fingerprint(*m.payload);
  }

  // Reads the clock once; last_ then serves every step until the next read, so that
  // one message costs four clock reads (start, after claim, after handler, after
  // commit) rather than two per timed step.
  TimePoint tick() { return last_ = impl_.now(); }

  // Runs one store call, timed from last_ (REQUIRES: fresh, i.e. set by the step just
  // before) to a new tick(). Without latency_metrics: untimed, last_ unchanged.
  template <class F>
  auto timed_store(F&& f) {
    if (!o_.latency_metrics) return f();
    const TimePoint t0 = last_;
    auto r = f();
    metrics_.store_latency.record(tick() - t0);
    return r;
  }

  // Notes that message m's handler (or, if it will not run, its decision) starts at t:
  // the queue wait since receipt, and `at` (what finish() reports against).
  void started(const MessageView& m, TimePoint t, std::optional<TimePoint>& at) {
    at = t;
    if (m.received_at) metrics_.queue_wait.record(t - *m.received_at);
  }

  // The decision for a claim that did not grant the lease.
  Decision answer_existing(const ClaimResult& c) const {
    switch (c.status) {
      case ClaimStatus::kCompleted: {
        Decision d = Decision::ack(Reason::kDuplicate);
        d.result = c.result;
        if (c.dead_lettered) d.detail = "dead-lettered before";
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

  Decision store_failure(const Status& s) const {
    log_error(impl_.log, "idem: store unavailable: {}", s.to_string());
    Decision d = Decision::retry(Reason::kStoreUnavailable, o_.store_retry_delay);
    d.detail = s.to_string();
    return d;
  }

  // Runs the handler of message `index`, translating exceptions and manual ack/nack
  // into a Run.
  Run run_handler(HandlerThunk h, std::size_t index, HandlerContext& ctx, TimePoint start) {
    return run_handler_with([&](HandlerContext& c) { return h.call(h.self, index, c); }, ctx, start);
  }

  // As run_handler, for any invocation `f(ctx) -> HandlerResult`.
  template <class F>
  Run run_handler_with(F&& f, HandlerContext& ctx, TimePoint start) {
    Run run;
    try {
      HandlerResult r = f(ctx);
      run.kind = r.kind();
      run.result = r.result();
      run.error = r.error();
      run.delay = r.delay();
      if (run.kind == HandlerResult::Kind::kRetryRequested) run.failure_reason = Reason::kRetryRequested;
    } catch (const std::exception& e) {
      run.kind = HandlerResult::Kind::kFailed;
      run.error = std::string("handler threw: ") + e.what();
    } catch (...) {
      run.kind = HandlerResult::Kind::kFailed;
      run.error = "handler threw a non-std exception";
    }
    const TimePoint end = tick();  // also the commit's "now": always read
    if (o_.latency_metrics) metrics_.handler_latency.record(end - start);
    if (o_.guarantee == Guarantee::kManual && run.kind == HandlerResult::Kind::kOk) {
      switch (ContextAccess::manual(ctx)) {
        case ContextAccess::Manual::kAck:
          break;
        case ContextAccess::Manual::kNack:
          run.kind = HandlerResult::Kind::kRetryRequested;
          run.failure_reason = Reason::kNacked;
          run.delay = ContextAccess::nack_delay(ctx);
          break;
        case ContextAccess::Manual::kNone:
          run.unacknowledged = true;
      }
    }
    if (run.kind != HandlerResult::Kind::kOk)
      log_warn(impl_.log, "idem: handler failed for id {}: {}", printable(ctx.id()), run.error);
    return run;
  }

  // A result too large to store is dropped (the effect happened, so the commit must).
  std::optional<std::string_view> storable_result(const Run& run, Decision& d) const {
    if (!run.result) return std::nullopt;
    if (run.result->size() > o_.max_result_bytes) {
      d.detail = "result of " + std::to_string(run.result->size()) + " bytes exceeds max_result_bytes (" +
                 std::to_string(o_.max_result_bytes) + "); not stored";
      log_warn(impl_.log, "idem: {}", d.detail);
      return std::nullopt;
    }
    return *run.result;
  }

  CommitRequest commit_request(EntityKey key, std::string_view id, std::optional<std::uint64_t> fp, Outcome outcome,
                               std::optional<std::string_view> result, const Gate* gate = nullptr) const {
    CommitRequest c;
    c.id = id;
    c.owner = o_.owner;
    c.fingerprint = fp;
    c.now = last_;
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

  ReleaseRequest release_req(EntityKey key, std::string_view id, bool count_retry) const {
    return {id, o_.owner, count_retry, last_, o_.ttl, key};
  }

  // The decision after a successful handler run whose commit returned `s`.
  Decision after_commit(const Status& s, const Run& run, Decision d) {
    if (s.ok()) {
      d.result = run.result;
      note_commit();
      return d;
    }
    if (s.code() == StatusCode::kFailedPrecondition) {
      log_warn(impl_.log, "idem: lease lost before commit: {}", s.message());
      Decision lost = Decision::ack(Reason::kLeaseLost);
      lost.detail = s.message();
      return lost;
    }
    return store_failure(s);
  }

  // A failed run under a lease: dead-letter at the cap, else release and retry.
  // Under strict ordering a dead-lettered message still uses up its version (`gate`),
  // so that its successors can run (then gate->advanced is set). Requests carry `key`.
  Decision after_failure(EntityKey key, std::string_view id, std::optional<std::uint64_t> fp, std::uint32_t retries,
                         const Run& run, Gate* gate = nullptr) {
    if (run.unacknowledged) {
      Status s = timed_store([&] { return impl_.store->release(release_req(key, id, false)).status(); });
      if (!s.ok()) log_error(impl_.log, "idem: release failed: {}", s.to_string());
      Decision d = Decision::hold(Reason::kUnacknowledged);
      d.detail = "manual guarantee: the handler neither acked nor nacked";
      return d;
    }
    if (retries >= o_.max_retries) return dead_letter_now(key, id, fp, gate, Reason::kRetriesExhausted, run.error);
    auto r = timed_store([&] { return impl_.store->release(release_req(key, id, true)); });
    if (!r.ok())
      log_error(impl_.log, "idem: release failed (the lease will expire instead): {}", r.status().to_string());
    const Duration delay = run.delay.count() > 0 ? run.delay : o_.backoff.delay_for(retries);
    Decision d = Decision::retry(run.failure_reason, delay);
    d.detail = run.error;
    return d;
  }

  void note_commit() {
    if (o_.purge_every == 0) return;
    if (impl_.commits.fetch_add(1, std::memory_order_relaxed) % o_.purge_every != o_.purge_every - 1) return;
    auto r = timed_store([&] { return impl_.store->purge_expired(last_, o_.purge_batch); });
    if (!r.ok()) log_warn(impl_.log, "idem: purge of expired records failed: {}", r.status().to_string());
  }

  void finish(const MessageView& m, const Decision& d, std::optional<TimePoint> handler_start) {
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

  // --- the paths of each guarantee -------------------------------------------------

  Decision at_least_once(const MessageView& m, HandlerThunk h, std::size_t index, TimePoint& start) {
    start = tick();
    HandlerContext ctx;
    ContextAccess::init(ctx, &engine_, m.id.value_or(""), m.delivery_count.value_or(1), o_.guarantee, start, nullptr);
    const Run run = run_handler(h, index, ctx, start);
    if (run.kind == HandlerResult::Kind::kOk) return Decision::ack(Reason::kProcessed);
    // No durable count here: the broker's delivery count (if extracted) caps retries.
    const std::uint32_t retries = m.delivery_count.value_or(1) > 0 ? m.delivery_count.value_or(1) - 1 : 0;
    if (m.delivery_count && retries >= o_.max_retries)
      return Decision::dead_letter(Reason::kRetriesExhausted, run.error);
    Decision d = Decision::retry(run.failure_reason, run.delay.count() > 0 ? run.delay : o_.backoff.delay_for(retries));
    d.detail = run.error;
    return d;
  }

  Decision at_most_once(const MessageView& m, HandlerThunk h, std::size_t index, TimePoint& start) {
    const auto fp = fingerprint_of(m);
    start = tick();
    auto claim = timed_store([&] { return impl_.store->claim({*m.id, o_.owner, o_.lease, fp, start, std::nullopt}); });
    if (!claim.ok()) return fail_open_or_closed(m, h, index, claim.status(), start);
    if (claim->status != ClaimStatus::kNew) return answer_existing(*claim);
    Status s = timed_store([&] {
      return impl_.store->commit(commit_request(std::nullopt, *m.id, fp, Outcome::kProcessed, std::nullopt));
    });
    if (!s.ok()) return after_commit(s, Run{}, Decision::ack(Reason::kProcessed));
    note_commit();
    HandlerContext ctx;
    ContextAccess::init(ctx, &engine_, *m.id, claim->retries + 1, o_.guarantee, start, nullptr);
    const Run run = run_handler(h, index, ctx, start);
    if (run.kind == HandlerResult::Kind::kOk) return Decision::ack(Reason::kProcessed);
    log_error(impl_.log, "idem: at_most_once: handler failed for id {} and the message is dropped: {}",
              printable(*m.id), run.error);
    Decision d = Decision::ack(Reason::kHandlerFailed);
    d.detail = run.error;
    return d;
  }

  // effectively_once and manual.
  Decision effectively_once(const MessageView& m, HandlerThunk h, std::size_t index, TimePoint& start) {
    const auto fp = fingerprint_of(m);
    start = tick();  // the lease starts when the handler starts, not at receipt
    ClaimRequest req{*m.id, o_.owner, o_.lease, fp, start, std::nullopt};
    const bool gated = entity_gated(o_);
    if (gated) req.entity_key = *m.key;
    auto claim = timed_store([&] { return impl_.store->claim(req); });
    if (!claim.ok()) return fail_open_or_closed(m, h, index, claim.status(), start);
    if (claim->status != ClaimStatus::kNew) return answer_existing(*claim);
    if (!gated) return run_claimed(*m.id, fp, claim->retries, handler_of(h, index), start, nullptr, m.version);
    Gate g;
    if (auto early = gate(m, *claim, fp, h, index, g)) {
      if (g.advanced && o_.ordering.mode == Ordering::kStrict) drain(g.key, h);  // a dead-lettered version was used up
      return *early;
    }
    Decision d = run_claimed(*m.id, fp, claim->retries, handler_of(h, index), start, &g, m.version);
    if (g.advanced && o_.ordering.mode == Ordering::kStrict) drain(g.key, h);
    return d;
  }

  // The handler of message `index` as an invocation for run_claimed.
  struct IndexedHandler {
    HandlerThunk h;
    std::size_t index;
    HandlerResult operator()(HandlerContext& ctx) const { return h.call(h.self, index, ctx); }
  };
  static IndexedHandler handler_of(HandlerThunk h, std::size_t index) { return {h, index}; }

  // Runs the handler (`invoke(ctx)`) under a lease already taken at `start`, then
  // commits (with the entity write of `gate`, if any; its requests then carry gate->key
  // and gate->advanced is set once a version lands) or fails.
  // The handler's lease runs until `lease_until` (default: start + lease).
  template <class F>
  Decision run_claimed(std::string_view id, std::optional<std::uint64_t> fp, std::uint32_t retries, F&& invoke,
                       TimePoint start, Gate* gate, std::optional<std::uint64_t> version,
                       std::optional<TimePoint> lease_until = std::nullopt) {
    const EntityKey key = gate != nullptr ? EntityKey(gate->key) : std::nullopt;
    std::unique_ptr<StoreTransaction> txn;
    if (o_.transactional) {
      auto t = timed_store([&] { return impl_.store->begin(last_); });
      if (!t.ok()) {
        (void)impl_.store->release(release_req(key, id, false));
        return store_failure(t.status());
      }
      txn = std::move(t).value();
    }
    HandlerContext ctx;
    ContextAccess::init(ctx, &engine_, id, retries + 1, o_.guarantee, lease_until.value_or(start + o_.lease), txn.get(),
                        gate, version);
    const Run run = run_handler_with(invoke, ctx, start);
    if (run.kind != HandlerResult::Kind::kOk || run.unacknowledged) {
      if (txn) txn->rollback();
      txn.reset();
      return after_failure(key, id, fp, retries, run, gate);
    }
    Decision d = Decision::ack(Reason::kProcessed);
    const auto result = storable_result(run, d);
    const CommitRequest req = commit_request(key, id, fp, Outcome::kProcessed, result, gate);
    Status s = timed_store([&] { return txn ? txn->commit(req) : impl_.store->commit(req); });
    if (s.ok() && gate != nullptr && gate->version) gate->advanced = true;
    if (!s.ok() && (txn || s.code() == StatusCode::kAborted)) {
      // Nothing was committed: with a transaction the handler's writes were rolled back
      // with it, so a redelivery may run it again at once. kAborted: another consumer
      // changed the entity since the claim read it.
      txn.reset();
      (void)impl_.store->release(release_req(key, id, false));
      if (s.code() == StatusCode::kAborted) return concurrent_update(s);
      if (s.code() == StatusCode::kFailedPrecondition) {
        Decision lost = Decision::retry(Reason::kLeaseLost, Duration{0});
        lost.detail = s.message() + " (transaction rolled back)";
        return lost;
      }
      return store_failure(s);
    }
    return after_commit(s, run, std::move(d));
  }

  Decision concurrent_update(const Status& s) const {
    log_warn(impl_.log, "idem: entity changed by another consumer before commit: {}", s.message());
    Decision d = Decision::retry(Reason::kConcurrentUpdate, Duration{0});
    d.detail = s.message();
    return d;
  }

  // Commits `id` as dead-lettered (under strict ordering also using up gate's version,
  // then gate->advanced is set) and returns dead_letter / `why`. Requests carry `key`.
  Decision dead_letter_now(EntityKey key, std::string_view id, std::optional<std::uint64_t> fp, Gate* gate, Reason why,
                           std::string detail) {
    std::optional<Gate> g;
    if (gate != nullptr && o_.ordering.mode == Ordering::kStrict && gate->version) {
      g = *gate;
      g->to = {};
    }
    Status s = timed_store([&] {
      return impl_.store->commit(commit_request(key, id, fp, Outcome::kDeadLettered, std::nullopt, g ? &*g : nullptr));
    });
    if (s.code() == StatusCode::kAborted) {
      (void)impl_.store->release(release_req(key, id, false));
      return concurrent_update(s);
    }
    if (!s.ok() && s.code() != StatusCode::kFailedPrecondition) return store_failure(s);
    if (s.ok() && g) gate->advanced = true;
    return Decision::dead_letter(why, std::move(detail));
  }

  // --- entity gates (entity_gate.cpp) ----------------------------------------------

  // Bad input for the gates (missing key/version/event, version 0, key too long).
  std::optional<Decision> validate_entity(const MessageView& m) const;
  // The ordering gate, then the state-machine gate, for a claimed message. Returns the
  // decision if the message must not run now (the lease is then released or the id
  // committed); else fills `g` for the commit.
  std::optional<Decision> gate(const MessageView& m, const ClaimResult& c, std::optional<std::uint64_t> fp,
                               HandlerThunk h, std::size_t index, Gate& g);
  // Strict ordering: puts an early version into the reorder buffer; with
  // deferred_puts_ set, queues the put there and answers a placeholder.
  Decision buffer_early(const MessageView& m, std::optional<std::uint64_t> fp, HandlerThunk h, std::size_t index,
                        std::uint64_t expected);
  // The decision for an early version whose put answered `s`; releases its claim
  // (except when it is dead-lettered).
  Decision after_buffer_put(const MessageView& m, std::optional<std::uint64_t> fp, const Status& s,
                            std::uint64_t expected);
  // A put that buffer_early leaves to the batch (process_batch_gated): the message's
  // index in the batch, the version its key expects, the framed message, its time.
  struct DeferredPut {
    std::size_t index;
    std::uint64_t expected;
    std::string message;
    TimePoint at;
  };
  // Runs the buffered successors of key that are next in order. Returns how many left
  // the buffer.
  std::size_t drain(std::string_view key, HandlerThunk h);
  // One buffered entry whose version is next: claim, gate, handler, commit. Returns
  // false when the drain must stop (a failure to retry later, or a lease held elsewhere).
  bool run_buffered(const BufferEntry& e, HandlerThunk h);
  // Engine::tick().
  std::size_t tick_all(HandlerThunk h);
  // Returns how many buffered messages left the buffer.
  std::size_t apply_gap_policy(const BufferedKey& k, HandlerThunk h);
  // Watermark: the decision for a position at or below the stream's watermark.
  std::optional<Decision> watermark_filter(const MessageView& m) const;
  void report(const BufferEntry& e, const Decision& d, const Gate* g);
  // report(), after holding the key's drains for d.delay if d is a retry (the entry is
  // tried again then, not at the key's next message).
  void report_paced(const BufferEntry& e, const Decision& d, const Gate* g);
  // The decision for a buffered entry whose version an earlier message applied.
  static Decision stale_entry(std::uint64_t version, std::uint64_t applied);

  Decision fail_open_or_closed(const MessageView& m, HandlerThunk h, std::size_t index, const Status& s,
                               TimePoint start) {
    if (o_.on_store_failure == StoreFailurePolicy::kFailClosed) return store_failure(s);
    log_error(impl_.log, "idem: FAIL-OPEN: store unavailable ({}); running the handler for id {} without dedup",
              s.to_string(), printable(m.id.value_or("")));
    HandlerContext ctx;
    ContextAccess::init(ctx, &engine_, m.id.value_or(""), 1, o_.guarantee, start, nullptr);
    const Run run = run_handler(h, index, ctx, start);
    if (run.kind == HandlerResult::Kind::kOk) return Decision::ack(Reason::kFailOpen);
    Decision d = Decision::retry(run.failure_reason, run.delay.count() > 0 ? run.delay : o_.backoff.delay_for(0));
    d.detail = run.error;
    return d;
  }

  Decision process(const MessageView& m, HandlerThunk h, std::size_t index) {
    std::optional<TimePoint> start;
    Decision d = [&] {
      if (auto bad_decision = validate(m)) return *bad_decision;
      if (auto bad_decision = validate_entity(m)) return *bad_decision;
      if (auto dropped = watermark_filter(m)) return *dropped;
      maybe_tick(h);
      TimePoint t{};
      Decision r;
      switch (o_.guarantee) {
        case Guarantee::kAtLeastOnce:
          r = at_least_once(m, h, index, t);
          break;
        case Guarantee::kAtMostOnce:
          r = at_most_once(m, h, index, t);
          break;
        case Guarantee::kEffectivelyOnce:
        case Guarantee::kManual:
          r = effectively_once(m, h, index, t);
          break;
      }
      start = t;
      if (m.received_at) metrics_.queue_wait.record(t - *m.received_at);
      return r;
    }();
    if (o_.ordering.mode == Ordering::kWatermark && d.action != Action::kRetry && d.action != Action::kHold &&
        d.reason != Reason::kBadMessage)
      impl_.watermarks.advance(*m.stream, *m.position);
    finish(m, d, start);
    return d;
  }

  // Strict ordering: runs tick_all() when gap_timeout / 4 has passed since the last
  // tick (one thread at a time).
  void maybe_tick(HandlerThunk h) {
    if (o_.ordering.mode != Ordering::kStrict) return;
    const std::int64_t now = impl_.now().time_since_epoch().count();
    std::int64_t last = impl_.last_tick_ns.load(std::memory_order_relaxed);
    const std::int64_t every =
        std::chrono::duration_cast<std::chrono::nanoseconds>(o_.ordering.gap_timeout).count() / 4;
    const bool first = !impl_.ticked.load(std::memory_order_relaxed);
    if (!first && now - last < every) return;
    if (!impl_.last_tick_ns.compare_exchange_strong(last, now)) return;
    impl_.ticked.store(true, std::memory_order_relaxed);
    tick_all(h);
  }

  std::vector<Decision> process_batch(std::span<const MessageView> ms, HandlerThunk h);
  // process_batch for entity-gated consumers (a GatedBatch, gated_batch.hpp).
  std::vector<Decision> process_batch_gated(std::span<const MessageView> ms, HandlerThunk h);

  Engine& engine_;
  const ConsumerOptions& o_;
  Engine::Impl& impl_;
  Metrics& metrics_;
  TimePoint last_{};                                   // the latest clock reading of this call (see tick())
  std::vector<DeferredPut>* deferred_puts_ = nullptr;  // see buffer_early
};

}  // namespace idem::detail

// Pipeline: the object of one engine call (docs/design.md §2). Its members are defined
// by responsibility: what every path shares in pipeline.cpp, the guarantees' paths in
// guarantees.cpp, batches in batches.cpp and gated_batch.cpp, the entity gates in
// entity_gate.cpp, the reorder buffer in reorder_buffer.cpp. Internal.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "call.hpp"
#include "call_clock.hpp"
#include "engine_impl.hpp"
#include "idem/detail/engine.hpp"
#include "idem/fingerprint.hpp"
#include "idem/state_gate.hpp"
#include "log.hpp"

namespace idem::detail {

// The entity key a store request carries (ClaimRequest::entity_key): the message's key
// when the consumer is entity-gated, none otherwise.
using EntityKey = std::optional<std::string_view>;

// True iff messages go through the entity gates (ordering by version, a state machine).
inline bool entity_gated(const ConsumerOptions& o) {
  return o.ordering.mode == Ordering::kMonotonic || o.ordering.mode == Ordering::kStrict || o.machine != nullptr;
}

// One engine call (process, process_batch, tick, a lookahead step): the consumer's
// options, the engine's shared state, the metrics and this call's clock. Made per
// call on the caller's thread; not shared between threads.
class Pipeline {
 public:
  Pipeline(Engine& e, const ConsumerOptions& o, Engine::Impl& impl, Metrics& m)
      : engine_(e), o_(o), impl_(impl), metrics_(m), clock_(impl, m) {}

  // --- what every path shares (pipeline.cpp) ----------------------------------------

  // Returns a bad_message decision if m cannot be processed as it is.
  std::optional<Decision> validate(const MessageView& m) const;

  static Decision bad(std::string why) { return Decision::dead_letter(Reason::kBadMessage, std::move(why)); }

  static std::optional<std::uint64_t> fingerprint_of(const MessageView& m) {
    if (!m.payload) return std::nullopt;
    return fingerprint(*m.payload);
  }

  // The decision for a claim that did not grant the lease.
  Decision answer_existing(const ClaimResult& c) const;

  // Logs s and returns a retry after store_retry_delay (kStoreUnavailable).
  Decision store_failure(const Status& s) const;

  // Runs `f(ctx) -> HandlerResult` once (ClaimedStep::run), translating exceptions and
  // manual ack/nack into a Run.
  template <class F>
  Run run_handler_with(F&& f, HandlerContext& ctx, TimePoint start);

  // A result too large to store is dropped (the effect happened, so the commit must).
  std::optional<std::string_view> storable_result(const Run& run, Decision& d) const;

  // The commit of `id` at clock_.last(), with the entity write of `gate` if set.
  CommitRequest commit_request(EntityKey key, std::string_view id, std::optional<std::uint64_t> fp, Outcome outcome,
                               std::optional<std::string_view> result, const Gate* gate = nullptr) const;

  // The release of `id`'s lease at clock_.last() (a failed attempt counted iff count_retry).
  ReleaseRequest release_req(EntityKey key, std::string_view id, bool count_retry) const;

  // Settles d, the decision of a successful handler run, once its commit returned `s`:
  // with the run's result if it landed, else a lease-lost or store-failure decision.
  void after_commit(const Status& s, const Run& run, Decision& d);

  // A failed run under a lease: dead-letter at the cap, else release and retry.
  // Under strict ordering a dead-lettered message still uses up its version (`gate`),
  // so that its successors can run (then gate->advanced is set). Requests carry `key`.
  Decision after_failure(EntityKey key, std::string_view id, std::optional<std::uint64_t> fp, std::uint32_t retries,
                         const Run& run, Gate* gate = nullptr);

  // Counts a commit; every purge_every-th one purges up to purge_batch expired records.
  void note_commit();

  // Counts decision d of m and warns if receipt to decision took longer than the
  // broker's ack timeout (`handler_start`: when m's handler or decision started).
  void finish(const MessageView& m, const Decision& d, std::optional<TimePoint> handler_start);

  // The outbox (dispatcher.hpp).

  // After the commit of a handler run that published `entries`: sends them now, or,
  // inside a batch transaction, after the batch commits (deferred_outbox_).
  void dispatch_committed(std::vector<OutboxEntry>& entries);
  // A duplicate of a committed id: sends its outgoing messages still unsent, if any.
  void dispatch_pending_of(std::string_view id);
  // The outbox entry that carries the dead letter of buffered message `id` (version
  // `version` of `key`, encoded as `message`) to ordering.dead_letter_to, to be
  // committed with its dead-letter record; none when that option is not set.
  std::vector<OutboxEntry> buffered_dead_letter(std::string_view key, std::uint64_t version, std::string_view id,
                                                std::string_view message, Reason why, std::string_view detail) const;

  // The retry for a commit that found the entity changed by another consumer.
  Decision concurrent_update(const Status& s) const;

  // Commits `id` as dead-lettered (under strict ordering also using up gate's version,
  // then gate->advanced is set; a drained message's dead letter goes into the outbox
  // with it, see buffered_dead_letter) and returns dead_letter / `why`. Requests carry
  // `key`.
  Decision dead_letter_now(EntityKey key, std::string_view id, std::optional<std::uint64_t> fp, Gate* gate, Reason why,
                           std::string detail);

  // --- the single-message path of each guarantee (guarantees.cpp) ------------------

  // Validates, gates and decides m, then counts the decision.
  Decision process(const MessageView& m, detail::HandlerThunk h, std::size_t index);
  // process() before the counting: m's decision; sets `start` when m reached its
  // guarantee's path (when its handler or decision started).
  Decision decide(const MessageView& m, detail::HandlerThunk h, std::size_t index, std::optional<TimePoint>& start);

  // Each runs m's handler under its guarantee and sets `start` to when it started.
  Decision at_least_once(const MessageView& m, detail::HandlerThunk h, std::size_t index, TimePoint& start);

  Decision at_most_once(const MessageView& m, detail::HandlerThunk h, std::size_t index, TimePoint& start);

  // effectively_once and manual.
  Decision effectively_once(const MessageView& m, detail::HandlerThunk h, std::size_t index, TimePoint& start);

  // The store failed (s) on m's claim: a retry (fail-closed), or m's handler run without
  // dedup (fail-open).
  Decision fail_open_or_closed(const MessageView& m, detail::HandlerThunk h, std::size_t index, const Status& s,
                               TimePoint start);

  // The handler of message `index` as an invocation for run_claimed.
  struct IndexedHandler {
    detail::HandlerThunk h;
    std::size_t index;
    HandlerResult operator()(HandlerContext& ctx) const { return h.call(h.self, index, ctx); }
  };
  static IndexedHandler handler_of(detail::HandlerThunk h, std::size_t index) { return {h, index}; }

  // Runs the handler (`invoke(ctx)`) of `subject` under a lease already taken at
  // `start`, in a transaction of its own when transactional, then commits (with the
  // entity write of `gate`, if any; its requests then carry gate->key and
  // gate->advanced is set once a version lands) or fails. The lease runs until
  // `lease_until` (default: start + lease). Defined in claimed_step.hpp.
  template <class F>
  Decision run_claimed(const Subject& subject, std::uint32_t retries, F&& invoke, TimePoint start, Gate* gate,
                       std::optional<TimePoint> lease_until = std::nullopt);

  // --- batches (batches.cpp, gated_batch.cpp) ----------------------------------------

  std::vector<Decision> process_batch(std::span<const MessageView> ms, detail::HandlerThunk h);
  // process_batch for transactional consumers: one store transaction per batch, a
  // savepoint per message, when batch_in_one_transaction(ms.size()).
  std::vector<Decision> process_batch_in_one_transaction(std::span<const MessageView> ms, detail::HandlerThunk h);
  bool batch_in_one_transaction(std::size_t n) const;
  // process_batch for entity-gated consumers (a GatedBatch, gated_batch.hpp).
  std::vector<Decision> process_batch_gated(std::span<const MessageView> ms, detail::HandlerThunk h);

  // --- the entity gates (entity_gate.cpp) --------------------------------------------

  // Bad input for the gates (missing key/version/event, version 0, key too long).
  std::optional<Decision> validate_entity(const MessageView& m) const;
  // Watermark: the decision for a position at or below the stream's watermark.
  std::optional<Decision> watermark_filter(const MessageView& m) const;
  // The ordering gate, then the state-machine gate, for a claimed message. Returns the
  // decision if the message must not run now (the lease is then released or the id
  // committed); else fills `g` for the commit.
  std::optional<Decision> gate(const MessageView& m, const ClaimResult& c, std::optional<std::uint64_t> fp,
                               detail::HandlerThunk h, std::size_t index, Gate& g);

  // --- strict ordering's reorder buffer (reorder_buffer.cpp) -------------------------

  // Puts an early version into the reorder buffer; with deferred_puts_ set, queues the
  // put there and answers a placeholder.
  Decision buffer_early(const MessageView& m, std::optional<std::uint64_t> fp, detail::HandlerThunk h, std::size_t index,
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
  // Claims that the caller of drain() holds on ids it has not run yet (a gated batch's,
  // taken at the batch's start): a buffered entry of such an id runs under that claim
  // instead of finding its id held, as if drained before the caller met the redelivery.
  class HeldClaims {
   public:
    // The claim held on id, given up to the drain (the caller then answers its own
    // delivery of id as process() would after the drain), or nothing.
    virtual std::optional<ClaimResult> take(std::string_view id, TimePoint now) = 0;

   protected:
    ~HeldClaims() = default;
  };
  // Runs the buffered successors of key that are next in order. Returns how many left
  // the buffer.
  std::size_t drain(std::string_view key, detail::HandlerThunk h, HeldClaims* held = nullptr);
  // One buffered entry whose version is next: claim, gate, handler, commit. Returns
  // false when the drain must stop (a failure to retry later, or a lease held elsewhere).
  bool run_buffered(const BufferEntry& e, detail::HandlerThunk h, HeldClaims* held);
  void report(const BufferEntry& e, const Decision& d, const Gate* g);
  // report(), after holding the key's drains for d.delay if d is a retry (the entry is
  // tried again then, not at the key's next message).
  void report_paced(const BufferEntry& e, const Decision& d, const Gate* g);
  // The decision for a buffered entry whose version an earlier message applied.
  static Decision stale_entry(std::uint64_t version, std::uint64_t applied);
  // Engine::tick(): drains keys whose next version is buffered, applies the gap policy,
  // refreshes the buffer gauges.
  std::size_t run_buffer_timers(detail::HandlerThunk h);
  // Runs run_buffer_timers() when gap_timeout / 4 has passed since they last ran (one
  // thread at a time).
  void maybe_run_buffer_timers(detail::HandlerThunk h);
  // Returns how many buffered messages left the buffer.
  std::size_t apply_gap_policy(const BufferedKey& k, detail::HandlerThunk h);
  // The gap policy dead_letter: each of `entries` (in version order, waiting for
  // version `missing` of `key`) is committed dead-lettered and removed from the buffer.
  std::size_t dead_letter_gap(std::string_view key, const std::vector<BufferEntry>& entries, std::uint64_t missing);

  Engine& engine_;
  const ConsumerOptions& o_;
  Engine::Impl& impl_;
  Metrics& metrics_;
  CallClock clock_;  // this call's clock readings and store timing
  std::vector<DeferredPut>* deferred_puts_ = nullptr;  // see buffer_early
  // Set inside a batch transaction: committed outgoing messages wait here for the
  // batch's commit (process_batch_in_one_transaction).
  std::vector<OutboxEntry>* deferred_outbox_ = nullptr;
};

// --- template members ---------------------------------------------------------

template <class F>
Run Pipeline::run_handler_with(F&& f, HandlerContext& ctx, TimePoint start) {
  Run run;
  try {
    HandlerResult r = f(ctx);
    ContextAccess::take(r, run);
    if (run.kind == HandlerResult::Kind::kRetryRequested) run.failure_reason = Reason::kRetryRequested;
  } catch (const std::exception& e) {
    run.kind = HandlerResult::Kind::kFailed;
    run.error = std::string("handler threw: ") + e.what();
  } catch (...) {
    run.kind = HandlerResult::Kind::kFailed;
    run.error = "handler threw a non-std exception";
  }
  if (run.kind == HandlerResult::Kind::kOk && !ContextAccess::publish_error(ctx).empty()) {
    run.kind = HandlerResult::Kind::kFailed;
    run.error = "the handler returned ok after a failed ctx.publish: " + ContextAccess::publish_error(ctx);
  }
  const TimePoint end = clock_.read();  // also the commit's "now": always read
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

}  // namespace idem::detail

// The pipeline of DESIGN.md §2 for one delivery: validate → dedup claim → handler
// (lease starts here) → commit, or release and retry, capped → dead_letter.
#include "idem/engine.hpp"

#include <unistd.h>

#include <atomic>
#include <exception>
#include <random>
#include <string>
#include <unordered_map>

#include "idem/fingerprint.hpp"
#include "log.hpp"
#include "validate_options.hpp"

namespace idem::detail {
namespace {

std::string default_owner() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::random_device rd;
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s-%d-%08x", host, static_cast<int>(getpid()), rd());
  return buf;
}

// The outcome of running the handler once.
struct Run {
  HandlerResult::Kind kind = HandlerResult::Kind::kOk;
  std::optional<std::string> result;
  std::string error;
  Duration delay{0};
  Reason failure_reason = Reason::kHandlerFailed;
  bool unacknowledged = false;  // manual: neither ack nor nack
};

}  // namespace

struct Engine::Impl {
  std::shared_ptr<Clock> clock;
  spdlog::logger* log = nullptr;
  Store* store = nullptr;
  std::atomic<bool> warned_manual{false};
  std::atomic<std::uint64_t> commits{0};

  TimePoint now() const { return clock->now(); }
};

Engine::Engine(ConsumerOptions options) : opts_(std::move(options)), impl_(std::make_unique<Impl>()) {}
Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::create(ConsumerOptions options, ExtractorSet extractors) {
  if (Status s = validate_options(options, extractors); !s.is_ok()) return s;
  if (options.owner.empty()) options.owner = default_owner();
  if (!options.clock) options.clock = system_clock();
  std::unique_ptr<Engine> e(new Engine(std::move(options)));
  e->metrics_ = e->opts_.metrics ? e->opts_.metrics : std::make_shared<Metrics>();
  e->impl_->clock = e->opts_.clock;
  e->impl_->log = e->opts_.logger.get();
  e->impl_->store = e->opts_.store.get();
  if (e->opts_.on_store_failure == StoreFailurePolicy::kFailOpen)
    log_warn(e->impl_->log, "idem: fail-open is on: when the store is unavailable handlers run without dedup");
  return e;
}

void Engine::misplaced_manual_call() {
  if (!impl_->warned_manual.exchange(true))
    log_warn(impl_->log, "idem: HandlerContext::ack()/nack() ignored: guarantee is {}, not manual (logged once)",
             guarantee_name(opts_.guarantee));
}

Status Engine::extend_lease(HandlerContext& ctx, Duration lease) {
  if (!needs_dedup(opts_.guarantee) || opts_.guarantee == Guarantee::kAtMostOnce) return Status::ok();
  const TimePoint now = impl_->now();
  Status s = impl_->store->extend({ctx.id_, opts_.owner, lease, now});
  if (s.is_ok()) ctx.lease_until_ = now + lease;
  return s;
}

// HandlerContext's private fields are set and read here only.
struct ContextAccess {
  using Manual = HandlerContext::Manual;
  static void init(HandlerContext& ctx, Engine* e, std::string_view id, std::uint32_t attempt, Guarantee g,
                   TimePoint lease_until, StoreTransaction* txn) {
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

// ---------------------------------------------------------------------------------
// Pieces shared by process() and process_batch().

namespace {

class Pipeline {
 public:
  Pipeline(Engine& e, const ConsumerOptions& o, Engine::Impl& impl, Metrics& m)
      : engine_(e), o_(o), impl_(impl), metrics_(m) {}

  // Returns a bad_message decision if m cannot be processed as it is.
  std::optional<Decision> validate(const MessageView& m) const {
    if (!needs_dedup(o_.guarantee)) return std::nullopt;
    if (!m.id) return bad("message has no id (required by guarantee " + std::string(guarantee_name(o_.guarantee)) + ")");
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
  // before) to a new tick().
  template <class F>
  auto timed_store(F&& f) {
    const TimePoint t0 = last_;
    auto r = f();
    metrics_.store_latency.record(tick() - t0);
    return r;
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
      case ClaimStatus::kNew: break;
    }
    return Decision::ack(Reason::kProcessed);  // not reached
  }

  Decision store_failure(const Status& s) const {
    log_error(impl_.log, "idem: store unavailable: {}", s.to_string());
    Decision d = Decision::retry(Reason::kStoreUnavailable, o_.store_retry_delay);
    d.detail = s.to_string();
    return d;
  }

  // Runs the handler, translating exceptions and manual ack/nack into a Run.
  Run run_handler(HandlerThunk h, std::size_t index, HandlerContext& ctx, TimePoint start) {
    Run run;
    try {
      HandlerResult r = h.call(h.self, index, ctx);
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
    metrics_.handler_latency.record(tick() - start);
    if (o_.guarantee == Guarantee::kManual && run.kind == HandlerResult::Kind::kOk) {
      switch (ContextAccess::manual(ctx)) {
        case ContextAccess::Manual::kAck: break;
        case ContextAccess::Manual::kNack:
          run.kind = HandlerResult::Kind::kRetryRequested;
          run.failure_reason = Reason::kNacked;
          run.delay = ContextAccess::nack_delay(ctx);
          break;
        case ContextAccess::Manual::kNone: run.unacknowledged = true;
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

  CommitRequest commit_request(std::string_view id, std::optional<std::uint64_t> fp, Outcome outcome,
                               std::optional<std::string_view> result) const {
    CommitRequest c;
    c.id = id;
    c.owner = o_.owner;
    c.fingerprint = fp;
    c.now = last_;
    c.ttl = o_.ttl;
    c.result = result;
    c.outcome = outcome;
    return c;
  }

  // The decision after a successful handler run whose commit returned `s`.
  Decision after_commit(const Status& s, const Run& run, Decision d) {
    if (s.is_ok()) {
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
  Decision after_failure(std::string_view id, std::optional<std::uint64_t> fp, std::uint32_t retries,
                         const Run& run) {
    if (run.unacknowledged) {
      Status s = timed_store([&] { return impl_.store->release({id, o_.owner, false, last_, o_.ttl}).status(); });
      if (!s.is_ok()) log_error(impl_.log, "idem: release failed: {}", s.to_string());
      Decision d = Decision::hold(Reason::kUnacknowledged);
      d.detail = "manual guarantee: the handler neither acked nor nacked";
      return d;
    }
    if (retries >= o_.max_retries) {
      Status s = timed_store([&] {
        return impl_.store->commit(commit_request(id, fp, Outcome::kDeadLettered, std::nullopt));
      });
      if (!s.is_ok() && s.code() != StatusCode::kFailedPrecondition) return store_failure(s);
      Decision d = Decision::dead_letter(Reason::kRetriesExhausted, run.error);
      return d;
    }
    auto r = timed_store([&] { return impl_.store->release({id, o_.owner, true, last_, o_.ttl}); });
    if (!r.ok()) log_error(impl_.log, "idem: release failed (the lease will expire instead): {}", r.status().to_string());
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
    if (m.delivery_count && retries >= o_.max_retries) return Decision::dead_letter(Reason::kRetriesExhausted, run.error);
    Decision d = Decision::retry(run.failure_reason, run.delay.count() > 0 ? run.delay : o_.backoff.delay_for(retries));
    d.detail = run.error;
    return d;
  }

  Decision at_most_once(const MessageView& m, HandlerThunk h, std::size_t index, TimePoint& start) {
    const auto fp = fingerprint_of(m);
    start = tick();
    auto claim = timed_store([&] { return impl_.store->claim({*m.id, o_.owner, o_.lease, fp, start}); });
    if (!claim.ok()) return fail_open_or_closed(m, h, index, claim.status(), start);
    if (claim->status != ClaimStatus::kNew) return answer_existing(*claim);
    Status s = timed_store([&] { return impl_.store->commit(commit_request(*m.id, fp, Outcome::kProcessed, std::nullopt)); });
    if (!s.is_ok()) return after_commit(s, Run{}, Decision::ack(Reason::kProcessed));
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
    auto claim = timed_store([&] { return impl_.store->claim({*m.id, o_.owner, o_.lease, fp, start}); });
    if (!claim.ok()) return fail_open_or_closed(m, h, index, claim.status(), start);
    if (claim->status != ClaimStatus::kNew) return answer_existing(*claim);
    return run_claimed(m, fp, claim->retries, h, index, start);
  }

  // Runs the handler under a lease already taken at `start`, then commits or fails.
  Decision run_claimed(const MessageView& m, std::optional<std::uint64_t> fp, std::uint32_t retries, HandlerThunk h,
                       std::size_t index, TimePoint start) {
    std::unique_ptr<StoreTransaction> txn;
    if (o_.transactional) {
      auto t = timed_store([&] { return impl_.store->begin(last_); });
      if (!t.ok()) {
        (void)impl_.store->release({*m.id, o_.owner, false, last_, o_.ttl});
        return store_failure(t.status());
      }
      txn = std::move(t).value();
    }
    HandlerContext ctx;
    ContextAccess::init(ctx, &engine_, *m.id, retries + 1, o_.guarantee, start + o_.lease, txn.get());
    const Run run = run_handler(h, index, ctx, start);
    if (run.kind != HandlerResult::Kind::kOk || run.unacknowledged) {
      if (txn) txn->rollback();
      txn.reset();
      return after_failure(*m.id, fp, retries, run);
    }
    Decision d = Decision::ack(Reason::kProcessed);
    const auto result = storable_result(run, d);
    const CommitRequest req = commit_request(*m.id, fp, Outcome::kProcessed, result);
    Status s = timed_store([&] { return txn ? txn->commit(req) : impl_.store->commit(req); });
    if (txn && !s.is_ok()) {
      // The handler's writes were rolled back with the commit: nothing happened, so a
      // redelivery may run it again at once.
      txn.reset();
      (void)impl_.store->release({*m.id, o_.owner, false, last_, o_.ttl});
      if (s.code() == StatusCode::kFailedPrecondition) {
        Decision lost = Decision::retry(Reason::kLeaseLost, Duration{0});
        lost.detail = s.message() + " (transaction rolled back)";
        return lost;
      }
      return store_failure(s);
    }
    return after_commit(s, run, std::move(d));
  }

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
      TimePoint t{};
      Decision r;
      switch (o_.guarantee) {
        case Guarantee::kAtLeastOnce: r = at_least_once(m, h, index, t); break;
        case Guarantee::kAtMostOnce: r = at_most_once(m, h, index, t); break;
        case Guarantee::kEffectivelyOnce:
        case Guarantee::kManual: r = effectively_once(m, h, index, t); break;
      }
      start = t;
      if (m.received_at) metrics_.queue_wait.record(t - *m.received_at);
      return r;
    }();
    finish(m, d, start);
    return d;
  }

  std::vector<Decision> process_batch(std::span<const MessageView> ms, HandlerThunk h);

  Engine& engine_;
  const ConsumerOptions& o_;
  Engine::Impl& impl_;
  Metrics& metrics_;
  TimePoint last_{};  // the latest clock reading of this call (see tick())
};



// In process_batch, a claim's lease is renewed at handler start once more than
// 1/kBatchLeaseRenewDivisor of it has passed since the batch was claimed.
constexpr int kBatchLeaseRenewDivisor = 10;

std::vector<Decision> Pipeline::process_batch(std::span<const MessageView> ms, HandlerThunk h) {
  std::vector<Decision> out(ms.size());
  if (o_.guarantee != Guarantee::kEffectivelyOnce || o_.transactional) {
    for (std::size_t i = 0; i < ms.size(); ++i) out[i] = process(ms[i], h, i);
    return out;
  }
  // Validate; find each id's first copy in the batch.
  std::vector<bool> finished(ms.size(), false);  // decided and counted by process()
  std::vector<std::size_t> firsts;
  std::vector<std::size_t> repeats;  // later copies of an id seen earlier in the batch
  std::unordered_map<std::string_view, std::size_t> first_of;
  first_of.reserve(ms.size());
  for (std::size_t i = 0; i < ms.size(); ++i) {
    if (auto bad_decision = validate(ms[i])) {
      out[i] = *bad_decision;
      continue;
    }
    auto [it, inserted] = first_of.emplace(*ms[i].id, i);
    if (inserted) {
      firsts.push_back(i);
    } else {
      repeats.push_back(i);
      finished[i] = true;
    }
  }
  std::vector<std::optional<std::uint64_t>> fps(ms.size());
  std::vector<ClaimRequest> claims;
  claims.reserve(firsts.size());
  const TimePoint start = tick();
  for (std::size_t i : firsts) {
    fps[i] = fingerprint_of(ms[i]);
    claims.push_back({*ms[i].id, o_.owner, o_.lease, fps[i], start});
  }
  auto results = timed_store([&] { return impl_.store->claim_batch(claims); });

  // Run handlers in input order; successes are committed together.
  std::vector<CommitRequest> commits;
  std::vector<std::size_t> commit_index;
  std::vector<Run> runs(ms.size());
  std::vector<std::optional<TimePoint>> handler_start(ms.size());
  for (std::size_t k = 0; k < firsts.size(); ++k) {
    const std::size_t i = firsts[k];
    const MessageView& m = ms[i];
    auto& claim = results[k];
    if (!claim.ok() || claim->status != ClaimStatus::kNew) {
      handler_start[i] = start;
      if (m.received_at) metrics_.queue_wait.record(start - *m.received_at);
      out[i] = claim.ok() ? answer_existing(*claim) : fail_open_or_closed(m, h, i, claim.status(), start);
      continue;
    }
    const TimePoint t = tick();
    // The lease runs from the handler's start: renew the batch claim's lease when the
    // earlier handlers of this batch used up more than a tenth of it. If it was lost
    // meanwhile, this copy goes through the single-message path instead.
    TimePoint lease_until = start + o_.lease;
    if (t - start > o_.lease / kBatchLeaseRenewDivisor) {
      Status s = timed_store([&] { return impl_.store->extend({*m.id, o_.owner, o_.lease, t}); });
      if (!s.is_ok()) {
        out[i] = process(m, h, i);
        finished[i] = true;
        continue;
      }
      lease_until = t + o_.lease;
    }
    handler_start[i] = t;
    if (m.received_at) metrics_.queue_wait.record(t - *m.received_at);
    HandlerContext ctx;
    ContextAccess::init(ctx, &engine_, *m.id, claim->retries + 1, o_.guarantee, lease_until, nullptr);
    runs[i] = run_handler(h, i, ctx, t);
    if (runs[i].kind != HandlerResult::Kind::kOk) {
      out[i] = after_failure(*m.id, fps[i], claim->retries, runs[i]);
      continue;
    }
    out[i] = Decision::ack(Reason::kProcessed);
    commits.push_back(commit_request(*m.id, fps[i], Outcome::kProcessed, storable_result(runs[i], out[i])));
    commit_index.push_back(i);
  }
  if (!commits.empty()) {
    auto statuses = timed_store([&] { return impl_.store->commit_batch(commits); });
    for (std::size_t k = 0; k < commit_index.size(); ++k) {
      const std::size_t i = commit_index[k];
      out[i] = after_commit(statuses[k], runs[i], std::move(out[i]));
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

}  // namespace

Decision Engine::process(const MessageView& m, HandlerThunk handler, std::size_t index) {
  return Pipeline(*this, opts_, *impl_, *metrics_).process(m, handler, index);
}

std::vector<Decision> Engine::process_batch(std::span<const MessageView> ms, HandlerThunk handler) {
  return Pipeline(*this, opts_, *impl_, *metrics_).process_batch(ms, handler);
}

}  // namespace idem::detail

namespace idem {

Status HandlerContext::extend_lease(Duration lease) {
  if (engine_ == nullptr) return Status::ok();
  return engine_->extend_lease(*this, lease);
}

void HandlerContext::ack() {
  if (guarantee_ != Guarantee::kManual) {
    if (engine_ != nullptr) engine_->misplaced_manual_call();
    return;
  }
  manual_ = Manual::kAck;
}

void HandlerContext::nack(Duration delay) {
  if (guarantee_ != Guarantee::kManual) {
    if (engine_ != nullptr) engine_->misplaced_manual_call();
    return;
  }
  manual_ = Manual::kNack;
  nack_delay_ = delay;
}

}  // namespace idem

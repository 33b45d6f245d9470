// The engine: options, the HandlerContext calls, and the batch path of the pipeline
// (pipeline.hpp).
#include "idem/detail/engine.hpp"

#include <unistd.h>

#include <random>
#include <string>
#include <unordered_map>

#include "batch_index.hpp"
#include "claimed_step.hpp"
#include "pipeline.hpp"
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

}  // namespace

Engine::Engine(ConsumerOptions options) : opts_(std::move(options)), impl_(std::make_unique<Impl>()) {}
Engine::~Engine() {
  if (impl_ && impl_->dispatcher) (void)impl_->dispatcher->flush_marks(impl_->now());
}

StatusOr<std::unique_ptr<Engine>> Engine::create(ConsumerOptions options, ExtractorSet extractors) {
  if (Status s = validate_options(options, extractors); !s.ok()) return s;
  if (options.owner.empty()) options.owner = default_owner();
  if (!options.clock) options.clock = system_clock();
  std::unique_ptr<Engine> e(new Engine(std::move(options)));
  e->metrics_ = e->opts_.metrics ? e->opts_.metrics : std::make_shared<Metrics>();
  e->impl_->clock = e->opts_.clock;
  e->impl_->log = e->opts_.logger.get();
  e->impl_->store = e->opts_.store.get();
  e->impl_->time_store =
      e->opts_.latency_metrics && (e->impl_->store == nullptr || !e->impl_->store->capabilities().in_process);
  if (e->opts_.outbox.publishers)
    e->impl_->dispatcher = std::make_unique<Dispatcher>(e->opts_.outbox, e->opts_.ttl, *e->impl_->store, e->impl_->log);
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
  if (!needs_dedup(opts_.guarantee) || opts_.guarantee == Guarantee::kAtMostOnce) return ok_status();
  const TimePoint now = impl_->now();
  ExtendRequest req{ctx.id_, opts_.owner, lease, now, std::nullopt};
  if (!ctx.key_.empty() && entity_gated(opts_)) req.entity_key = ctx.key_;
  Status s = impl_->store->extend(req);
  if (s.ok()) ctx.lease_until_ = now + lease;
  return s;
}

// Transactional consumers without entity gates or watermarks, over a store with batch
// transactions: one transaction for the batch; each message's handler and commit run
// in a nested transaction (a savepoint: run_claimed's begin() nests), so a failed
// handler's writes roll back alone and the rest commit together. When the batch's
// commit fails nothing landed: every decision that is not bad_message becomes the
// store failure's retry (the metrics count both).
std::vector<Decision> Pipeline::process_batch_in_one_transaction(std::span<const MessageView> ms, detail::HandlerThunk h) {
  std::vector<Decision> out(ms.size());
  auto batch = timed_store([&] { return impl_.store->begin_batch(read_clock()); });
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
  if (impl_.dispatcher) (void)impl_.dispatcher->flush_marks(last_);  // the earlier batches' sent messages
  const Status s = timed_store([&] { return (*batch)->commit(); });
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
  const TimePoint start = read_clock();
  for (std::size_t i : firsts) {
    fps[i] = fingerprint_of(ms[i]);
    claims.push_back({*ms[i].id, o_.owner, o_.lease, fps[i], start, std::nullopt});
  }
  auto results = timed_store([&] { return impl_.store->claim_batch(claims); });

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
      started(m, start, handler_start[i]);
      out[i] = claim.ok() ? answer_existing(*claim) : fail_open_or_closed(m, h, i, claim.status(), start);
      continue;
    }
    // The latest clock reading (the previous handler's end, or the claim's start): only
    // bookkeeping without store calls has run since, so it is this handler's start.
    // If the lease had to be renewed and was lost meanwhile, this copy goes through the
    // single-message path instead.
    const TimePoint t = last_;
    TimePoint lease_until = start + o_.lease;
    if (lease_renewal_due(start, t, o_.lease)) {
      Status s = timed_store([&] { return impl_.store->extend({*m.id, o_.owner, o_.lease, t, std::nullopt}); });
      if (!s.ok()) {
        out[i] = process(m, h, i);
        finished[i] = true;
        continue;
      }
      lease_until = t + o_.lease;
    }
    started(m, t, handler_start[i]);
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
    auto statuses = timed_store([&] { return impl_.store->commit_batch(commits); });
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

std::size_t Engine::tick(detail::HandlerThunk handler) {
  if (impl_->dispatcher) {
    (void)impl_->dispatcher->flush_marks(impl_->now());  // idle: nothing else carries them
    impl_->dispatcher->maybe_resend(impl_->now());
  }
  return Pipeline(*this, opts_, *impl_, *metrics_).run_buffer_timers(handler);
}

void Engine::reset_watermark(std::string_view stream, std::uint64_t position) {
  impl_->watermarks.reset(stream, position);
}

Decision Engine::process(const MessageView& m, detail::HandlerThunk handler, std::size_t index) {
  if (impl_->dispatcher) impl_->dispatcher->maybe_resend(impl_->now());
  if (impl_->lookahead.held()) return process_ahead(m, handler, nullptr, index);  // lookahead.cpp
  return Pipeline(*this, opts_, *impl_, *metrics_).process(m, handler, index);
}

std::vector<Decision> Engine::process_batch(std::span<const MessageView> ms, detail::HandlerThunk handler) {
  if (impl_->dispatcher) impl_->dispatcher->maybe_resend(impl_->now());
  if (impl_->lookahead.held()) (void)flush_lookahead();  // lookahead.cpp
  return Pipeline(*this, opts_, *impl_, *metrics_).process_batch(ms, handler);
}

}  // namespace idem::detail

namespace idem {

Status HandlerContext::extend_lease(Duration lease) {
  if (engine_ == nullptr) return ok_status();
  return engine_->extend_lease(*this, lease);
}

void HandlerContext::ack() {
  if (guarantee_ != Guarantee::kManual) {
    if (engine_ != nullptr) engine_->misplaced_manual_call();
    return;
  }
  manual_ = Manual::kAck;
}

Status HandlerContext::publish(std::string_view destination, std::string payload,
                               std::vector<std::pair<std::string, std::string>> headers) {
  Status s = ok_status();
  if (outbox_ == nullptr) {
    s = failed_precondition(
        "ctx.publish: this consumer has no outbox (set ConsumerOptions::outbox.publishers, with transactional mode "
        "and a store that keeps one)");
  } else if (destination.empty()) {
    s = invalid_argument("ctx.publish: empty destination");
  }
  if (!s.ok()) {
    if (publish_error_.empty()) publish_error_ = s.to_string();
    return s;
  }
  OutboxEntry e;
  e.incoming_id = std::string(id_);
  e.position = static_cast<std::uint32_t>(outbox_->size());
  e.destination = std::string(destination);
  e.message.id = outgoing_id(id_, e.position);
  e.message.body = std::move(payload);
  e.message.headers = std::move(headers);
  outbox_->push_back(std::move(e));
  return ok_status();
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

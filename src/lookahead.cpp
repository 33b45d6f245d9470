// Consumer::process(m, next): m's commit and next's claim in one store round trip
// (Store::commit_then_claim), the claim kept for the call that processes next.
//
// Where it applies: guarantee effectively_once, no ordering (by version or
// watermark), no state machine, not transactional, and a store with
// capabilities().combined_commit_claim. Entity-gated consumers keep the plain path:
// their claims read the entity record and their commits carry entity writes, which
// the combined call does not. Elsewhere process_ahead() is process().
//
// A kept claim is used only by a call for the same id and payload fingerprint; its
// lease runs from the claim (the commit of the previous message), and is renewed
// (one extend) when the call comes more than a tenth of the lease later, so that the
// handler still gets about a whole lease. Only granted (kNew) and completed claims
// are kept: the others (in progress, conflict, errors) are asked again by the call
// itself, as the plain path would.
#include "lookahead.hpp"

#include "claimed_step.hpp"
#include "pipeline.hpp"

namespace idem::detail {
namespace {

bool lookahead_applies(const ConsumerOptions& o, const Engine::Impl& impl) {
  return o.guarantee == Guarantee::kEffectivelyOnce && !o.transactional && !entity_gated(o) &&
         o.ordering.mode == Ordering::kNone && impl.store != nullptr &&
         impl.store->capabilities().combined_commit_claim;
}

}  // namespace

Lookahead::~Lookahead() { (void)flush(); }

std::optional<Lookahead::Claimed> Lookahead::take() {
  std::lock_guard lock(mu_);
  std::optional<Claimed> out = std::move(kept_);
  kept_.reset();
  held_.store(false, std::memory_order_release);
  return out;
}

void Lookahead::keep(Claimed c, Store* store, const std::string* owner, Clock* clock) {
  std::optional<Claimed> old;
  {
    std::lock_guard lock(mu_);
    old = std::move(kept_);
    kept_ = std::move(c);
    store_ = store;
    owner_ = owner;
    clock_ = clock;
    held_.store(true, std::memory_order_release);
  }
  if (old) (void)release(*old, *store, *owner, clock->now());
}

Status Lookahead::flush() {
  std::optional<Claimed> c;
  Store* store = nullptr;
  const std::string* owner = nullptr;
  Clock* clock = nullptr;
  {
    std::lock_guard lock(mu_);
    c = std::move(kept_);
    kept_.reset();
    held_.store(false, std::memory_order_release);
    store = store_;
    owner = owner_;
    clock = clock_;
  }
  if (!c) return ok_status();
  return release(*c, *store, *owner, clock->now());
}

Status Lookahead::release(const Claimed& c, Store& store, const std::string& owner, TimePoint now) {
  if (c.claim.status != ClaimStatus::kNew) return ok_status();
  return store.release({c.id, owner, false, now, Duration{0}, std::nullopt}).status();
}

Status Engine::flush_lookahead() { return impl_->lookahead.flush(); }

Decision Engine::process_ahead(const MessageView& m, detail::HandlerThunk h, const MessageView* next, std::size_t index) {
  Pipeline p(*this, opts_, *impl_, *metrics_);
  Lookahead& la = impl_->lookahead;
  if (!lookahead_applies(opts_, *impl_)) {
    if (la.held()) (void)la.flush();
    return p.process(m, h, index);
  }
  std::optional<Lookahead::Claimed> pre;
  if (la.held()) pre = la.take();
  Store& store = *impl_->store;
  std::optional<TimePoint> start;
  // Gives back the kept claim when this call does not use it.
  auto drop = [&](TimePoint now) {
    if (!pre) return;
    Status s = Lookahead::release(*pre, store, opts_.owner, now);
    if (!s.ok())
      log_error(impl_->log, "idem: release of a lookahead claim failed (the lease will expire instead): {}",
                s.to_string());
    pre.reset();
  };
  Decision d = [&] {
    if (auto bad_decision = p.validate(m)) {
      drop(impl_->now());
      return *bad_decision;
    }
    const auto fp = Pipeline::fingerprint_of(m);
    const TimePoint t = p.clock_.read();
    if (pre && (pre->id != *m.id || pre->fingerprint != fp)) drop(t);
    start = t;
    std::optional<ClaimResult> claim;
    TimePoint lease_until = t + opts_.lease;
    if (pre) {
      if (pre->claim.status == ClaimStatus::kNew) {
        lease_until = pre->at + opts_.lease;
        if (lease_renewal_due(pre->at, t, opts_.lease)) {
          Status s = p.clock_.timed_store([&] { return store.extend({*m.id, opts_.owner, opts_.lease, t, std::nullopt}); });
          if (s.ok()) {
            lease_until = t + opts_.lease;
            claim = std::move(pre->claim);
          } else if (s.code() != StatusCode::kFailedPrecondition) {
            drop(p.clock_.last());  // the store failed: give the lease back if it can be reached
            return p.fail_open_or_closed(m, h, index, s, p.clock_.last());
          }  // else the lease was lost: claim as the plain path does
        } else {
          claim = std::move(pre->claim);
        }
      } else {
        claim = std::move(pre->claim);
      }
    }
    if (!claim) {
      const TimePoint now = p.clock_.last();
      auto c = p.clock_.timed_store([&] { return store.claim({*m.id, opts_.owner, opts_.lease, fp, now, std::nullopt}); });
      if (!c.ok()) return p.fail_open_or_closed(m, h, index, c.status(), now);
      claim = std::move(c).value();
      start = now;
      lease_until = now + opts_.lease;
    }
    if (claim->status != ClaimStatus::kNew) return p.answer_existing(*claim);

    ClaimedStep step(p, subject_of(m, fp), claim->retries, *start, lease_until);
    if (!step.run(Pipeline::handler_of(h, index))) return step.failed();
    const CommitRequest commit = step.commit();
    Status s;
    if (next != nullptr && !p.validate(*next)) {
      const auto next_fp = Pipeline::fingerprint_of(*next);
      const TimePoint at = p.clock_.last();
      const ClaimRequest q{*next->id, opts_.owner, opts_.lease, next_fp, at, std::nullopt};
      auto both = p.clock_.timed_store([&] { return store.commit_then_claim(commit, q); });
      s = std::move(both.commit);
      if (both.claim.ok() && (both.claim->status == ClaimStatus::kNew || both.claim->status == ClaimStatus::kCompleted))
        la.keep({std::string(*next->id), next_fp, std::move(both.claim).value(), at}, &store, &opts_.owner,
                impl_->clock.get());
    } else {
      s = p.clock_.timed_store([&] { return store.commit(commit); });
    }
    return step.landed(s);
  }();
  if (start && m.received_at) metrics_->queue_wait.record(*start - *m.received_at);
  p.finish(m, d, start);
  return d;
}

}  // namespace idem::detail

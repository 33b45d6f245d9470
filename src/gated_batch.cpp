// The gated batch (gated_batch.hpp): its steps.
#include "gated_batch.hpp"

#include <algorithm>

#include "buffer_frame.hpp"
#include "claimed_step.hpp"

namespace idem::detail {
namespace {

// Buffer entries read at a time when looking for successors to absorb.
constexpr std::size_t kAbsorbAhead = 16;

}  // namespace

std::vector<Decision> Pipeline::process_batch_gated(std::span<const MessageView> ms, detail::HandlerThunk h) {
  return GatedBatch(*this, ms, h).run();
}

GatedBatch::GatedBatch(Pipeline& p, std::span<const MessageView> ms, detail::HandlerThunk h)
    : p_(p),
      o_(p.o_),
      store_(*p.impl_.store),
      ms_(ms),
      h_(h),
      strict_(p.o_.ordering.mode == Ordering::kStrict),
      chains_(p.impl_.store->capabilities().entity_chains),
      out_(ms.size()),
      finished_(ms.size(), false),
      taken_(ms.size(), false),
      key_index_(ms.size()),
      key_of_(ms.size()),
      fps_(ms.size()),
      runs_(ms.size()),
      handler_start_(ms.size()) {}

std::vector<Decision> GatedBatch::run() {
  index_messages();
  p_.maybe_run_buffer_timers(h_);
  if (strict_) order_by_version();
  claim_firsts();
  keys_.resize(key_names_.size());
  for (std::size_t k = 0; k < firsts_.size(); ++k) walk(k);
  if (!deferred_.empty()) put_deferred();
  if (strict_ && chains_) absorb_after_pending();
  flush();
  for (std::uint32_t k = 0; k < keys_.size(); ++k) {
    if (keys_[k].drain) p_.drain(key_names_[k], h_, this);
  }
  finish_all();
  return std::move(out_);
}

bool GatedBatch::applies_in_order(const MessageView& m, const EntityRecord& e, Gate& g) const {
  g.key = *m.key;
  g.revision = e.revision;
  const Ordering mode = o_.ordering.mode;
  if (mode == Ordering::kMonotonic || mode == Ordering::kStrict) {
    const std::uint64_t v = *m.version;
    if (mode == Ordering::kStrict) {
      const std::uint64_t expected = e.version == 0 ? o_.ordering.first_version.value_or(v) : e.version + 1;
      if (v != expected) return false;
    } else if (v <= e.version || (o_.ordering.horizon > 0 && v - e.version > o_.ordering.horizon)) {
      return false;
    }
    g.version = v;
  }
  if (o_.machine) {
    const StateGate::Check chk = o_.machine->check(e.state, *m.event);
    if (chk.answer != StateGate::Answer::kApply) return false;
    g.event = *m.event;
    g.from = chk.from;
    g.to = chk.to;
  }
  return true;
}

// --- the walk ----------------------------------------------------------------------

void GatedBatch::index_messages() {
  BatchIndex seen(ms_.size());
  for (std::size_t i = 0; i < ms_.size(); ++i) {
    std::optional<Decision> bad_decision = p_.validate(ms_[i]);
    if (!bad_decision) bad_decision = p_.validate_entity(ms_[i]);
    if (bad_decision) {
      out_[i] = *bad_decision;
      continue;
    }
    const auto [k, new_key] = key_index_.insert(*ms_[i].key);
    key_of_[i] = k;
    if (new_key) key_names_.push_back(*ms_[i].key);
    if (seen.insert(*ms_[i].id).second) {
      firsts_.push_back(i);
    } else {
      repeats_.push_back(i);
      finished_[i] = true;
    }
  }
}

void GatedBatch::order_by_version() {
  // Within the batch each key's versions run in version order: a version that arrives
  // before its predecessor in the same batch waits in memory, not in the reorder
  // buffer. (Monotonic keeps the input order: there a lower version after a higher one
  // is stale, whatever batch it comes in.)
  std::stable_sort(firsts_.begin(), firsts_.end(), [&](std::size_t a, std::size_t b) {
    if (key_of_[a] != key_of_[b]) return key_of_[a] < key_of_[b];
    return *ms_[a].version < *ms_[b].version;
  });
}

void GatedBatch::claim_firsts() {
  std::vector<ClaimRequest> claims;
  claims.reserve(firsts_.size());
  start_ = p_.clock_.read();
  for (std::size_t i : firsts_) {
    fps_[i] = Pipeline::fingerprint_of(ms_[i]);
    claims.push_back({*ms_[i].id, o_.owner, o_.lease, fps_[i], start_, *ms_[i].key});
  }
  claims_ = p_.clock_.timed_store([&] { return store_.claim_batch(claims); });
}

void GatedBatch::walk(std::size_t k) {
  const std::size_t i = firsts_[k];
  walking_ = k;
  if (taken_[i]) return run_taken(i);
  const MessageView& m = ms_[i];
  auto& claim = claims_[k];
  if (!claim.ok() || claim->status != ClaimStatus::kNew) {
    p_.clock_.started(m, start_, handler_start_[i]);
    out_[i] = claim.ok() ? p_.answer_existing(*claim) : p_.fail_open_or_closed(m, h_, i, claim.status(), start_);
    return;
  }
  // A store without entity_chains gets at most one write per key per batch commit.
  if (!chains_) settle(key_of_[i]);
  EntityRecord* p = projection(i, *claim);
  if (p == nullptr) return;
  Gate g;
  const TimePoint t = p_.clock_.read();
  const bool renew = lease_renewal_due(start_, t, o_.lease);
  Turn turn = Turn::kRecheck;
  while (!renew && turn == Turn::kRecheck) {
    g = Gate{};
    if (applies_in_order(m, *p, g)) {
      if (!drain_first(i, *p)) break;
      turn = keys_[key_of_[i]].stale ? Turn::kSingle : Turn::kRecheck;
    } else {
      g = Gate{};
      turn = out_of_turn(i, *claim, *p, t);
    }
    if (taken_[i]) return run_taken(i);
  }
  if (turn == Turn::kDecided) return;
  walking_ = k + 1;  // i runs now: its claim is its own
  if (renew || turn == Turn::kSingle) {
    single(i, *claim, t, renew);
    return;
  }
  run_in_order(i, *claim, *p, g, t);
}

EntityRecord* GatedBatch::projection(std::size_t i, const ClaimResult& claim) {
  const std::uint32_t kid = key_of_[i];
  KeyState& ks = keys_[kid];
  if (!ks.projected && !ks.stale) ks.projected = claim.entity;
  if (!ks.projected) {
    const std::string_view key = *ms_[i].key;
    auto e = p_.clock_.timed_store([&] { return store_.entities()->read_entity(key); });
    if (!e.ok()) {
      (void)store_.release(p_.release_req(key, *ms_[i].id, false));
      out_[i] = p_.store_failure(e.status());
      forget(kid);
      return nullptr;
    }
    ks.projected = std::move(e).value();
  }
  return &*ks.projected;
}

void GatedBatch::run_in_order(std::size_t i, const ClaimResult& claim, EntityRecord& p, Gate& g, TimePoint t) {
  const MessageView& m = ms_[i];
  const std::string_view key = *m.key;
  const std::uint32_t kid = key_of_[i];
  p_.clock_.started(m, t, handler_start_[i]);
  ClaimedStep step(p_, subject_of(m, fps_[i]), claim.retries, t, start_ + o_.lease, &g, &runs_[i]);
  if (!step.run(Pipeline::handler_of(h_, i))) {
    // The failure path may write the entity (a dead-lettered version is used up).
    settle(kid);
    out_[i] = step.failed();
    forget(kid);
    if (g.advanced && strict_) p_.drain(key, h_, this);
    return;
  }
  commits_.push_back(step.commit());
  out_[i] = step.decision();
  commit_index_.push_back(i);
  add_pending(kid);
  p.revision += 1;
  if (g.version) p.version = *g.version;
  if (!g.to.empty()) p.state = std::string(g.to);
}

void GatedBatch::put_deferred() {
  // The early versions' puts, in one call; each gets the decision a put of its own
  // would have given it, and its key drains after the commit (another consumer may
  // have committed the predecessor meanwhile).
  std::vector<BufferPut> puts;
  puts.reserve(deferred_.size());
  for (const Pipeline::DeferredPut& d : deferred_) {
    const MessageView& m = ms_[d.index];
    puts.push_back({*m.key, *m.version, *m.id, d.message, d.at, o_.ordering.limits});
  }
  const auto answers = p_.clock_.timed_store([&] { return store_.entities()->buffer_put_batch(puts); });
  for (std::size_t k = 0; k < deferred_.size(); ++k) {
    const std::size_t i = deferred_[k].index;
    out_[i] = p_.after_buffer_put(ms_[i], fps_[i], answers[k], deferred_[k].expected);
    if (answers[k].ok()) keys_[key_of_[i]].drain = true;
  }
}

void GatedBatch::absorb_after_pending() {
  // The buffered successors that the pending writes make next, absorbed too. In key
  // order (absorb may flush, which empties pending_keys_: a copy).
  std::vector<std::uint32_t> advanced = pending_keys_;
  std::sort(advanced.begin(), advanced.end(),
            [&](std::uint32_t a, std::uint32_t b) { return key_names_[a] < key_names_[b]; });
  for (std::uint32_t k : advanced) {
    if (!keys_[k].projected) continue;
    auto next = p_.clock_.timed_store([&] { return store_.entities()->buffer_read(key_names_[k], kAbsorbAhead); });
    if (next.ok()) absorb(k, *keys_[k].projected, *next);  // drain() runs what it leaves
  }
}

void GatedBatch::finish_all() {
  for (std::size_t i = 0; i < ms_.size(); ++i) {
    if (!finished_[i]) p_.finish(ms_[i], out_[i], handler_start_[i]);
  }
  for (std::size_t i : repeats_) out_[i] = p_.process(ms_[i], h_, i);
}

// --- the pending commits -----------------------------------------------------------

void GatedBatch::forget(std::uint32_t k) {
  keys_[k].projected.reset();
  keys_[k].stale = true;
}

void GatedBatch::add_pending(std::uint32_t k) {
  if (keys_[k].pending.empty()) pending_keys_.push_back(k);
  keys_[k].pending.push_back(commits_.size() - 1);
}

void GatedBatch::flush() {
  if (commits_.empty()) return;
  auto statuses = p_.clock_.timed_store([&] { return store_.commit_batch(commits_); });
  for (std::size_t k = 0; k < commit_index_.size(); ++k) {
    const std::size_t i = commit_index_[k];
    if (i >= ms_.size()) {
      land_absorbed(absorbed_[i - ms_.size()], statuses[k]);
    } else {
      land_message(i, statuses[k]);
    }
  }
  for (auto& [k, e] : unbuffered_) {
    if (statuses[k].ok()) p_.report(e, Pipeline::stale_entry(e.version, e.version), nullptr);
  }
  unbuffered_.clear();
  commits_.clear();
  commit_index_.clear();
  for (std::uint32_t k : pending_keys_) keys_[k].pending.clear();
  pending_keys_.clear();
}

void GatedBatch::land_message(std::size_t i, const Status& s) {
  const std::uint32_t kid = key_of_[i];
  if (s.code() == StatusCode::kAborted) {
    (void)store_.release(p_.release_req(key_names_[kid], *ms_[i].id, false));
    out_[i] = p_.concurrent_update(s);
  } else {
    p_.after_commit(s, runs_[i], out_[i]);
  }
  if (!s.ok()) {
    forget(kid);
  } else if (strict_) {
    keys_[kid].drain = true;
  }
}

void GatedBatch::land_absorbed(Absorbed& a, const Status& s) {
  Decision d;
  if (s.code() == StatusCode::kAborted) {
    (void)store_.release(p_.release_req(key_names_[a.key], a.entry.id, false));
    d = p_.concurrent_update(s);
  } else {
    d = Decision::ack(Reason::kProcessed);
    p_.after_commit(s, a.run, d);
  }
  p_.report_paced(a.entry, d, &a.gate);
  if (s.ok()) {
    p_.metrics_.count_drained(1);
    keys_[a.key].drain = true;
  } else {
    forget(a.key);
  }
}

void GatedBatch::settle(std::uint32_t k) {
  if (!keys_[k].pending.empty()) flush();
  if (std::exchange(keys_[k].drain, false) && p_.drain(key_names_[k], h_, this) > 0) forget(k);
}

// --- absorbing buffered successors ---------------------------------------------------

std::size_t GatedBatch::absorb(std::uint32_t k, EntityRecord& p, std::vector<BufferEntry>& entries) {
  const std::string_view key = key_names_[k];
  if (h_.call_encoded == nullptr || entries.empty() || p.version == 0) return 0;
  {
    std::lock_guard lock(p_.impl_.buffered_mu);
    if (p_.impl_.drain_not_before.contains(std::string(key))) return 0;  // drain() paces it
  }
  const std::size_t n = drop_stale(k, p, entries);
  if (n == 0) return 0;
  const TimePoint t = p_.clock_.read();
  std::vector<ClaimRequest> qs;
  qs.reserve(n);
  for (std::size_t j = 0; j < n; ++j) qs.push_back({entries[j].id, o_.owner, o_.lease, std::nullopt, t, key});
  auto granted = p_.clock_.timed_store([&] { return store_.claim_batch(qs); });
  take_batch_claims(entries, t, granted);
  std::size_t ran = 0;
  for (; ran < n; ++ran) {
    auto& c = granted[ran];
    if (!c.ok() || c->status != ClaimStatus::kNew) break;
    const Step step = run_absorbed(k, p, entries[ran], *c, t);
    if (step == Step::kLeft) break;
    if (step == Step::kDecided) {
      ++ran;
      break;
    }
  }
  for (std::size_t j = ran; j < n; ++j) {  // claimed, not run: left to drain()
    if (granted[j].ok() && granted[j]->status == ClaimStatus::kNew)
      (void)store_.release(p_.release_req(key, entries[j].id, false));
  }
  return ran;
}

bool GatedBatch::drain_first(std::size_t i, EntityRecord& p) {
  const std::uint32_t k = key_of_[i];
  KeyState& ks = keys_[k];
  if (!strict_ || !chains_ || ks.pending.empty()) return false;
  if (ks.buffered && std::find(ks.buffered->begin(), ks.buffered->end(), p.version + 1) == ks.buffered->end()) {
    return false;
  }
  auto next = p_.clock_.timed_store([&] { return store_.entities()->buffer_read(key_names_[k], kAbsorbAhead); });
  if (!next.ok()) return false;
  ks.buffered.emplace();
  for (const BufferEntry& e : *next) ks.buffered->push_back(e.version);
  return absorb(k, p, *next) > 0;
}

void GatedBatch::take_batch_claims(const std::vector<BufferEntry>& entries, TimePoint t,
                                   std::vector<StatusOr<ClaimResult>>& granted) {
  for (std::size_t j = 0; j < granted.size(); ++j) {
    if (!granted[j].ok() || granted[j]->status != ClaimStatus::kInProgress) continue;
    if (auto mine = take(entries[j].id, t)) granted[j] = std::move(*mine);
  }
}

std::optional<ClaimResult> GatedBatch::take(std::string_view id, TimePoint now) {
  if (lease_renewal_due(start_, now, o_.lease)) return std::nullopt;
  for (std::size_t k = walking_; k < firsts_.size(); ++k) {
    const std::size_t i = firsts_[k];
    if (*ms_[i].id != id || taken_[i] || !claims_[k].ok() || claims_[k]->status != ClaimStatus::kNew) continue;
    taken_[i] = true;
    finished_[i] = true;
    return *claims_[k];
  }
  return std::nullopt;
}

void GatedBatch::run_taken(std::size_t i) {
  settle(key_of_[i]);
  out_[i] = p_.process(ms_[i], h_, i);
  forget(key_of_[i]);
}

std::size_t GatedBatch::drop_stale(std::uint32_t k, const EntityRecord& p, std::vector<BufferEntry>& entries) {
  std::size_t first = 0;
  for (; first < entries.size() && entries[first].version <= p.version; ++first) {
    for (std::size_t c : keys_[k].pending) {
      std::optional<EntityWrite>& w = commits_[c].entity;
      if (w && w->version == entries[first].version && !w->unbuffer) {
        w->unbuffer = w->version;
        unbuffered_.emplace_back(c, std::move(entries[first]));
        break;
      }
    }
  }
  entries.erase(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(first));
  std::size_t n = 0;
  while (n < entries.size() && entries[n].version == p.version + 1 + n) ++n;
  return n;
}

GatedBatch::Step GatedBatch::run_absorbed(std::uint32_t k, EntityRecord& p, BufferEntry& entry,
                                          const ClaimResult& claim, TimePoint t) {
  Absorbed& a = absorbed_.emplace_back();
  a.key = k;
  a.entry = std::move(entry);
  const auto frame = unframe_buffered(a.entry.message);
  Gate& g = a.gate;
  g.key = a.entry.key;
  g.revision = p.revision;
  g.version = a.entry.version;
  g.drained = true;
  bool applies = frame.has_value();
  if (applies && o_.machine) {
    const StateGate::Check chk = o_.machine->check(p.state, frame->event);
    applies = chk.answer == StateGate::Answer::kApply;
    g.event = frame->event;
    g.from = chk.from;
    g.to = chk.to;
  }
  if (!applies) {
    entry = std::move(a.entry);  // released by absorb
    absorbed_.pop_back();
    return Step::kLeft;
  }
  bool decoded = true;
  const Subject subject{a.entry.id, std::nullopt, a.entry.key, a.entry.version};
  ClaimedStep step(p_, subject, claim.retries, t, t + o_.lease, &g, &a.run);
  const bool ok = step.run([&](HandlerContext& hc) {
    HandlerResult r = HandlerResult::ok();
    decoded = h_.call_encoded(h_.self, frame->message, hc, r);
    return decoded ? r : HandlerResult::fail("the buffered message cannot be decoded");
  });
  if (!decoded) {  // nothing ran: drain() dead-letters it
    entry = std::move(a.entry);
    absorbed_.pop_back();
    return Step::kLeft;
  }
  if (!ok) {
    // As drain() would: the key's pending writes land first, then the failure path
    // (which may write the entity: a dead-lettered version is used up).
    if (!keys_[k].pending.empty()) flush();
    p_.report_paced(a.entry, step.failed(), &g);
    forget(k);
    if (g.advanced) keys_[k].drain = true;
    return Step::kDecided;
  }
  commits_.push_back(step.commit());
  commit_index_.push_back(ms_.size() + absorbed_.size() - 1);
  add_pending(k);
  p.revision += 1;
  p.version = a.entry.version;
  if (!g.to.empty()) p.state = std::string(g.to);
  return Step::kRan;
}

// --- the single-message path ---------------------------------------------------------

void GatedBatch::single(std::size_t i, const ClaimResult& claim, TimePoint t, bool renew) {
  const MessageView& m = ms_[i];
  const std::string_view key = *m.key;
  settle(key_of_[i]);
  forget(key_of_[i]);
  TimePoint lease_until = start_ + o_.lease;
  if (renew) {
    ExtendRequest req{*m.id, o_.owner, o_.lease, t, key};
    if (!p_.clock_.timed_store([&] { return store_.extend(req); }).ok()) {
      out_[i] = p_.process(m, h_, i);  // the lease was lost: claim it again
      finished_[i] = true;
      return;
    }
    lease_until = t + o_.lease;
  }
  p_.clock_.started(m, t, handler_start_[i]);
  auto e = p_.clock_.timed_store([&] { return store_.entities()->read_entity(key); });
  if (!e.ok()) {
    (void)store_.release(p_.release_req(key, *m.id, false));
    out_[i] = p_.store_failure(e.status());
    return;
  }
  ClaimResult c = claim;
  c.entity = std::move(e).value();
  Gate g;
  if (auto early = p_.gate(m, c, fps_[i], h_, i, g)) {
    out_[i] = *early;
  } else {
    out_[i] = p_.run_claimed(subject_of(m, fps_[i]), c.retries, Pipeline::handler_of(h_, i), t, &g, lease_until);
  }
  if (g.advanced && strict_) p_.drain(key, h_, this);
}

GatedBatch::Turn GatedBatch::out_of_turn(std::size_t i, const ClaimResult& claim, EntityRecord& p, TimePoint t) {
  const MessageView& m = ms_[i];
  if (!strict_) return Turn::kSingle;
  const std::uint64_t v = *m.version;
  const std::uint64_t expected = p.version == 0 ? o_.ordering.first_version.value_or(v) : p.version + 1;
  if (v == expected) return Turn::kSingle;
  if (v > expected) {
    const std::size_t want = chains_ ? kAbsorbAhead : 1;
    auto next = p_.clock_.timed_store([&] { return store_.entities()->buffer_read(*m.key, want); });
    if (!next.ok()) return Turn::kSingle;
    // Entries below `expected` are stale, or removed by this batch's pending commits.
    const auto live =
        std::find_if(next->begin(), next->end(), [&](const BufferEntry& b) { return b.version >= expected; });
    if (live != next->end() && live->version == expected) {
      const bool moved = chains_ && absorb(key_of_[i], p, *next) > 0 && !keys_[key_of_[i]].stale;
      return moved ? Turn::kRecheck : Turn::kSingle;
    }
  }
  p_.clock_.started(m, t, handler_start_[i]);
  ClaimResult c = claim;
  c.entity = p;
  Gate g;
  p_.deferred_puts_ = &deferred_;
  auto d = p_.gate(m, c, fps_[i], h_, i, g);
  p_.deferred_puts_ = nullptr;
  if (d) {
    out_[i] = *d;
    return Turn::kDecided;
  }
  return Turn::kSingle;  // not reached: v is not the expected version
}

}  // namespace idem::detail

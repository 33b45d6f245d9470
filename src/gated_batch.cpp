// process_batch for consumers behind the entity gates (ordering by version, a state
// machine): one batch claim and one batch commit for the messages that apply in order,
// the single-message path for everything else. Under strict ordering the batch runs
// each key's versions in version order, so that an early version whose predecessor is
// in the same batch is not buffered.
//
// The walk keeps, per key, the entity record as the batch's pending commits will leave
// it (a projection), and gates each message against it. A message that applies runs
// its handler and its commit joins the pending ones: its entity write expects the
// revision the earlier pending commit of its key produces. A store with entity_chains
// checks the writes of one key in order and stops a key's chain at its first failure
// (the conformance suite proves it), so a chain lands as a prefix; without it, at most
// one write per key goes into a batch commit (a later one could otherwise land on a
// revision another writer produced after the earlier one failed). Anything else
// (stale, early, an invalid transition, a handler failure, a lost lease) takes the
// single-message path, which may itself write the entity; if its key has pending
// commits they land first, so that the store holds what the projection says.
//
// Under strict ordering on a store with entity_chains, the buffered successors of a
// key run inside the batch too ("absorbed"): when the key's buffer holds the version
// its projection expects next (found by an early message of the key, and before the
// batch's final commit), those entries are claimed in one batch claim, run, and their
// commits (each removing its buffer entry) chain on the key's pending writes, as
// drain() would run them one transaction at a time once those writes had landed.
#include <algorithm>
#include <deque>
#include <optional>
#include <utility>

#include "batch_index.hpp"
#include "buffer_frame.hpp"
#include "pipeline.hpp"

namespace idem::detail {

bool Pipeline::applies_in_order(const MessageView& m, const EntityRecord& e, Gate& g) const {
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

namespace {

// What the batch knows of one of its keys, by the key's BatchIndex.
struct KeyState {
  // The key's entity record as the batch's pending commits leave it; none: not met
  // yet, or forgotten (then read from the store: the claim's copy may be stale).
  std::optional<EntityRecord> projected;
  bool stale = false;                // changed in the store outside the projection
  bool drain = false;                // strict: a version landed; drain after
  std::vector<std::size_t> pending;  // where its writes are among the pending commits
};

// A buffered successor run inside the batch; its commit is among the pending ones.
struct Absorbed {
  std::uint32_t key = 0;  // the batch's index of entry.key
  BufferEntry entry;
  Gate gate;  // views into entry
  Run run;
};

// Buffer entries read at a time when looking for successors to absorb.
constexpr std::size_t kAbsorbAhead = 16;

// What out_of_turn did with a message.
enum class Turn {
  kDecided,  // decided (stale, too far ahead, buffered)
  kSingle,   // take the single-message path
  kRecheck,  // buffered successors were absorbed: the projection moved, gate it again
};

}  // namespace

std::vector<Decision> Pipeline::process_batch_gated(std::span<const MessageView> ms, HandlerThunk h) {
  std::vector<Decision> out(ms.size());
  std::vector<bool> finished(ms.size(), false);  // decided and counted by process()
  std::vector<std::size_t> firsts, repeats;
  BatchIndex seen(ms.size());
  BatchIndex key_index(ms.size());
  std::vector<std::uint32_t> key_of(ms.size());  // each valid message's key, by index
  std::vector<std::string_view> key_names;       // the keys, by index
  for (std::size_t i = 0; i < ms.size(); ++i) {
    std::optional<Decision> bad_decision = validate(ms[i]);
    if (!bad_decision) bad_decision = validate_entity(ms[i]);
    if (bad_decision) {
      out[i] = *bad_decision;
      continue;
    }
    const auto [k, new_key] = key_index.insert(*ms[i].key);
    key_of[i] = k;
    if (new_key) key_names.push_back(*ms[i].key);
    if (seen.insert(*ms[i].id).second) {
      firsts.push_back(i);
    } else {
      repeats.push_back(i);
      finished[i] = true;
    }
  }
  maybe_tick(h);
  const bool strict = o_.ordering.mode == Ordering::kStrict;
  if (strict) {
    // Within the batch each key's versions run in version order: a version that
    // arrives before its predecessor in the same batch waits in memory, not in the
    // reorder buffer. (Monotonic keeps the input order: there a lower version after a
    // higher one is stale, whatever batch it comes in.)
    std::stable_sort(firsts.begin(), firsts.end(), [&](std::size_t a, std::size_t b) {
      if (key_of[a] != key_of[b]) return key_of[a] < key_of[b];
      return *ms[a].version < *ms[b].version;
    });
  }

  std::vector<std::optional<std::uint64_t>> fps(ms.size());
  std::vector<ClaimRequest> claims;
  claims.reserve(firsts.size());
  const TimePoint start = tick();
  for (std::size_t i : firsts) {
    fps[i] = fingerprint_of(ms[i]);
    claims.push_back({*ms[i].id, o_.owner, o_.lease, fps[i], start, *ms[i].key});
  }
  auto results = timed_store([&] { return impl_.store->claim_batch(claims); });

  std::vector<KeyState> keys(key_names.size());
  std::vector<std::uint32_t> pending_keys;  // the keys with a write among `commits`
  std::vector<CommitRequest> commits;
  std::vector<std::size_t> commit_index;  // into ms, or ms.size() + an index into absorbed
  std::deque<Absorbed> absorbed;          // stable addresses: commits view into them
  // Stale buffer entries that a pending commit (at the index) removes: reported as
  // drain() reports them once it lands.
  std::vector<std::pair<std::size_t, BufferEntry>> unbuffered;
  const bool chains = impl_.store->capabilities().entity_chains;
  std::vector<Run> runs(ms.size());
  std::vector<std::optional<TimePoint>> handler_start(ms.size());
  std::vector<DeferredPut> deferred;  // early versions, put into the buffer together

  // Forgets the projection of key k: the store changed it outside the projection.
  auto forget = [&](std::uint32_t k) {
    keys[k].projected.reset();
    keys[k].stale = true;
  };
  auto add_pending = [&](std::uint32_t k) {
    if (keys[k].pending.empty()) pending_keys.push_back(k);
    keys[k].pending.push_back(commits.size() - 1);
  };

  // After the batch commit: the decision of an absorbed entry, reported as drain()
  // would report it.
  auto land_absorbed = [&](Absorbed& a, const Status& s) {
    ekey_ = key_names[a.key];
    Decision d;
    if (s.code() == StatusCode::kAborted) {
      (void)impl_.store->release(release_req(a.entry.id, false));
      d = concurrent_update(s);
    } else {
      d = after_commit(s, a.run, Decision::ack(Reason::kProcessed));
    }
    report_paced(a.entry, d, &a.gate);
    if (s.ok()) {
      metrics_.count_drained(1);
      keys[a.key].drain = true;
    } else {
      forget(a.key);
    }
  };
  auto flush = [&] {
    if (commits.empty()) return;
    const auto saved_key = ekey_;
    auto statuses = timed_store([&] { return impl_.store->commit_batch(commits); });
    for (std::size_t k = 0; k < commit_index.size(); ++k) {
      const std::size_t i = commit_index[k];
      const Status& s = statuses[k];
      if (i >= ms.size()) {
        land_absorbed(absorbed[i - ms.size()], s);
        continue;
      }
      const std::uint32_t kid = key_of[i];
      if (s.code() == StatusCode::kAborted) {
        ekey_ = key_names[kid];
        (void)impl_.store->release(release_req(*ms[i].id, false));
        out[i] = concurrent_update(s);
      } else {
        out[i] = after_commit(s, runs[i], std::move(out[i]));
      }
      if (!s.ok()) {
        forget(kid);
      } else if (strict) {
        keys[kid].drain = true;
      }
    }
    for (auto& [k, e] : unbuffered) {
      if (statuses[k].ok()) report(e, stale_entry(e.version, e.version), nullptr);
    }
    unbuffered.clear();
    commits.clear();
    commit_index.clear();
    for (std::uint32_t k : pending_keys) keys[k].pending.clear();
    pending_keys.clear();
    ekey_ = saved_key;
  };

  // Lands the pending commits if one of them writes `key`, then (strict) drains the
  // key's successors if a commit of it landed, as process() would have right after it.
  // The single-message path of a key touches that key only: other keys' commits wait.
  auto settle = [&](std::uint32_t k) {
    if (!keys[k].pending.empty()) flush();
    if (std::exchange(keys[k].drain, false) && drain(key_names[k], h) > 0) forget(k);
  };

  // Strict, entity_chains: runs `entries` (the key's buffer, by version) from the one
  // the projection `p` expects next, inside the batch (see the file comment). Stops at
  // the first entry that needs more than an in-order run: a gap, a claim not granted,
  // an undecodable frame, a transition that does not apply (drain() decides those), or
  // a handler failure (decided here, as drain() would). Returns how many successors it
  // decided.
  auto absorb = [&](std::uint32_t k, EntityRecord& p, std::vector<BufferEntry>& entries) -> std::size_t {
    const std::string_view key = key_names[k];
    if (h.call_encoded == nullptr || entries.empty() || p.version == 0) return 0;
    {
      std::lock_guard lock(impl_.buffered_mu);
      if (impl_.drain_not_before.contains(std::string(key))) return 0;  // drain() paces it
    }
    // Leading entries at or below the projection are stale. One that a pending commit
    // of the batch applies (a redelivery of a buffered message, run in order) is
    // removed by that commit, as drain() would remove it after the commit.
    std::size_t first = 0;
    for (; first < entries.size() && entries[first].version <= p.version; ++first) {
      for (std::size_t c : keys[k].pending) {
        std::optional<EntityWrite>& w = commits[c].entity;
        if (w && w->version == entries[first].version && !w->unbuffer) {
          w->unbuffer = w->version;
          unbuffered.emplace_back(c, std::move(entries[first]));
          break;
        }
      }
    }
    entries.erase(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(first));
    std::size_t n = 0;
    while (n < entries.size() && entries[n].version == p.version + 1 + n) ++n;
    if (n == 0) return 0;
    const TimePoint t = tick();
    std::vector<ClaimRequest> qs;
    qs.reserve(n);
    for (std::size_t j = 0; j < n; ++j) qs.push_back({entries[j].id, o_.owner, o_.lease, std::nullopt, t, key});
    auto granted = timed_store([&] { return impl_.store->claim_batch(qs); });
    std::size_t ran = 0;
    for (; ran < n; ++ran) {
      auto& c = granted[ran];
      if (!c.ok() || c->status != ClaimStatus::kNew) break;
      Absorbed& a = absorbed.emplace_back();
      a.key = k;
      a.entry = std::move(entries[ran]);
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
        entries[ran] = std::move(a.entry);  // released below
        absorbed.pop_back();
        break;
      }
      ekey_ = key;
      bool decoded = true;
      HandlerContext ctx;
      ContextAccess::init(ctx, &engine_, a.entry.id, c->retries + 1, o_.guarantee, t + o_.lease, nullptr, &g,
                          a.entry.version);
      a.run = run_handler_with(
          [&](HandlerContext& hc) {
            HandlerResult r = HandlerResult::ok();
            decoded = h.call_encoded(h.self, frame->message, hc, r);
            return decoded ? r : HandlerResult::fail("the buffered message cannot be decoded");
          },
          ctx, t);
      if (!decoded) {  // nothing ran: drain() dead-letters it
        entries[ran] = std::move(a.entry);
        absorbed.pop_back();
        break;
      }
      if (a.run.kind != HandlerResult::Kind::kOk) {
        // As drain() would: the key's pending writes land first, then the failure path
        // (which may write the entity: a dead-lettered version is used up).
        if (!keys[k].pending.empty()) flush();
        ekey_ = key;
        advanced_ = false;
        report_paced(a.entry, after_failure(a.entry.id, std::nullopt, c->retries, a.run, &g), &g);
        forget(k);
        if (advanced_) keys[k].drain = true;
        ++ran;  // decided
        break;
      }
      Decision d = Decision::ack(Reason::kProcessed);
      commits.push_back(commit_request(a.entry.id, std::nullopt, Outcome::kProcessed, storable_result(a.run, d), &g));
      commit_index.push_back(ms.size() + absorbed.size() - 1);
      add_pending(k);
      p.revision += 1;
      p.version = a.entry.version;
      if (!g.to.empty()) p.state = std::string(g.to);
    }
    ekey_ = key;
    for (std::size_t j = ran; j < n; ++j) {  // claimed, not run: left to drain()
      if (granted[j].ok() && granted[j]->status == ClaimStatus::kNew)
        (void)impl_.store->release(release_req(entries[j].id, false));
    }
    return ran;
  };

  // Message i, claimed by the batch at `start`, through the single-message path: the
  // key's pending commits land first, the entity is read back, the lease is renewed if
  // the batch's handlers used up more than a tenth of it (`renew`).
  auto single = [&](std::size_t i, const ClaimResult& claim, TimePoint t, bool renew) {
    const MessageView& m = ms[i];
    const std::string_view key = *m.key;
    settle(key_of[i]);
    forget(key_of[i]);
    ekey_ = key;
    advanced_ = false;
    TimePoint lease_until = start + o_.lease;
    if (renew) {
      ExtendRequest req{*m.id, o_.owner, o_.lease, t, key};
      if (!timed_store([&] { return impl_.store->extend(req); }).ok()) {
        out[i] = process(m, h, i);  // the lease was lost: claim it again
        finished[i] = true;
        return;
      }
      lease_until = t + o_.lease;
    }
    started(m, t, handler_start[i]);
    auto e = timed_store([&] { return impl_.store->read_entity(key); });
    if (!e.ok()) {
      (void)impl_.store->release(release_req(*m.id, false));
      out[i] = store_failure(e.status());
      return;
    }
    ClaimResult c = claim;
    c.entity = std::move(e).value();
    Gate g;
    if (auto early = gate(m, c, fps[i], h, i, g)) {
      out[i] = *early;
    } else {
      out[i] = run_claimed(*m.id, fps[i], c.retries, handler_of(h, i), t, &g, m.version, lease_until);
    }
    if (advanced_ && strict) drain(key, h);
  };

  // Strict: message i is stale or early against the projection `p`. Decides it (stale,
  // too far ahead, buffered) without landing the key's pending writes — none of these
  // writes the entity — unless the key's buffer holds the version the projection
  // expects next, which process() would have drained before i: then those entries are
  // absorbed if they can be (kRecheck), else i takes the single-message path.
  auto out_of_turn = [&](std::size_t i, const ClaimResult& claim, EntityRecord& p, TimePoint t) {
    const MessageView& m = ms[i];
    if (!strict) return Turn::kSingle;
    const EntityRecord& e = p;
    const std::uint64_t v = *m.version;
    const std::uint64_t expected = e.version == 0 ? o_.ordering.first_version.value_or(v) : e.version + 1;
    if (v == expected) return Turn::kSingle;
    if (v > expected) {
      const std::size_t want = chains ? kAbsorbAhead : 1;
      auto next = timed_store([&] { return impl_.store->buffer_read(*m.key, want); });
      if (!next.ok()) return Turn::kSingle;
      // Entries below `expected` are stale, or removed by this batch's pending commits.
      const auto live =
          std::find_if(next->begin(), next->end(), [&](const BufferEntry& b) { return b.version >= expected; });
      if (live != next->end() && live->version == expected) {
        const bool moved = chains && absorb(key_of[i], p, *next) > 0 && !keys[key_of[i]].stale;
        return moved ? Turn::kRecheck : Turn::kSingle;
      }
    }
    started(m, t, handler_start[i]);
    ClaimResult c = claim;
    c.entity = e;
    ekey_ = *m.key;
    advanced_ = false;
    Gate g;
    deferred_puts_ = &deferred;
    auto d = gate(m, c, fps[i], h, i, g);
    deferred_puts_ = nullptr;
    if (d) {
      out[i] = *d;
      return Turn::kDecided;
    }
    return Turn::kSingle;  // not reached: v is not the expected version
  };

  for (std::size_t k = 0; k < firsts.size(); ++k) {
    const std::size_t i = firsts[k];
    const MessageView& m = ms[i];
    auto& claim = results[k];
    if (!claim.ok() || claim->status != ClaimStatus::kNew) {
      started(m, start, handler_start[i]);
      out[i] = claim.ok() ? answer_existing(*claim) : fail_open_or_closed(m, h, i, claim.status(), start);
      continue;
    }
    const std::string_view key = *m.key;
    const std::uint32_t kid = key_of[i];
    // A store without entity_chains gets at most one write per key per batch commit.
    if (!chains) settle(kid);
    ekey_ = key;
    KeyState& ks = keys[kid];
    if (!ks.projected && !ks.stale) ks.projected = claim->entity;
    if (!ks.projected) {
      auto e = timed_store([&] { return impl_.store->read_entity(key); });
      if (!e.ok()) {
        (void)impl_.store->release(release_req(*m.id, false));
        out[i] = store_failure(e.status());
        forget(kid);
        continue;
      }
      ks.projected = std::move(e).value();
    }
    EntityRecord& p = *ks.projected;
    Gate g;
    const TimePoint t = tick();
    const bool renew = t - start > o_.lease / kBatchLeaseRenewDivisor;
    Turn turn = Turn::kRecheck;
    while (!renew && turn == Turn::kRecheck && !applies_in_order(m, p, g)) {
      g = Gate{};
      turn = out_of_turn(i, *claim, p, t);
    }
    if (turn == Turn::kDecided) continue;
    if (renew || turn == Turn::kSingle) {
      single(i, *claim, t, renew);
      continue;
    }
    started(m, t, handler_start[i]);
    HandlerContext ctx;
    ContextAccess::init(ctx, &engine_, *m.id, claim->retries + 1, o_.guarantee, start + o_.lease, nullptr, &g,
                        m.version);
    runs[i] = run_handler(h, i, ctx, t);
    if (runs[i].kind != HandlerResult::Kind::kOk) {
      // The failure path may write the entity (a dead-lettered version is used up).
      settle(kid);
      ekey_ = key;
      advanced_ = false;
      out[i] = after_failure(*m.id, fps[i], claim->retries, runs[i], &g);
      forget(kid);
      if (advanced_ && strict) drain(key, h);
      continue;
    }
    out[i] = Decision::ack(Reason::kProcessed);
    commits.push_back(commit_request(*m.id, fps[i], Outcome::kProcessed, storable_result(runs[i], out[i]), &g));
    commit_index.push_back(i);
    add_pending(kid);
    p.revision += 1;
    if (g.version) p.version = *g.version;
    if (!g.to.empty()) p.state = std::string(g.to);
  }
  if (!deferred.empty()) {
    // The early versions' puts, in one call; each gets the decision a put of its own
    // would have given it, and its key drains after the commit (another consumer may
    // have committed the predecessor meanwhile).
    std::vector<BufferPut> puts;
    puts.reserve(deferred.size());
    for (const DeferredPut& d : deferred) {
      const MessageView& m = ms[d.index];
      puts.push_back({*m.key, *m.version, *m.id, d.message, d.at, o_.ordering.limits});
    }
    const auto answers = timed_store([&] { return impl_.store->buffer_put_batch(puts); });
    for (std::size_t k = 0; k < deferred.size(); ++k) {
      const std::size_t i = deferred[k].index;
      ekey_ = *ms[i].key;
      out[i] = after_buffer_put(ms[i], fps[i], answers[k], deferred[k].expected);
      if (answers[k].ok()) keys[key_of[i]].drain = true;
    }
  }
  if (strict && chains) {
    // The buffered successors that the pending writes make next, absorbed too.
    // In key order (absorb may flush, which empties pending_keys: a copy).
    std::vector<std::uint32_t> advanced = pending_keys;
    std::sort(advanced.begin(), advanced.end(),
              [&](std::uint32_t a, std::uint32_t b) { return key_names[a] < key_names[b]; });
    for (std::uint32_t k : advanced) {
      if (!keys[k].projected) continue;
      auto next = timed_store([&] { return impl_.store->buffer_read(key_names[k], kAbsorbAhead); });
      if (next.ok()) absorb(k, *keys[k].projected, *next);  // drain() runs what it leaves
    }
  }
  flush();
  for (std::uint32_t k = 0; k < keys.size(); ++k) {
    if (keys[k].drain) drain(key_names[k], h);
  }
  for (std::size_t i = 0; i < ms.size(); ++i) {
    if (!finished[i]) finish(ms[i], out[i], handler_start[i]);
  }
  for (std::size_t i : repeats) out[i] = process(ms[i], h, i);
  return out;
}

}  // namespace idem::detail

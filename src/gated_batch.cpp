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
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

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

// The entity record of a key as this batch leaves it.
struct Projection {
  EntityRecord record;
  bool known = false;  // false: read it from the store (the claim's copy may be stale)
};

}  // namespace

std::vector<Decision> Pipeline::process_batch_gated(std::span<const MessageView> ms, HandlerThunk h) {
  std::vector<Decision> out(ms.size());
  std::vector<bool> finished(ms.size(), false);  // decided and counted by process()
  std::vector<std::size_t> firsts, repeats;
  std::unordered_map<std::string_view, std::size_t> first_of;
  first_of.reserve(ms.size());
  for (std::size_t i = 0; i < ms.size(); ++i) {
    std::optional<Decision> bad_decision = validate(ms[i]);
    if (!bad_decision) bad_decision = validate_entity(ms[i]);
    if (bad_decision) {
      out[i] = *bad_decision;
      continue;
    }
    if (first_of.emplace(*ms[i].id, i).second) {
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
      if (*ms[a].key != *ms[b].key) return *ms[a].key < *ms[b].key;
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

  std::unordered_map<std::string_view, Projection> projected;
  std::unordered_set<std::string_view> stale_keys;  // changed in the store outside the projection
  std::unordered_set<std::string_view> drain_keys;  // strict: a version landed; drain after
  std::vector<CommitRequest> commits;
  std::vector<std::size_t> commit_index;
  std::unordered_set<std::string_view> pending_keys;  // keys with a write among `commits`
  const bool chains = impl_.store->capabilities().entity_chains;
  std::vector<Run> runs(ms.size());
  std::vector<std::optional<TimePoint>> handler_start(ms.size());

  // Forgets the projection of `key`: the store changed it outside the projection.
  auto forget = [&](std::string_view key) {
    projected.erase(key);
    stale_keys.insert(key);
  };

  auto flush = [&] {
    if (commits.empty()) return;
    const auto saved_key = ekey_;
    auto statuses = timed_store([&] { return impl_.store->commit_batch(commits); });
    for (std::size_t k = 0; k < commit_index.size(); ++k) {
      const std::size_t i = commit_index[k];
      const std::string_view key = *ms[i].key;
      const Status& s = statuses[k];
      if (s.code() == StatusCode::kAborted) {
        ekey_ = key;
        (void)impl_.store->release(release_req(*ms[i].id, false));
        out[i] = concurrent_update(s);
      } else {
        out[i] = after_commit(s, runs[i], std::move(out[i]));
      }
      if (!s.is_ok()) {
        forget(key);
      } else if (strict) {
        drain_keys.insert(key);
      }
    }
    commits.clear();
    commit_index.clear();
    pending_keys.clear();
    ekey_ = saved_key;
  };

  // Lands the pending commits if one of them writes `key`, then (strict) drains the
  // key's successors if a commit of it landed, as process() would have right after it.
  // The single-message path of a key touches that key only: other keys' commits wait.
  auto settle = [&](std::string_view key) {
    if (pending_keys.contains(key)) flush();
    if (drain_keys.erase(key) > 0 && drain(key, h) > 0) forget(key);
  };

  // Message i, claimed by the batch at `start`, through the single-message path: the
  // key's pending commits land first, the entity is read back, the lease is renewed if
  // the batch's handlers used up more than a tenth of it (`renew`).
  auto single = [&](std::size_t i, const ClaimResult& claim, TimePoint t, bool renew) {
    const MessageView& m = ms[i];
    const std::string_view key = *m.key;
    settle(key);
    forget(key);
    ekey_ = key;
    advanced_ = false;
    TimePoint lease_until = start + o_.lease;
    if (renew) {
      ExtendRequest req{*m.id, o_.owner, o_.lease, t, key};
      if (!timed_store([&] { return impl_.store->extend(req); }).is_ok()) {
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

  // Strict: message i is stale or early against the projection `e`. Decides it (stale,
  // too far ahead, buffered) without landing the key's pending writes — none of these
  // writes the entity — unless the key's buffer holds the version the projection
  // expects next, which process() would have drained before i. Returns false if i must
  // take the single-message path.
  auto out_of_turn = [&](std::size_t i, const ClaimResult& claim, const EntityRecord& e, TimePoint t) {
    const MessageView& m = ms[i];
    if (!strict) return false;
    const std::uint64_t v = *m.version;
    const std::uint64_t expected = e.version == 0 ? o_.ordering.first_version.value_or(v) : e.version + 1;
    if (v == expected) return false;
    if (v > expected) {
      auto next = timed_store([&] { return impl_.store->buffer_read(*m.key, 1); });
      if (!next.ok() || (!next->empty() && next->front().version == expected)) return false;
    }
    started(m, t, handler_start[i]);
    ClaimResult c = claim;
    c.entity = e;
    ekey_ = *m.key;
    advanced_ = false;
    Gate g;
    if (auto d = gate(m, c, fps[i], h, i, g)) {
      out[i] = *d;
      return true;
    }
    return false;  // not reached: v is not the expected version
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
    // A store without entity_chains gets at most one write per key per batch commit.
    if (!chains) settle(key);
    ekey_ = key;
    auto [pos, fresh] = projected.try_emplace(key);
    Projection& p = pos->second;
    if (fresh && !stale_keys.contains(key)) {
      p.record = claim->entity;
      p.known = true;
    }
    if (!p.known) {
      auto e = timed_store([&] { return impl_.store->read_entity(key); });
      if (!e.ok()) {
        (void)impl_.store->release(release_req(*m.id, false));
        out[i] = store_failure(e.status());
        forget(key);
        continue;
      }
      p.record = std::move(e).value();
      p.known = true;
    }
    Gate g;
    const TimePoint t = tick();
    const bool renew = t - start > o_.lease / kBatchLeaseRenewDivisor;
    if (renew || !applies_in_order(m, p.record, g)) {
      if (!renew && out_of_turn(i, *claim, p.record, t)) continue;
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
      settle(key);
      ekey_ = key;
      advanced_ = false;
      out[i] = after_failure(*m.id, fps[i], claim->retries, runs[i], &g);
      forget(key);
      if (advanced_ && strict) drain(key, h);
      continue;
    }
    out[i] = Decision::ack(Reason::kProcessed);
    commits.push_back(commit_request(*m.id, fps[i], Outcome::kProcessed, storable_result(runs[i], out[i]), &g));
    commit_index.push_back(i);
    pending_keys.insert(key);
    p.record.revision += 1;
    if (g.version) p.record.version = *g.version;
    if (!g.to.empty()) p.record.state = std::string(g.to);
  }
  flush();
  for (std::string_view key : drain_keys) drain(key, h);
  for (std::size_t i = 0; i < ms.size(); ++i) {
    if (!finished[i]) finish(ms[i], out[i], handler_start[i]);
  }
  for (std::size_t i : repeats) out[i] = process(ms[i], h, i);
  return out;
}

}  // namespace idem::detail

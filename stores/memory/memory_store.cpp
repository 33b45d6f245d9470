#include "idem/memory_store.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "idem/backend/request_checks.hpp"
#include "memory_entities.hpp"
#include "record_table.hpp"
#include "shard_lock.hpp"

namespace idem {
namespace {

using memory_detail::Entities;
using memory_detail::Record;
using memory_detail::RecordTable;
using memory_detail::same_bytes;

// True iff the record still says something at `now` (else it counts as absent): a
// lease that has not expired, or a retry count / done record before expires_ms.
bool live(const Record& r, std::int64_t now) {
  if (r.state == RecordState::kInProgress) return r.lease_until_ms > now || (r.retries > 0 && r.expires_ms > now);
  return r.expires_ms > now;
}

bool done(const Record& r, std::int64_t now) {
  return (r.state == RecordState::kCompleted || r.state == RecordState::kDeadLettered) && r.expires_ms > now;
}

bool leased(const Record& r, std::int64_t now) { return r.state == RecordState::kInProgress && r.lease_until_ms > now; }

// An id and its hash tag (memory_detail::tag_of), computed once per request.
struct Key {
  std::string_view id;
  std::uint32_t tag;    // the low 32 bits of the id's hash (never 0)
  std::uint32_t upper;  // the high 32 bits: they choose the shard
};

// One lock stripe. Records leave table_ only from its front (oldest first). A record
// that stops being live stays in place (and is reused by the next claim or commit of
// its id) until purge or eviction reaches it.
class Shard {
 public:
  static constexpr std::size_t kLiveRun = 8;  // live records in a row that end a purge walk

  explicit Shard(std::size_t cap) : cap_(cap), table_(cap) {}

  // The lock that guards this shard (claim_locked, commit_locked).
  std::unique_lock<memory_detail::ShardLock> lock() { return std::unique_lock<memory_detail::ShardLock>(mu_); }

  // Starts loading k's index slot into the cache, so that claim_locked or
  // commit_locked of k finds it there. REQUIRES: the lock held.
  void prefetch_locked(Key k) const { table_.prefetch(k.tag); }

  // Sets c (default-constructed) to q's answer. With q.entity_key, a granted claim reads
  // the key's record from `entities` under the key's stripe lock. REQUIRES: the lock held.
  void claim_locked(const ClaimRequest& q, Key k, Entities& entities, ClaimResult& c) {
    const std::int64_t now = to_unix_ms(q.now);
    Record* r = table_.find(k.id, k.tag);
    if (r == nullptr) {
      r = &insert(k, now);
    } else {
      if (!live(*r, now)) {
        *r = Record{};
      } else if (done(*r, now)) {
        std::optional<std::string_view> result;
        if (r->result) result = *r->result;
        const HeldRecord held{r->fingerprint, result, r->state == RecordState::kDeadLettered};
        c = *answer_held(q, now, &held, nullptr);
        return;
      } else if (leased(*r, now)) {
        const HeldLease held{r->fingerprint, owners_[r->owner], r->lease_until_ms};
        c = *answer_held(q, now, nullptr, &held);
        return;
      }
    }
    // Absent, pending (a live retry count) or an expired lease over one: take it.
    r->state = RecordState::kInProgress;
    r->owner = owner_id(q.owner);
    r->lease_until_ms = now + q.lease.count();
    r->fingerprint = q.fingerprint;
    r->result.reset();
    c.retries = r->retries;
    if (q.entity_key) {
      auto held = entities.lock(*q.entity_key);
      c.entity = entities.read_locked(*q.entity_key);
    }
  }

  // With q.entity, the entity write is checked and applied under this shard's lock and
  // the key's stripe lock together: all of it lands, or nothing does.
  // REQUIRES: the lock held.
  Status commit_locked(const CommitRequest& q, Key k, Entities& entities) {
    const std::int64_t now = to_unix_ms(q.now);
    Record* found = table_.find(k.id, k.tag);
    if (found != nullptr) {
      const Record& existing = *found;
      if (done(existing, now)) return failed_precondition("id is already completed");
      if (leased(existing, now) && !same_bytes(owners_[existing.owner], q.owner))
        return failed_precondition("lease is held by " + owners_[existing.owner]);
    }
    std::unique_lock<std::mutex> entity_lock;
    if (q.entity) {
      entity_lock = entities.lock(q.entity->key);
      if (Status s = entities.check_locked(*q.entity); !s.ok()) return s;
    }
    Record* r = found == nullptr ? &insert(k, now) : found;
    r->state = q.outcome == Outcome::kDeadLettered ? RecordState::kDeadLettered : RecordState::kCompleted;
    r->owner = 0;
    r->retries = 0;
    r->lease_until_ms = 0;
    r->expires_ms = now + q.ttl.count();
    r->fingerprint = q.fingerprint;
    if (q.result) {
      r->result = std::make_unique<std::string>(*q.result);
    } else {
      r->result.reset();
    }
    if (q.entity) entities.apply_locked(*q.entity);
    return ok_status();
  }

  std::uint32_t release(const ReleaseRequest& q, Key k) {
    const std::int64_t now = to_unix_ms(q.now);
    std::lock_guard lock(mu_);
    Record* found = table_.find(k.id, k.tag);
    if (found == nullptr) {
      if (!q.count_retry) return 0;
      Record& fresh = insert(k, now);
      fresh.expires_ms = now + q.retry_ttl.count();
      fresh.retries = 1;
      return 1;
    }
    Record& r = *found;
    if (done(r, now)) return r.retries;
    if (!live(r, now) || r.state == RecordState::kCompleted || r.state == RecordState::kDeadLettered) {
      r = Record{};  // an expired record counts as absent: start over
    }
    // Another owner's live lease: not ours to give up or to count against.
    if (leased(r, now) && !same_bytes(owners_[r.owner], q.owner)) return r.retries;
    if (r.expires_ms <= now) r.retries = 0;  // the retry count expired
    if (r.state == RecordState::kInProgress) {
      r.state = RecordState::kPending;
      r.owner = 0;
    }
    if (q.count_retry) {
      ++r.retries;
      r.expires_ms = now + q.retry_ttl.count();
    }
    return r.retries;
  }

  Status extend(const ExtendRequest& q, Key k) {
    const std::int64_t now = to_unix_ms(q.now);
    std::lock_guard lock(mu_);
    Record* found = table_.find(k.id, k.tag);
    if (found == nullptr || found->state != RecordState::kInProgress || !same_bytes(owners_[found->owner], q.owner))
      return failed_precondition("the lease is not held by this owner");
    Record& r = *found;
    if (!leased(r, now)) return failed_precondition("the lease expired");
    r.lease_until_ms = now + q.lease.count();
    return ok_status();
  }

  std::optional<RecordInfo> inspect(Key k, TimePoint t) {
    const std::int64_t now = to_unix_ms(t);
    std::lock_guard lock(mu_);
    const Record* found = table_.find(k.id, k.tag);
    if (found == nullptr) return std::nullopt;
    const Record& r = *found;
    if (!live(r, now)) return std::nullopt;
    RecordInfo info;
    info.state = leased(r, now)                        ? RecordState::kInProgress
                 : r.state == RecordState::kInProgress ? RecordState::kPending
                                                       : r.state;
    if (info.state == RecordState::kInProgress) {
      info.owner = owners_[r.owner];
      info.lease_until = from_unix_ms(r.lease_until_ms);
    }
    info.fingerprint = r.fingerprint;
    if (r.result) info.result = *r.result;
    info.retries = r.retries;
    info.expires_at = from_unix_ms(r.expires_ms);
    return info;
  }

  // Adds this shard's records to `counts`, each by the state inspect() reports.
  void count(std::int64_t now, RecordCounts& counts) {
    std::lock_guard lock(mu_);
    table_.for_each([&](const Record& r) {
      if (!live(r, now))
        ++counts.expired;
      else if (leased(r, now))
        ++counts.in_progress;
      else if (r.state == RecordState::kCompleted)
        ++counts.completed;
      else if (r.state == RecordState::kDeadLettered)
        ++counts.dead_lettered;
      else
        ++counts.pending;
    });
  }

  // Makes id's record absent (it stays in place, not live, until purge or eviction
  // reaches it, as an expired one does). Returns true iff it was live.
  bool remove(Key k, std::int64_t now) {
    std::lock_guard lock(mu_);
    Record* found = table_.find(k.id, k.tag);
    if (found == nullptr) return false;
    const bool was_live = live(*found, now);
    *found = Record{};
    return was_live;
  }

  // Removes up to `max` records that are not live, examining at most `budget` entries;
  // `live_run` carries the count of live records met in a row across calls (see
  // purge_locked).
  std::size_t purge(std::int64_t now, std::size_t max, std::size_t budget, std::size_t& live_run) {
    std::lock_guard lock(mu_);
    return purge_locked(now, max, budget, live_run);
  }

 private:
  // Walks table_ from the front: a record that is not live is erased; a live one is
  // moved to the back, so that one long-lived record cannot shield expired ones behind
  // it. Stops after `max` removals, `budget` entries, one lap, or kLiveRun live
  // records in a row (with uniform TTLs the front is the oldest, so a run of live
  // records means little has expired: the common case costs O(kLiveRun)). live_run:
  // live records met in a row before this walk, updated. REQUIRES: mu_ held.
  std::size_t purge_locked(std::int64_t now, std::size_t max, std::size_t budget, std::size_t& live_run) {
    std::size_t removed = 0;
    budget = std::min(budget, table_.size());
    while (removed < max && budget-- > 0 && live_run < kLiveRun) {
      if (live(table_.front().record, now)) {
        table_.rotate_front();
        ++live_run;
        continue;
      }
      live_run = 0;
      table_.pop_front();
      ++removed;
    }
    return removed;
  }

  // REQUIRES: mu_ held, id absent. Returns the new, empty record.
  Record& insert(Key k, std::int64_t now) {
    if (table_.size() >= cap_) evict(now);
    return table_.push_back(k.id, k.tag);
  }

  // Makes room for one record: drops a record that is no longer live if a short walk
  // finds one, else the record at the front (the oldest, which is then forgotten).
  void evict(std::int64_t now) {
    std::size_t live_run = 0;
    if (purge_locked(now, 1, kEvictScan, live_run) > 0) return;
    table_.pop_front();
  }

  // Owners are few (one per consumer): they are interned, so a claim copies no string.
  std::uint32_t owner_id(std::string_view owner) {
    for (std::uint32_t i = 0; i < owners_.size(); ++i)
      if (same_bytes(owners_[i], owner)) return i;
    owners_.emplace_back(owner);
    return static_cast<std::uint32_t>(owners_.size() - 1);
  }

  static constexpr std::size_t kEvictScan = 32;  // entries an eviction examines first

  memory_detail::ShardLock mu_;
  std::size_t cap_;
  RecordTable table_;
  std::vector<std::string> owners_{std::string()};
};

class MemoryStore final : public Store, public EntityStore, public StoreAdmin {
 public:
  explicit MemoryStore(const memory::Options& o) : entities_(o.shards) {
    const std::size_t per = (o.max_records + o.shards - 1) / o.shards;
    shards_.reserve(o.shards);
    for (std::size_t i = 0; i < o.shards; ++i) shards_.push_back(std::make_unique<Shard>(per));
  }

  StoreCapabilities capabilities() const override {
    StoreCapabilities c;
    c.entity_chains = true;  // the default commit_batch
    c.in_process = true;
    return c;
  }
  EntityStore* entities() override { return this; }
  StoreAdmin* admin() override { return this; }

  StatusOr<ClaimResult> claim(const ClaimRequest& q) override {
    StatusOr<ClaimResult> r{ClaimResult{}};
    if (Status s = check_claim(q); !s.ok()) {
      r = std::move(s);
    } else {
      const Key k = key(q.id);
      Shard& sh = shard(k);
      auto held = sh.lock();
      sh.claim_locked(q, k, entities_, *r);
    }
    return r;
  }
  Status commit(const CommitRequest& q) override {
    if (Status s = check_commit(q); !s.ok()) return s;
    const Key k = key(q.id);
    Shard& sh = shard(k);
    auto held = sh.lock();
    return sh.commit_locked(q, k, entities_);
  }

  // Each shard's requests under one hold of its lock, their index slots fetched ahead
  // (the answers of one call per request: requests of one id share a shard and keep
  // their order). Requests with an entity key take the loop, in input order.
  std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> qs) override {
    std::vector<StatusOr<ClaimResult>> out(qs.size(), StatusOr<ClaimResult>(ClaimResult{}));
    for (std::size_t i = 0; i < qs.size(); ++i) {
      if (Status s = check_claim(qs[i]); !s.ok()) out[i] = std::move(s);
    }
    const bool any_entity = std::any_of(qs.begin(), qs.end(), [](const ClaimRequest& q) { return q.entity_key; });
    if (any_entity) {
      for (std::size_t i = 0; i < qs.size(); ++i) {
        if (!out[i].ok()) continue;
        const Key k = key(qs[i].id);
        auto held = shard(k).lock();
        shard(k).claim_locked(qs[i], k, entities_, *out[i]);
      }
      return out;
    }
    by_shard(
        qs, [&](std::size_t i) { return out[i].ok(); },
        [&](Shard& sh, std::size_t i, Key k) { sh.claim_locked(qs[i], k, entities_, *out[i]); });
    return out;
  }

  // As claim_batch; batches with an entity write or outbox entries take the default
  // (its entity chains need the input order across shards).
  std::vector<Status> commit_batch(std::span<const CommitRequest> qs) override {
    if (!reorderable(qs)) return Store::commit_batch(qs);
    std::vector<Status> out(qs.size());
    for (std::size_t i = 0; i < qs.size(); ++i) out[i] = check_commit(qs[i]);
    by_shard(
        qs, [&](std::size_t i) { return out[i].ok(); },
        [&](Shard& sh, std::size_t i, Key k) { out[i] = sh.commit_locked(qs[i], k, entities_); });
    return out;
  }
  StatusOr<std::uint32_t> release(const ReleaseRequest& q) override {
    if (Status s = check_release(q); !s.ok()) return s;
    const Key k = key(q.id);
    return shard(k).release(q, k);
  }
  Status extend(const ExtendRequest& q) override {
    if (Status s = check_extend(q); !s.ok()) return s;
    const Key k = key(q.id);
    return shard(k).extend(q, k);
  }
  StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint now) override {
    const Key k = key(id);
    return shard(k).inspect(k, now);
  }
  // The walk's budget is shared by the shards: O(max_records) work in all. So is its
  // run of live records: the walk ends once Shard::kLiveRun live records in a row were
  // met, in one shard or across several, so that purging a store where nothing has
  // expired costs O(kLiveRun), not that per shard. Each call starts one shard further
  // on, so that every shard's front is reached.
  StatusOr<std::size_t> purge_expired(TimePoint now, std::size_t max_records) override {
    const std::size_t budget = (kScanFactor * max_records + kScanMin) / shards_.size() + 1;
    const std::size_t n = shards_.size();
    const std::size_t first = purge_start_.fetch_add(1, std::memory_order_relaxed) % n;
    std::size_t removed = 0, live_run = 0;
    for (std::size_t k = 0; k < n && removed < max_records && live_run < Shard::kLiveRun; ++k)
      removed += shards_[(first + k) % n]->purge(to_unix_ms(now), max_records - removed, budget, live_run);
    return removed;
  }

  StatusOr<RecordCounts> count_records(TimePoint now) override {
    RecordCounts counts;
    for (auto& s : shards_) s->count(to_unix_ms(now), counts);
    return counts;
  }
  StatusOr<bool> remove_record(std::string_view id, TimePoint now) override {
    if (id.empty()) return invalid_argument("remove_record: empty id");
    const Key k = key(id);
    return shard(k).remove(k, to_unix_ms(now));
  }
  StatusOr<bool> remove_entity(std::string_view key) override {
    if (key.empty()) return invalid_argument("remove_entity: empty key");
    return entities_.erase(key);
  }

  StatusOr<EntityRecord> read_entity(std::string_view key) override {
    if (Status s = check_entity_key(key, "read_entity"); !s.ok()) return s;
    return entities_.read(key);
  }
  Status write_entity(const EntityWrite& w) override {
    if (Status s = check_entity_write(w, "write_entity"); !s.ok()) return s;
    return entities_.write(w);
  }
  Status buffer_put(const BufferPut& p) override { return entities_.put(p); }
  StatusOr<std::vector<BufferEntry>> buffer_read(std::string_view key, std::size_t max) override {
    return entities_.read_buffer(key, max);
  }
  Status buffer_remove(std::string_view key, std::uint64_t version) override {
    entities_.remove(key, version);
    return ok_status();
  }
  StatusOr<BufferSummary> buffer_summary(std::size_t max_keys) override { return entities_.summary(max_keys); }

 private:
  static constexpr std::size_t kScanFactor = 4;  // entries examined per record to remove
  static constexpr std::size_t kScanMin = 64;    // and at least this many

  // One hash per request: its low 32 bits are the tag (the slot in the shard's index),
  // its high bits choose the shard, so that the two are independent.
  static Key key(std::string_view id) {
    const std::uint64_t h = memory_detail::hash_id(id);
    return {id, memory_detail::tag_of(h), static_cast<std::uint32_t>(h >> 32)};
  }
  std::size_t shard_of(Key k) const { return k.upper % shards_.size(); }
  Shard& shard(Key k) const { return *shards_[shard_of(k)]; }

  // Calls run(shard, i, key of request i) for every request i with wanted(i), grouped by
  // shard (each shard locked once) and in input order within a shard, each request's
  // index slot fetched kPrefetchAhead requests before its turn.
  template <class Request, class Wanted, class F>
  void by_shard(std::span<const Request> qs, Wanted&& wanted, F&& run) {
    std::vector<Key> keys(qs.size());
    std::vector<std::uint32_t> start(shards_.size() + 1, 0);  // counting sort by shard
    for (std::size_t i = 0; i < qs.size(); ++i) {
      keys[i] = key(qs[i].id);
      if (wanted(i)) ++start[shard_of(keys[i]) + 1];
    }
    for (std::size_t s = 0; s < shards_.size(); ++s) start[s + 1] += start[s];
    std::vector<std::uint32_t> order(start.back());
    std::vector<std::uint32_t> fill(start.begin(), start.end() - 1);
    for (std::size_t i = 0; i < qs.size(); ++i)
      if (wanted(i)) order[fill[shard_of(keys[i])]++] = static_cast<std::uint32_t>(i);
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      if (start[s] == start[s + 1]) continue;
      Shard& sh = *shards_[s];
      auto held = sh.lock();
      const std::uint32_t end = start[s + 1];
      for (std::uint32_t j = start[s]; j < end && j < start[s] + kPrefetchAhead; ++j)
        sh.prefetch_locked(keys[order[j]]);
      for (std::uint32_t j = start[s]; j < end; ++j) {
        if (j + kPrefetchAhead < end) sh.prefetch_locked(keys[order[j + kPrefetchAhead]]);
        run(sh, order[j], keys[order[j]]);
      }
    }
  }
  static constexpr std::uint32_t kPrefetchAhead = 8;  // index slots in flight in a batch

  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<std::size_t> purge_start_{0};  // the next purge_expired's first shard
  Entities entities_;                        // locked after an id shard, never before
};

}  // namespace

namespace memory {

StatusOr<std::shared_ptr<Store>> open(const Options& options) {
  if (options.max_records == 0) return invalid_argument("memory store: max_records must be > 0");
  if (options.shards == 0) return invalid_argument("memory store: shards must be > 0");
  Options o = options;
  if (o.shards > o.max_records) o.shards = o.max_records;
  return std::shared_ptr<Store>(std::make_shared<MemoryStore>(o));
}

StatusOr<std::shared_ptr<Store>> open(const StoreUri& u) {
  if (u.scheme != "memory") return invalid_argument("memory URI: scheme must be memory:, got \"" + u.scheme + ":\"");
  if (Status s = u.check_params({"max_records", "shards"}); !s.ok()) return s;
  if (!u.body.empty()) return invalid_argument("memory: takes no path, got \"" + u.body + "\"");
  Options o;
  auto max = u.param_uint("max_records", o.max_records);
  auto shards = u.param_uint("shards", o.shards);
  if (!max.ok()) return max.status();
  if (!shards.ok()) return shards.status();
  o.max_records = *max;
  o.shards = *shards;
  return open(o);
}

}  // namespace memory
}  // namespace idem

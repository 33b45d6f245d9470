// Claims, commits, releases and batches of the RocksDB store.
#include <rocksdb/iterator.h>

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include "rocksdb_store_impl.hpp"

namespace idem::rocksdb::detail {

bool ExpiryFilter::Filter(int, const ::rocksdb::Slice&, const ::rocksdb::Slice& value, std::string*, bool*) const {
  const auto expires = expiry_of(std::string_view(value.data(), value.size()));
  if (!expires || *expires > watermark_ms.load(std::memory_order_relaxed)) return false;
  dropped.fetch_add(1, std::memory_order_relaxed);
  return true;
}

Status to_status(const ::rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return ok_status();
  const std::string m = "rocksdb: " + what + ": " + s.ToString();
  if (s.IsCorruption()) return data_loss(m);
  if (s.IsInvalidArgument() || s.IsNotSupported()) return invalid_argument(m);
  if (s.IsIOError() || s.IsBusy() || s.IsTimedOut() || s.IsTryAgain() || s.IsIncomplete() || s.IsAborted())
    return unavailable(m);
  return internal_error(m);
}

RocksStore::~RocksStore() {
  if (!db_) return;
  for (auto* h : handles) (void)db_->DestroyColumnFamilyHandle(h);
  (void)db_->Close();
  db_.reset();
}

StoreCapabilities RocksStore::capabilities() const {
  StoreCapabilities c;
  c.durable = true;
  c.shared = false;
  c.probabilistic = false;
  c.transactional = true;
  c.native_ttl = true;
  c.entity_chains = true;
  return c;
}

void RocksStore::observe(std::int64_t now_ms) {
  auto& w = filter->watermark_ms;
  std::int64_t cur = w.load(std::memory_order_relaxed);
  while (now_ms > cur && !w.compare_exchange_weak(cur, now_ms, std::memory_order_relaxed)) {
  }
}

Status RocksStore::read(std::string_view id, Lookup& out, bool want_done, std::optional<std::string_view> entity_key) {
  const ::rocksdb::Slice key(id.data(), id.size());
  if (entity_key) {
    // One MultiGet over the column families: the entity is read in the same step.
    ::rocksdb::ColumnFamilyHandle* cfs[3];
    ::rocksdb::Slice keys[3];
    std::size_t n = 0, done_at = 3, retries_at = 3;
    if (want_done) {
      done_at = n;
      cfs[n] = done_cf_;
      keys[n++] = key;
    }
    if (retries_possible.load(std::memory_order_relaxed)) {
      retries_at = n;
      cfs[n] = retries_cf_;
      keys[n++] = key;
    }
    const std::size_t entity_at = n;
    cfs[n] = entities_cf_;
    keys[n++] = ::rocksdb::Slice(entity_key->data(), entity_key->size());
    ::rocksdb::PinnableSlice values[3];
    ::rocksdb::Status st[3];
    db_->MultiGet(::rocksdb::ReadOptions(), n, cfs, keys, values, st);
    for (std::size_t i = 0; i < n; ++i) {
      if (st[i].IsNotFound()) continue;
      if (!st[i].ok()) return to_status(st[i], "read");
      const std::string_view v(values[i].data(), values[i].size());
      if (i == done_at) {
        out.done = decode_done(v);
        if (!out.done) return data_loss("rocksdb: the idem_done record of an id has an unknown format");
      } else if (i == retries_at) {
        out.retries = decode_retries(v);
        if (!out.retries) return data_loss("rocksdb: the idem_retries record of an id has an unknown format");
      } else if (i == entity_at) {
        auto e = decode_entity(v);
        if (!e) return data_loss("rocksdb: the idem_entities record of a key has an unknown format");
        out.entity = std::move(*e);
      }
    }
    return ok_status();
  }
  ::rocksdb::PinnableSlice v;
  if (want_done) {
    auto s = db_->Get(::rocksdb::ReadOptions(), done_cf_, key, &v);
    if (s.ok()) {
      out.done = decode_done(std::string_view(v.data(), v.size()));
      if (!out.done) return data_loss("rocksdb: the idem_done record of an id has an unknown format");
    } else if (!s.IsNotFound()) {
      return to_status(s, "read idem_done");
    }
  }
  if (!retries_possible.load(std::memory_order_relaxed)) return ok_status();
  v.Reset();
  auto s = db_->Get(::rocksdb::ReadOptions(), retries_cf_, key, &v);
  if (s.ok()) {
    out.retries = decode_retries(std::string_view(v.data(), v.size()));
    if (!out.retries) return data_loss("rocksdb: the idem_retries record of an id has an unknown format");
  } else if (!s.IsNotFound()) {
    return to_status(s, "read idem_retries");
  }
  return ok_status();
}

ClaimResult RocksStore::decide_claim(Stripe& s, const ClaimRequest& q, std::int64_t now, const Lookup& l) {
  auto it = s.leases.find(q.id);
  std::optional<HeldRecord> done;
  if (l.done && l.done->expires_ms > now)
    done.emplace(HeldRecord{l.done->fingerprint, l.done->result, l.done->kind == RecordKind::kDeadLettered});
  std::optional<HeldLease> lease;
  if (it != s.leases.end() && it->second.until_ms > now)
    lease.emplace(HeldLease{it->second.fingerprint, it->second.owner, it->second.until_ms});
  if (auto held = answer_held(q, now, done ? &*done : nullptr, lease ? &*lease : nullptr)) return std::move(*held);
  const std::uint32_t retries = l.retries && l.retries->expires_ms > now ? l.retries->retries : 0;
  s.set_lease(it, q.id, q.owner, now + q.lease.count(), q.fingerprint, l.retries.has_value());
  ClaimResult c = ClaimResult::granted(retries);
  if (q.entity_key) c.entity = l.entity;
  return c;
}

StatusOr<ClaimResult> RocksStore::claim(const ClaimRequest& q) {
  if (Status s = check_claim(q); !s.ok()) return s;
  const std::int64_t now = to_unix_ms(q.now);
  observe(now);
  Stripe& s = stripe_of(q.id);
  if (!q.entity_key) {
    std::lock_guard lock(s.mu);
    auto it = s.leases.find(q.id);
    Lookup l;
    if (it == s.leases.end() || it->second.until_ms <= now) {
      if (Status st = read(q.id, l); !st.ok()) return st;
    }
    ClaimResult c = decide_claim(s, q, now, l);
    if (Status st = note_unsent(q, c); !st.ok()) return st;
    return c;
  }
  // The entity key's stripe too: its cached record is read (or filled) under it.
  auto locks = lock_pair(q.id, *q.entity_key);
  auto it = s.leases.find(q.id);
  Lookup l;
  if (it == s.leases.end() || it->second.until_ms <= now) {
    if (const EntityRecord* cached = cached_entity(*q.entity_key)) {
      l.entity = *cached;
      if (Status st = read(q.id, l); !st.ok()) return st;
    } else {
      if (Status st = read(q.id, l, /*want_done=*/true, q.entity_key); !st.ok()) return st;
      cache_entity(*q.entity_key, l.entity);
    }
  }
  ClaimResult c = decide_claim(s, q, now, l);
  if (Status st = note_unsent(q, c); !st.ok()) return st;
  return c;
}

StatusOr<ClaimResult> RocksStore::claim_known_absent(const ClaimRequest& q) {
  if (Status s = check_claim(q); !s.ok()) return s;
  observe(to_unix_ms(q.now));
  if (!q.entity_key) {
    std::lock_guard lock(stripe_of(q.id).mu);
    return decide_absent(q);
  }
  auto locks = lock_pair(q.id, *q.entity_key);
  return decide_absent(q);
}

std::vector<StatusOr<ClaimResult>> RocksStore::claim_known_absent_batch(std::span<const ClaimRequest> requests) {
  std::vector<StatusOr<ClaimResult>> out;
  out.reserve(requests.size());
  std::vector<std::string_view> keys;
  keys.reserve(requests.size());
  for (const auto& q : requests) {
    keys.push_back(q.id);
    if (q.entity_key) keys.push_back(*q.entity_key);
    observe(to_unix_ms(q.now));
  }
  auto locks = lock_all(keys);
  for (const auto& q : requests) {
    if (Status s = check_claim(q); !s.ok()) {
      out.emplace_back(s);
    } else {
      out.push_back(decide_absent(q));
    }
  }
  return out;
}

StatusOr<ClaimResult> RocksStore::decide_absent(const ClaimRequest& q) {
  const std::int64_t now = to_unix_ms(q.now);
  Stripe& s = stripe_of(q.id);
  Lookup l;
  if (q.entity_key) {
    auto it = s.leases.find(q.id);
    if (it == s.leases.end() || it->second.until_ms <= now) {
      if (Status st = current_entity(*q.entity_key, l.entity); !st.ok()) return st;
    }
  }
  return decide_claim(s, q, now, l);
}

Status RocksStore::stage_commit(Stripe& s, Stripe::LeaseMap::iterator it, const CommitRequest& q, std::int64_t now,
                                const std::optional<DoneRecord>* pre, EntityStaging& st, ::rocksdb::WriteBatch& batch) {
  bool clear_retries = true;
  if (it != s.leases.end()) {
    const Lease& lease = it->second;
    if (lease.until_ms > now && lease.owner != q.owner)
      return failed_precondition("rocksdb: commit: the lease is held by another owner");
    clear_retries = lease.retry_record;
  } else {
    Lookup l;
    if (pre != nullptr) {
      l.done = *pre;
    } else if (Status r = read(q.id, l); !r.ok()) {
      return r;
    }
    if (l.done && l.done->expires_ms > now) return failed_precondition("rocksdb: commit: the id is already completed");
  }
  if (q.entity) {
    if (Status e = stage_entity(*q.entity, st, batch); !e.ok()) return e;
  }
  if (Status o = stage_outbox(q, batch); !o.ok()) return o;
  const auto kind = q.outcome == Outcome::kDeadLettered ? RecordKind::kDeadLettered : RecordKind::kCompleted;
  const ::rocksdb::Slice key(q.id.data(), q.id.size());
  auto s1 = batch.Put(done_cf_, key, encode_done(kind, now + q.ttl.count(), q.fingerprint, q.result));
  if (!s1.ok()) return to_status(s1, "stage commit");
  if (clear_retries && retries_possible.load(std::memory_order_relaxed)) {
    auto s2 = batch.Delete(retries_cf_, key);
    if (!s2.ok()) return to_status(s2, "stage commit");
  }
  return ok_status();
}

Status RocksStore::write(::rocksdb::WriteBatch& batch) {
  if (options.fault_hook) {
    if (Status f = options.fault_hook(kCommitPoint); !f.ok()) return f;
  }
  return to_status(db_->Write(write_options, &batch), "commit");
}

Status RocksStore::commit_into(::rocksdb::WriteBatch& batch, const CommitRequest& q) {
  if (Status st = check_commit(q); !st.ok()) return st;
  if (q.entity) {
    if (Status st = check_entity_write_fits(*q.entity, "commit"); !st.ok()) return st;
  }
  const std::int64_t now = to_unix_ms(q.now);
  observe(now);
  Stripe& s = stripe_of(q.id);
  // The entity's compare-and-set is safe because every writer of an entity record
  // holds the key's stripe lock from its read to its write (see stage_entity).
  auto locks = lock_pair(q.id, q.entity ? q.entity->key : q.id);
  EntityStaging st;
  const auto lease = s.leases.find(q.id);
  if (Status e = stage_commit(s, lease, q, now, nullptr, st, batch); !e.ok()) return e;
  Status w = write(batch);
  land_entities(st, w.ok());
  if (!w.ok()) return w;
  if (lease != s.leases.end()) s.end_lease(lease);
  return ok_status();
}

Status RocksStore::commit(const CommitRequest& q) {
  ::rocksdb::WriteBatch batch;
  return commit_into(batch, q);
}

StatusOr<std::uint32_t> RocksStore::release(const ReleaseRequest& q) {
  if (Status s = check_release(q); !s.ok()) return s;
  const std::int64_t now = to_unix_ms(q.now);
  observe(now);
  Stripe& s = stripe_of(q.id);
  std::lock_guard lock(s.mu);
  auto it = s.leases.find(q.id);
  const bool held_by_other = it != s.leases.end() && it->second.until_ms > now && it->second.owner != q.owner;
  Lookup l;
  if (Status st = read(q.id, l, /*want_done=*/it == s.leases.end()); !st.ok()) return st;
  std::uint32_t count = l.retries && l.retries->expires_ms > now ? l.retries->retries : 0;
  if (held_by_other) return count;
  if (l.done && l.done->expires_ms > now) return std::uint32_t{0};
  if (q.count_retry) {
    ++count;
    ::rocksdb::WriteBatch batch;
    const ::rocksdb::Slice key(q.id.data(), q.id.size());
    retries_possible.store(true, std::memory_order_relaxed);
    auto p = batch.Put(retries_cf_, key, encode_retries({count, now + q.retry_ttl.count()}));
    if (!p.ok()) return to_status(p, "release");
    if (Status st = to_status(db_->Write(write_options, &batch), "release"); !st.ok()) return st;
  }
  if (it != s.leases.end()) s.end_lease(it);
  return count;
}

Status RocksStore::extend(const ExtendRequest& q) {
  if (Status s = check_extend(q); !s.ok()) return s;
  const std::int64_t now = to_unix_ms(q.now);
  observe(now);
  Stripe& s = stripe_of(q.id);
  std::lock_guard lock(s.mu);
  auto it = s.leases.find(q.id);
  if (it == s.leases.end() || it->second.owner != q.owner)
    return failed_precondition("rocksdb: extend: the lease is not held by this owner");
  if (it->second.until_ms <= now) return failed_precondition("rocksdb: extend: the lease expired");
  it->second.until_ms = now + q.lease.count();
  return ok_status();
}

StatusOr<std::optional<RecordInfo>> RocksStore::inspect(std::string_view id, TimePoint t) {
  const std::int64_t now = to_unix_ms(t);
  Stripe& s = stripe_of(id);
  std::lock_guard lock(s.mu);
  Lookup l;
  if (Status st = read(id, l); !st.ok()) return st;
  const std::uint32_t retries = l.retries && l.retries->expires_ms > now ? l.retries->retries : 0;
  auto it = s.leases.find(id);
  RecordInfo info;
  if (it != s.leases.end() && it->second.until_ms > now) {
    info.state = RecordState::kInProgress;
    info.owner = it->second.owner;
    info.lease_until = from_unix_ms(it->second.until_ms);
    info.fingerprint = it->second.fingerprint;
    info.retries = retries;
    if (l.retries) info.expires_at = from_unix_ms(l.retries->expires_ms);
    return std::optional<RecordInfo>(std::move(info));
  }
  if (l.done && l.done->expires_ms > now) {
    info.state = l.done->kind == RecordKind::kDeadLettered ? RecordState::kDeadLettered : RecordState::kCompleted;
    info.fingerprint = l.done->fingerprint;
    info.result = l.done->result;
    info.expires_at = from_unix_ms(l.done->expires_ms);
    return std::optional<RecordInfo>(std::move(info));
  }
  if (retries > 0) {
    info.state = RecordState::kPending;
    info.retries = retries;
    info.expires_at = from_unix_ms(l.retries->expires_ms);
    return std::optional<RecordInfo>(std::move(info));
  }
  return std::optional<RecordInfo>();
}

std::vector<std::unique_lock<std::mutex>> RocksStore::lock_all(const std::vector<std::string_view>& ids) {
  // Each stripe once, in index order: marked, then taken (no sort of the ids' stripes).
  std::vector<char> wanted(stripes.size(), 0);
  for (auto id : ids) wanted[stripe_index(id)] = 1;
  std::vector<std::unique_lock<std::mutex>> locks;
  for (std::size_t i = 0; i < stripes.size(); ++i) {
    if (wanted[i]) locks.emplace_back(stripes[i]->mu);
  }
  return locks;
}

std::pair<std::unique_lock<std::mutex>, std::unique_lock<std::mutex>> RocksStore::lock_pair(std::string_view a,
                                                                                            std::string_view b) {
  std::size_t i = stripe_index(a), j = stripe_index(b);
  if (i > j) std::swap(i, j);
  std::unique_lock<std::mutex> first(stripes[i]->mu);
  if (i == j) return {std::move(first), std::unique_lock<std::mutex>()};
  std::unique_lock<std::mutex> second(stripes[j]->mu);
  return {std::move(first), std::move(second)};
}

namespace {

// Reads `keys` from `cf` with one MultiGet; statuses[i] is set for failures. The keys
// go to RocksDB in key order (sorted_input): its own sort compares through the column
// family's comparator and costs several times this one (perf: 6% of a batch of new
// ids). Every idem column family orders keys bytewise, as Slice::compare does.
template <class Decode, class Out>
void multi_get(::rocksdb::DB& db, ::rocksdb::ColumnFamilyHandle* cf, const std::vector<::rocksdb::Slice>& keys,
               Decode decode, std::vector<Out>& out, std::vector<Status>& statuses, const char* what) {
  const std::size_t n = keys.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return keys[a].compare(keys[b]) < 0; });
  std::vector<::rocksdb::Slice> sorted(n);
  for (std::size_t k = 0; k < n; ++k) sorted[k] = keys[order[k]];
  std::vector<::rocksdb::PinnableSlice> values(n);
  std::vector<::rocksdb::Status> st(n);
  db.MultiGet(::rocksdb::ReadOptions(), cf, n, sorted.data(), values.data(), st.data(), /*sorted_input=*/true);
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = order[k];
    if (st[k].ok()) {
      out[i] = decode(std::string_view(values[k].data(), values[k].size()));
      if (!out[i]) statuses[i] = data_loss(std::string("rocksdb: a record in ") + what + " has an unknown format");
    } else if (!st[k].IsNotFound()) {
      statuses[i] = to_status(st[k], std::string("read ") + what);
    }
  }
}

}  // namespace

std::vector<StatusOr<ClaimResult>> RocksStore::claim_batch(std::span<const ClaimRequest> requests) {
  std::vector<StatusOr<ClaimResult>> out;
  out.reserve(requests.size());
  if (requests.empty()) return out;
  std::vector<std::string_view> ids;
  std::vector<::rocksdb::Slice> keys;
  ids.reserve(requests.size());
  keys.reserve(requests.size());
  for (const auto& q : requests) {
    ids.push_back(q.id);
    keys.emplace_back(q.id.data(), q.id.size());
    observe(to_unix_ms(q.now));
  }
  for (const auto& q : requests)
    if (q.entity_key) ids.push_back(*q.entity_key);
  auto locks = lock_all(ids);
  std::vector<Status> statuses(requests.size());
  std::vector<std::optional<DoneRecord>> dones(requests.size());
  std::vector<std::optional<RetryRecord>> rets(requests.size());
  multi_get(*db_, done_cf_, keys, decode_done, dones, statuses, kDoneCf);
  if (retries_possible.load(std::memory_order_relaxed))
    multi_get(*db_, retries_cf_, keys, decode_retries, rets, statuses, kRetriesCf);
  // The entity records of the requests that name a key: from the cache, the others
  // with one more MultiGet.
  std::vector<std::size_t> with_key;
  std::vector<::rocksdb::Slice> entity_keys;
  std::vector<std::optional<EntityRecord>> entities(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (!requests[i].entity_key) continue;
    if (const EntityRecord* cached = cached_entity(*requests[i].entity_key)) {
      entities[i] = *cached;
      continue;
    }
    with_key.push_back(i);
    entity_keys.emplace_back(requests[i].entity_key->data(), requests[i].entity_key->size());
  }
  if (!entity_keys.empty()) {
    std::vector<std::optional<EntityRecord>> got(entity_keys.size());
    std::vector<Status> st(entity_keys.size());
    multi_get(*db_, entities_cf_, entity_keys, decode_entity, got, st, kEntitiesCf);
    for (std::size_t k = 0; k < with_key.size(); ++k) {
      const std::size_t i = with_key[k];
      if (st[k].ok()) cache_entity(*requests[i].entity_key, got[k].value_or(EntityRecord{}));
      entities[i] = std::move(got[k]);
      if (statuses[i].ok()) statuses[i] = st[k];
    }
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto& q = requests[i];
    if (Status s = check_claim(q); !s.ok()) {
      out.emplace_back(s);
    } else if (!statuses[i].ok()) {
      out.emplace_back(statuses[i]);
    } else {
      Lookup l{dones[i], rets[i], entities[i].value_or(EntityRecord{})};
      ClaimResult c = decide_claim(stripe_of(q.id), q, to_unix_ms(q.now), l);
      if (Status st = note_unsent(q, c); !st.ok()) {
        out.emplace_back(st);
      } else {
        out.emplace_back(std::move(c));
      }
    }
  }
  return out;
}

std::vector<Status> RocksStore::commit_batch(std::span<const CommitRequest> requests) {
  std::vector<Status> out(requests.size());
  if (requests.empty()) return out;
  std::vector<std::string_view> ids;
  ids.reserve(requests.size());
  for (const auto& q : requests) {
    ids.push_back(q.id);
    if (q.entity) ids.push_back(q.entity->key);
    observe(to_unix_ms(q.now));
  }
  auto locks = lock_all(ids);
  // Each id's lease, looked up once: nothing adds a lease before the batch has landed,
  // so the iterators stay valid. Ids without one need their record read to know
  // whether they are completed.
  std::vector<Stripe*> stripe(requests.size());
  std::vector<Stripe::LeaseMap::iterator> lease(requests.size());
  std::vector<std::size_t> need;
  std::vector<::rocksdb::Slice> keys;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    stripe[i] = &stripe_of(requests[i].id);
    lease[i] = stripe[i]->leases.find(requests[i].id);
    if (lease[i] == stripe[i]->leases.end()) {
      need.push_back(i);
      keys.emplace_back(requests[i].id.data(), requests[i].id.size());
    }
  }
  std::vector<std::optional<DoneRecord>> pre(requests.size());
  if (!keys.empty()) {
    std::vector<std::optional<DoneRecord>> got(keys.size());
    std::vector<Status> st(keys.size());
    multi_get(*db_, done_cf_, keys, decode_done, got, st, kDoneCf);
    for (std::size_t k = 0; k < need.size(); ++k) {
      pre[need[k]] = std::move(got[k]);
      out[need[k]] = st[k];
    }
  }
  ::rocksdb::WriteBatch batch;
  EntityStaging entities;
  std::unordered_set<std::string_view> staged_unleased;  // the rest are marked in their Lease
  EntityChains chains;                                   // capabilities().entity_chains
  std::vector<std::size_t> landed;
  // By id when the batch may be reordered: RocksDB inserts a batch into the memtable's
  // skiplist searching from the previous insert's position, so in key order the
  // searches are short (perf: the search of an unsorted batch of new ids took two
  // fifths of its write).
  for (const std::size_t i : visit_order(requests, reorderable(requests))) {
    const auto& q = requests[i];
    if (Status s = chains.check(q); !s.ok()) {
      out[i] = std::move(s);
      continue;
    }
    if (out[i].ok()) out[i] = check_commit(q);
    if (out[i].ok() && q.entity) out[i] = check_entity_write_fits(*q.entity, "commit");
    if (!out[i].ok()) {
      chains.stop(q);
      continue;
    }
    const bool leased = lease[i] != stripe[i]->leases.end();
    if (leased ? lease[i]->second.staged : staged_unleased.contains(q.id)) {
      out[i] = failed_precondition("rocksdb: commit: the id is already completed (earlier in this batch)");
      chains.stop(q);
      continue;
    }
    // Entity writes of one key later in the batch compare against the earlier ones.
    out[i] = stage_commit(*stripe[i], lease[i], q, to_unix_ms(q.now), &pre[i], entities, batch);
    if (out[i].ok()) {
      if (leased) {
        lease[i]->second.staged = true;
      } else {
        staged_unleased.insert(q.id);
      }
      landed.push_back(i);
    } else {
      chains.stop(q);
    }
  }
  if (landed.empty()) return out;
  Status w = write(batch);
  land_entities(entities, w.ok());
  for (std::size_t i : landed) {
    const bool leased = lease[i] != stripe[i]->leases.end();
    if (!w.ok()) {
      out[i] = w;
      if (leased) lease[i]->second.staged = false;
      continue;
    }
    if (leased) stripe[i]->end_lease(lease[i]);
  }
  return out;
}

StatusOr<std::size_t> RocksStore::purge_expired(TimePoint now, std::size_t max_records) {
  const std::int64_t t = to_unix_ms(now);
  observe(t);
  // Records expire by compaction. Expired in-process leases are dropped here: at most
  // max_records leases are looked at, starting where the previous call stopped.
  std::size_t budget = max_records;
  for (std::size_t k = 0; k < stripes.size() && budget > 0; ++k) {
    Stripe& s = *stripes[purge_cursor_.fetch_add(1, std::memory_order_relaxed) % stripes.size()];
    std::lock_guard lock(s.mu);
    for (auto it = s.leases.begin(); it != s.leases.end() && budget > 0; --budget) {
      it = it->second.until_ms <= t ? s.end_lease(it) : std::next(it);
    }
  }
  return std::size_t{0};
}

Status RocksStore::for_each_record(const std::function<void(std::string_view, TimePoint)>& visit) {
  for (auto* cf : {done_cf_, retries_cf_}) {
    std::unique_ptr<::rocksdb::Iterator> it(db_->NewIterator(::rocksdb::ReadOptions(), cf));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const auto v = it->value();
      const auto e = expiry_of(std::string_view(v.data(), v.size()));
      visit(std::string_view(it->key().data(), it->key().size()), from_unix_ms(e.value_or(0)));
    }
    if (Status st = to_status(it->status(), "scan"); !st.ok()) return st;
  }
  return ok_status();
}

StatusOr<CompactionReport> RocksStore::compact(TimePoint now) {
  observe(to_unix_ms(now));
  ::rocksdb::CompactRangeOptions o;
  o.bottommost_level_compaction = ::rocksdb::BottommostLevelCompaction::kForce;
  for (auto* cf : {done_cf_, retries_cf_}) {
    if (Status st = to_status(db_->Flush(::rocksdb::FlushOptions(), cf), "flush"); !st.ok()) return st;
    if (Status st = to_status(db_->CompactRange(o, cf, nullptr, nullptr), "compact"); !st.ok()) return st;
  }
  return CompactionReport{filter->dropped.load()};
}

::rocksdb::ColumnFamilyHandle* RocksStore::user_cf(std::string_view name) const {
  auto it = user_cfs.find(name);
  return it == user_cfs.end() ? nullptr : it->second;
}

}  // namespace idem::rocksdb::detail


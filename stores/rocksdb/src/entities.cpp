// Entity records and the reorder buffer of the RocksDB store (idem_entities,
// idem_buffer; byte formats in entity_record.hpp).
//
// Compare-and-set: every write of an entity record (write_entity, a commit with an
// entity write, a commit_batch) reads the stored revision and writes the new record
// while it holds the lock stripe of the entity key; a commit takes that stripe and its
// id's stripe together, in index order (lock_pair/lock_all), so it cannot deadlock
// with another commit. RocksDB admits one process per database (its LOCK file), so
// these in-process locks see every writer there is. RocksDB's own transactions
// (TransactionDB or OptimisticTransactionDB) would give the same safety, but they
// add a lock manager or a conflict check to every write of every id, dedup-only
// commits included, and need a different DB type at open; the stripes are already
// held for the lease check.
//
// Because every writer holds the key's stripe, the stripe can also hold the key's
// record (Stripe::entities): filled from the database under the lock, replaced after
// a write lands, dropped after a write fails. It then never differs from the
// database, and the ordering path (claim with entity_key, commit with an entity
// write) reads no entity record from RocksDB at all.
//
// Buffer totals live in memory (BufferTotals), rebuilt at open by a scan of
// idem_buffer: buffer_put reserves its entry there before it writes, so that two
// puts cannot both pass a total limit. So do the live versions of every key that has
// buffered entries (Stripe::buffered, under the key's stripe lock, changed after each
// write of idem_buffer lands): buffer_put takes its per-key count from there, and
// buffer_read seeks straight to the key's first live version. A key's removed
// entries leave deletion markers in idem_buffer until compaction; a scan from the
// key's first possible entry would step over all of them, and a key that has had
// many versions buffered would make every read slower.
#include <rocksdb/iterator.h>

#include <algorithm>
#include <iterator>
#include <queue>

#include "rocksdb_store_impl.hpp"

namespace idem::rocksdb::detail {
namespace {

::rocksdb::Slice slice(std::string_view s) { return {s.data(), s.size()}; }
std::string_view view(const ::rocksdb::Slice& s) { return {s.data(), s.size()}; }

Status unknown_buffer_format() { return data_loss("rocksdb: an idem_buffer entry has an unknown format"); }

// An iterator over the entries of one key in idem_buffer from version `first` to
// version `last` (both included), ascending version.
class KeyScan {
 public:
  KeyScan(::rocksdb::DB& db, ::rocksdb::ColumnFamilyHandle* cf, std::string_view key, std::uint64_t first,
          std::uint64_t last)
      : start_(buffer_key(key, first)), end_(buffer_key(key, last) + '\0'), end_slice_(end_) {
    ::rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &end_slice_;
    it_.reset(db.NewIterator(ro, cf));
    it_->Seek(start_);
  }
  bool valid() const { return it_->Valid(); }
  void next() { it_->Next(); }
  std::string_view key() const { return view(it_->key()); }
  std::string_view value() const { return view(it_->value()); }
  Status status() const { return to_status(it_->status(), "scan idem_buffer"); }

 private:
  std::string start_;
  std::string end_;
  ::rocksdb::Slice end_slice_;
  std::unique_ptr<::rocksdb::Iterator> it_;
};

}  // namespace

const EntityRecord* EntityStaging::find(std::string_view key) const {
  if (records_.size() > kLinear) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &records_[it->second].second;
  }
  for (const auto& [k, r] : records_)
    if (k == key) return &r;
  return nullptr;
}

void EntityStaging::stage(std::string_view key, EntityRecord r) {
  if (records_.size() > kLinear) {
    if (auto it = index_.find(key); it != index_.end()) {
      records_[it->second].second = std::move(r);
      return;
    }
  } else {
    for (auto& [k, old] : records_) {
      if (k == key) {
        old = std::move(r);
        return;
      }
    }
  }
  records_.emplace_back(std::string(key), std::move(r));
  if (records_.size() == kLinear + 1) {
    for (std::size_t i = 0; i < records_.size(); ++i) index_.emplace(records_[i].first, i);
  } else if (records_.size() > kLinear + 1) {
    index_.emplace(records_.back().first, records_.size() - 1);
  }
}

Status check_entity_write_fits(const EntityWrite& w, const char* op) {
  if (Status s = check_entity_write(w, op); !s.ok()) return s;
  if (w.key.size() > UINT32_MAX)
    return invalid_argument(std::string("rocksdb: ") + op + ": the entity key is too long");
  return ok_status();
}

Status RocksStore::get_entity(std::string_view key, EntityRecord& out) {
  ::rocksdb::PinnableSlice v;
  auto s = db_->Get(::rocksdb::ReadOptions(), entities_cf_, slice(key), &v);
  if (s.IsNotFound()) {
    out = EntityRecord{};
    return ok_status();
  }
  if (!s.ok()) return to_status(s, "read idem_entities");
  auto r = decode_entity(std::string_view(v.data(), v.size()));
  if (!r) return data_loss("rocksdb: the idem_entities record of a key has an unknown format");
  out = std::move(*r);
  return ok_status();
}

const EntityRecord* RocksStore::cached_entity(std::string_view key) {
  if (entity_cache_per_stripe == 0) return nullptr;
  auto& cache = stripe_of(key).entities;
  auto it = cache.find(key);
  return it == cache.end() ? nullptr : &it->second;
}

void RocksStore::cache_entity(std::string_view key, const EntityRecord& r) {
  if (entity_cache_per_stripe == 0) return;
  auto& cache = stripe_of(key).entities;
  if (auto it = cache.find(key); it != cache.end()) {
    it->second = r;
    return;
  }
  if (cache.size() >= entity_cache_per_stripe) cache.erase(cache.begin());  // any one makes room
  cache.emplace(std::string(key), r);
}

Status RocksStore::current_entity(std::string_view key, EntityRecord& out) {
  if (const EntityRecord* c = cached_entity(key)) {
    out = *c;
    return ok_status();
  }
  if (Status s = get_entity(key, out); !s.ok()) return s;
  cache_entity(key, out);
  return ok_status();
}

void RocksStore::land_entities(const EntityStaging& st, bool landed) {
  for (const auto& [key, record] : st.records()) {
    if (landed) {
      cache_entity(key, record);
    } else {
      stripe_of(key).entities.erase(key);
    }
  }
  if (landed) settle(st);
}

Status RocksStore::stage_entity(const EntityWrite& w, EntityStaging& st, ::rocksdb::WriteBatch& batch) {
  EntityRecord cur;
  if (const EntityRecord* staged = st.find(w.key)) {
    cur = *staged;
  } else if (Status s = current_entity(w.key, cur); !s.ok()) {
    return s;
  }
  if (cur.revision != w.expect_revision)
    return aborted("rocksdb: the entity record's revision moved (expected " + std::to_string(w.expect_revision) +
                   ", stored " + std::to_string(cur.revision) + ")");
  EntityRecord next = std::move(cur);
  apply_entity_write(w, next);

  std::optional<std::size_t> removed_bytes;
  if (w.unbuffer) {
    if (const KeyBuffer* kb = key_buffer(w.key)) {
      auto e = kb->find(*w.unbuffer);
      if (e != kb->end() && !st.unbuffered.contains({std::string(w.key), *w.unbuffer})) removed_bytes = e->second.bytes;
    }
  }
  thread_local std::string value;  // reused: a record is encoded once per write
  encode_entity(next, value);
  if (auto s = batch.Put(entities_cf_, slice(w.key), value); !s.ok()) return to_status(s, "stage entity write");
  if (removed_bytes) {
    if (auto s = batch.Delete(buffer_cf_, buffer_key(w.key, *w.unbuffer)); !s.ok())
      return to_status(s, "stage buffer removal");
    st.unbuffered.emplace(std::string(w.key), *w.unbuffer);
    ++st.removed_count;
    st.removed_bytes += *removed_bytes;
  }
  st.stage(w.key, std::move(next));
  return ok_status();
}

KeyBuffer* RocksStore::key_buffer(std::string_view key) {
  auto& buffered = stripe_of(key).buffered;
  auto it = buffered.find(key);
  return it == buffered.end() ? nullptr : &it->second;
}

void RocksStore::settle(const EntityStaging& st) {
  if (st.removed_count == 0) return;
  for (const auto& [key, version] : st.unbuffered) {
    auto& buffered = stripe_of(key).buffered;
    auto it = buffered.find(key);
    if (it == buffered.end()) continue;
    it->second.erase(version);
    if (it->second.empty()) buffered.erase(it);
  }
  std::lock_guard lock(buffer_totals.mu);
  buffer_totals.count -= std::min(buffer_totals.count, st.removed_count);
  buffer_totals.bytes -= std::min(buffer_totals.bytes, st.removed_bytes);
}

StatusOr<EntityRecord> RocksStore::read_entity(std::string_view key) {
  std::lock_guard lock(stripe_of(key).mu);
  EntityRecord r;
  if (Status s = current_entity(key, r); !s.ok()) return s;
  return r;
}

Status RocksStore::write_entity(const EntityWrite& w) {
  if (Status s = check_entity_write_fits(w, "write_entity"); !s.ok()) return s;
  std::lock_guard lock(stripe_of(w.key).mu);
  EntityStaging st;
  ::rocksdb::WriteBatch batch;
  if (Status s = stage_entity(w, st, batch); !s.ok()) return s;
  Status s = to_status(db_->Write(write_options, &batch), "write_entity");
  land_entities(st, s.ok());
  return s;
}

namespace {

// The contract's checks (check_buffer_put), then this format's length limits.
Status check_put(const BufferPut& p) {
  if (Status s = check_buffer_put(p); !s.ok()) return s;
  if (p.key.size() > UINT32_MAX) return invalid_argument("rocksdb: buffer_put: the key is too long");
  if (p.id.size() > UINT32_MAX) return invalid_argument("rocksdb: buffer_put: the message id is too long");
  return ok_status();
}

Status other_id(std::uint64_t version) {
  return failed_precondition("rocksdb: buffer_put: version " + std::to_string(version) +
                             " of this key is buffered with another message id");
}

}  // namespace

Status RocksStore::buffer_put(const BufferPut& p) { return buffer_put_batch(std::span<const BufferPut>(&p, 1))[0]; }

// One WriteBatch for the puts that pass. The limits are reserved in BufferTotals put
// by put, in order, so each put sees the earlier ones; a failed write returns them.
std::vector<Status> RocksStore::buffer_put_batch(std::span<const BufferPut> puts) {
  std::vector<Status> out(puts.size());
  std::vector<std::string_view> keys;
  keys.reserve(puts.size());
  for (std::size_t i = 0; i < puts.size(); ++i) {
    out[i] = check_put(puts[i]);
    if (out[i].ok()) keys.push_back(puts[i].key);
  }
  if (keys.empty()) return out;
  auto locks = lock_all(keys);

  // The entries this batch writes, by (key, version): the put's index.
  std::map<std::pair<std::string_view, std::uint64_t>, std::size_t> staged;
  std::unordered_map<std::string_view, std::size_t> staged_per_key;
  std::vector<std::size_t> written;
  std::vector<std::size_t> bytes_of(puts.size(), 0);
  ::rocksdb::WriteBatch batch;
  Status w;  // a failure that keeps the whole batch from being written
  for (std::size_t i = 0; i < puts.size(); ++i) {
    if (!out[i].ok()) continue;
    if (!w.ok()) {
      out[i] = w;
      continue;
    }
    const BufferPut& p = puts[i];
    if (auto it = staged.find({p.key, p.version}); it != staged.end()) {
      if (puts[it->second].id != p.id) out[i] = other_id(p.version);
      continue;
    }
    const KeyBuffer* kb = key_buffer(p.key);
    if (kb != nullptr && kb->contains(p.version)) {
      ::rocksdb::PinnableSlice v;
      auto g = db_->Get(::rocksdb::ReadOptions(), buffer_cf_, buffer_key(p.key, p.version), &v);
      if (g.IsNotFound()) {
        out[i] = internal_error("rocksdb: buffer_put: an entry known to be buffered is missing");
      } else if (!g.ok()) {
        out[i] = to_status(g, "read idem_buffer");
      } else if (auto parts = decode_buffer_value(std::string_view(v.data(), v.size())); !parts) {
        out[i] = unknown_buffer_format();
      } else if (parts->id != p.id) {
        out[i] = other_id(p.version);
      }
      continue;
    }
    std::size_t& mine = staged_per_key[p.key];
    if ((kb == nullptr ? 0 : kb->size()) + mine >= p.limits.per_key) {
      out[i] = resource_exhausted("reorder buffer limit per_key=" + std::to_string(p.limits.per_key) +
                                  " reached for this key");
      continue;
    }
    const std::size_t bytes = p.key.size() + p.id.size() + p.message.size();
    {
      std::lock_guard t(buffer_totals.mu);
      if (buffer_totals.count >= p.limits.total) {
        out[i] = resource_exhausted("reorder buffer limit total=" + std::to_string(p.limits.total) + " reached");
        continue;
      }
      if (buffer_totals.bytes + bytes > p.limits.total_bytes) {
        out[i] = resource_exhausted("reorder buffer limit total_bytes=" + std::to_string(p.limits.total_bytes) +
                                    " reached (" + std::to_string(buffer_totals.bytes) + " bytes held, this entry " +
                                    std::to_string(bytes) + ")");
        continue;
      }
      ++buffer_totals.count;
      buffer_totals.bytes += bytes;
    }
    bytes_of[i] = bytes;
    ++mine;
    staged.emplace(std::make_pair(p.key, p.version), i);
    written.push_back(i);
    w = to_status(
        batch.Put(buffer_cf_, buffer_key(p.key, p.version), encode_buffer_value(to_unix_ms(p.now), p.id, p.message)),
        "buffer_put");
  }
  if (written.empty()) return out;
  if (w.ok() && options.fault_hook) w = options.fault_hook(kBufferPutPoint);
  if (w.ok()) w = to_status(db_->Write(write_options, &batch), "buffer_put");
  if (!w.ok()) {
    std::size_t count = 0, bytes = 0;
    for (std::size_t i : written) {
      ++count;
      bytes += bytes_of[i];
      out[i] = w;
    }
    std::lock_guard t(buffer_totals.mu);
    buffer_totals.count -= count;
    buffer_totals.bytes -= bytes;
    return out;
  }
  for (std::size_t i : written) {
    const BufferPut& p = puts[i];
    auto& buffered = stripe_of(p.key).buffered;
    auto it = buffered.find(p.key);
    if (it == buffered.end()) it = buffered.emplace(std::string(p.key), KeyBuffer{}).first;
    it->second.emplace(p.version, BufferedEntry{to_unix_ms(p.now), bytes_of[i]});
  }
  return out;
}

StatusOr<std::vector<BufferEntry>> RocksStore::buffer_read(std::string_view key, std::size_t max) {
  std::vector<BufferEntry> out;
  if (max == 0) return out;
  // Under the key's stripe lock, so that the live versions do not change during the
  // scan: it reads from the first live version to the last one it returns, stepping
  // over no deletion marker outside that range.
  std::lock_guard lock(stripe_of(key).mu);
  const KeyBuffer* kb = key_buffer(key);
  if (kb == nullptr) return out;
  const std::size_t want = std::min(max, kb->size());
  const std::uint64_t first = kb->begin()->first;
  std::uint64_t last = want == kb->size() ? kb->rbegin()->first : std::next(kb->begin(), want - 1)->first;
  out.reserve(want);
  if (want == 1) {
    // The consumer's call after every commit: one point read, cheaper than an
    // iterator. Were the entry missing, the scan below answers from the database.
    ::rocksdb::PinnableSlice value;
    auto g = db_->Get(::rocksdb::ReadOptions(), buffer_cf_, buffer_key(key, first), &value);
    if (g.ok()) {
      auto v = decode_buffer_value(std::string_view(value.data(), value.size()));
      if (!v) return unknown_buffer_format();
      out.push_back(BufferEntry{std::string(key), first, std::string(v->id), std::string(v->message),
                                from_unix_ms(v->buffered_at_ms)});
      return out;
    }
    if (!g.IsNotFound()) return to_status(g, "read idem_buffer");
    last = kb->rbegin()->first;
  }
  KeyScan scan(*db_, buffer_cf_, key, first, last);
  for (; scan.valid() && out.size() < want; scan.next()) {
    auto k = decode_buffer_key(scan.key());
    auto v = decode_buffer_value(scan.value());
    if (!k || !v) return unknown_buffer_format();
    out.push_back(BufferEntry{std::string(k->key), k->version, std::string(v->id), std::string(v->message),
                              from_unix_ms(v->buffered_at_ms)});
  }
  if (Status s = scan.status(); !s.ok()) return s;
  return out;
}

Status RocksStore::buffer_remove(std::string_view key, std::uint64_t version) {
  std::lock_guard lock(stripe_of(key).mu);
  const KeyBuffer* kb = key_buffer(key);
  if (kb == nullptr) return ok_status();
  auto e = kb->find(version);
  if (e == kb->end()) return ok_status();
  const std::size_t bytes = e->second.bytes;
  ::rocksdb::WriteBatch batch;
  auto s = batch.Delete(buffer_cf_, buffer_key(key, version));
  if (s.ok()) s = db_->Write(write_options, &batch);
  if (!s.ok()) return to_status(s, "buffer_remove");
  EntityStaging removed;
  removed.unbuffered.emplace(std::string(key), version);
  removed.removed_count = 1;
  removed.removed_bytes = bytes;
  settle(removed);
  return ok_status();
}

StatusOr<BufferSummary> RocksStore::buffer_summary(std::size_t max_keys) {
  BufferSummary out;
  {
    std::lock_guard t(buffer_totals.mu);
    out.count = buffer_totals.count;
    out.bytes = buffer_totals.bytes;
  }
  if (max_keys == 0) return out;
  // One pass over the keys in memory (Stripe::buffered), a stripe at a time. A
  // max-heap by oldest_at keeps the max_keys oldest keys seen so far.
  auto later = [](const BufferedKey& a, const BufferedKey& b) { return a.oldest_at < b.oldest_at; };
  std::priority_queue<BufferedKey, std::vector<BufferedKey>, decltype(later)> oldest(later);
  for (const auto& stripe : stripes) {
    std::lock_guard lock(stripe->mu);
    for (const auto& [key, kb] : stripe->buffered) {
      std::int64_t at_ms = std::numeric_limits<std::int64_t>::max();
      for (const auto& entry : kb) at_ms = std::min(at_ms, entry.second.buffered_at_ms);
      const TimePoint at = from_unix_ms(at_ms);
      if (oldest.size() < max_keys) {
        oldest.push(BufferedKey{key, kb.size(), kb.begin()->first, at});
      } else if (at < oldest.top().oldest_at) {
        oldest.pop();
        oldest.push(BufferedKey{key, kb.size(), kb.begin()->first, at});
      }
    }
  }
  out.keys.resize(oldest.size());
  for (std::size_t i = oldest.size(); i-- > 0;) {
    out.keys[i] = oldest.top();
    oldest.pop();
  }
  return out;
}

Status RocksStore::rebuild_buffer_totals() {
  std::size_t count = 0, bytes = 0;
  std::unique_ptr<::rocksdb::Iterator> it(db_->NewIterator(::rocksdb::ReadOptions(), buffer_cf_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    auto k = decode_buffer_key(view(it->key()));
    auto v = decode_buffer_value(view(it->value()));
    if (!k || !v) return unknown_buffer_format();
    ++count;
    bytes += entry_bytes(*k, *v);
    auto& buffered = stripe_of(k->key).buffered;
    auto at = buffered.find(k->key);
    if (at == buffered.end()) at = buffered.emplace(std::string(k->key), KeyBuffer{}).first;
    at->second.emplace_hint(at->second.end(), k->version, BufferedEntry{v->buffered_at_ms, entry_bytes(*k, *v)});
  }
  if (Status s = to_status(it->status(), "scan idem_buffer"); !s.ok()) return s;
  std::lock_guard t(buffer_totals.mu);
  buffer_totals.count = count;
  buffer_totals.bytes = bytes;
  return ok_status();
}

}  // namespace idem::rocksdb::detail

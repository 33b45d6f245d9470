// The RocksDB store's internals, shared by its source files.
#pragma once

#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "entity_record.hpp"
#include "idem/backend/request_checks.hpp"
#include "idem/rocksdb_store.hpp"
#include "record.hpp"

namespace idem::rocksdb::detail {

inline constexpr const char* kMetaCf = "idem_meta";
inline constexpr const char* kDoneCf = "idem_done";
inline constexpr const char* kRetriesCf = "idem_retries";
inline constexpr const char* kEntitiesCf = "idem_entities";
inline constexpr const char* kBufferCf = "idem_buffer";
inline constexpr const char* kOutboxCf = "idem_outbox";
inline constexpr const char* kOutboxSentCf = "idem_outbox_sent";
inline constexpr const char* kLayoutKey = "layout";
inline constexpr const char* kLayoutPrefix = "idem.rocksdb/";
inline constexpr const char* kCommitPoint = "rocksdb.commit.write";
inline constexpr const char* kBufferPutPoint = "rocksdb.buffer_put.write";
inline constexpr const char* kMarkSentPoint = "rocksdb.outbox.mark_sent.write";

// Drops records whose expiry is at or before *watermark_ms (the largest `now` the
// store has been given). Thread-safe: atomics only.
class ExpiryFilter final : public ::rocksdb::CompactionFilter {
 public:
  bool Filter(int level, const ::rocksdb::Slice& key, const ::rocksdb::Slice& value, std::string* new_value,
              bool* value_changed) const override;
  const char* Name() const override { return "idem.ExpiryFilter"; }

  std::atomic<std::int64_t> watermark_ms{std::numeric_limits<std::int64_t>::min()};
  mutable std::atomic<std::uint64_t> dropped{0};
};

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// An in-process lease. Its presence means: no commit of this id since the claim that
// created it (commits erase it).
struct Lease {
  std::string owner;
  std::int64_t until_ms = 0;
  std::optional<std::uint64_t> fingerprint;
  bool retry_record = false;  // idem_retries may hold a record of this id
  bool staged = false;        // commit_batch: a commit of this id is in the batch it builds
};

// One live entry of the reorder buffer as kept in memory: what removing it and
// summarising its key need, so that neither reads idem_buffer.
struct BufferedEntry {
  std::int64_t buffered_at_ms = 0;
  std::size_t bytes = 0;  // BufferEntry::bytes()
};

// The live entries of one key in idem_buffer, by ascending version. Never empty: a key
// whose last entry goes is erased from its Stripe::buffered.
using KeyBuffer = std::map<std::uint64_t, BufferedEntry>;

struct Stripe {
  using LeaseMap = std::unordered_map<std::string, Lease, StringHash, std::equal_to<>>;
  static constexpr std::size_t kMaxSpare = 64;  // ended lease nodes kept for reuse

  std::mutex mu;
  LeaseMap leases;
  // Nodes of ended leases, reused by the next claims: no allocation per message once
  // warm (the id and owner strings keep their capacity).
  std::vector<LeaseMap::node_type> spare;

  // Sets id's lease (replacing one that has expired), reusing a spare node if any.
  void set_lease(LeaseMap::iterator it, std::string_view id, std::string_view owner, std::int64_t until_ms,
                 std::optional<std::uint64_t> fingerprint, bool retry_record) {
    Lease* l = nullptr;
    LeaseMap::node_type node;
    if (it != leases.end()) {
      l = &it->second;
    } else if (!spare.empty()) {
      node = std::move(spare.back());
      spare.pop_back();
      node.key().assign(id);
      l = &node.mapped();
    } else {
      l = &leases.emplace(std::string(id), Lease{}).first->second;
    }
    l->owner.assign(owner);
    l->until_ms = until_ms;
    l->fingerprint = fingerprint;
    l->retry_record = retry_record;
    l->staged = false;
    if (node) leases.insert(std::move(node));
  }
  // Ends the lease at `it`, keeping its node for reuse. Returns the next iterator.
  LeaseMap::iterator end_lease(LeaseMap::iterator it) {
    auto next = std::next(it);
    LeaseMap::node_type node = leases.extract(it);
    if (spare.size() < kMaxSpare) spare.push_back(std::move(node));
    return next;
  }

  // The entity records of keys that hash here, as stored (revision 0: no record):
  // a cache of idem_entities, bounded by RocksStore::entity_cache_per_stripe. It is
  // read and changed only under `mu`, which every writer of those keys holds from
  // its compare to its write, so it never differs from the database.
  std::unordered_map<std::string, EntityRecord, StringHash, std::equal_to<>> entities;
  // The live buffer entries of the keys that hash here, exactly as idem_buffer holds
  // them (keys without entries absent): filled at open by the scan that rebuilds the
  // totals, and changed only under `mu` after a write of idem_buffer has landed. Every
  // writer of a key's entries holds `mu`, and this process is the only writer, so
  // buffer_put counts, and buffer_read finds the first live entry, without a scan
  // over the deletion markers of the key's removed entries.
  std::unordered_map<std::string, KeyBuffer, StringHash, std::equal_to<>> buffered;
};

// What the database says about one id (and, if asked, about its entity key).
struct Lookup {
  std::optional<DoneRecord> done;
  std::optional<RetryRecord> retries;
  EntityRecord entity;  // revision 0 if absent or not read
};

// The reorder buffer's totals, kept in memory so that buffer_put checks its limits
// without a scan; rebuilt by a scan of idem_buffer at open. A leaf lock: taken last,
// after any stripe lock.
struct BufferTotals {
  std::mutex mu;
  std::size_t count = 0;  // entries in idem_buffer
  std::size_t bytes = 0;  // their BufferEntry::bytes() summed
};

// The entity writes staged into one WriteBatch: later writes of the same key in the
// batch compare against earlier ones, and the removed buffer entries are subtracted
// from the totals once the batch has landed. Most batches stage one write, so the
// records are a vector, indexed by a hash map only once a batch stages many.
class EntityStaging {
 public:
  // The record staged for key, or null.
  const EntityRecord* find(std::string_view key) const;
  // Stages r as key's record (replacing an earlier one).
  void stage(std::string_view key, EntityRecord r);
  const std::vector<std::pair<std::string, EntityRecord>>& records() const { return records_; }

  // The buffer entries (key, version) this batch deletes; removed from
  // Stripe::buffered once it has landed.
  std::set<std::pair<std::string, std::uint64_t>> unbuffered;
  std::size_t removed_count = 0;
  std::size_t removed_bytes = 0;

 private:
  static constexpr std::size_t kLinear = 16;  // records searched linearly up to this many
  std::vector<std::pair<std::string, EntityRecord>> records_;
  std::unordered_map<std::string, std::size_t, StringHash, std::equal_to<>> index_;  // when > kLinear
};

class RocksStore final : public RocksDbStore, public EntityStore, public OutboxStore {
 public:
  RocksStore() = default;
  ~RocksStore() override;

  StoreCapabilities capabilities() const override;
  EntityStore* entities() override { return this; }
  OutboxStore* outbox() override { return this; }
  StatusOr<ClaimResult> claim(const ClaimRequest& request) override;
  Status commit(const CommitRequest& request) override;
  StatusOr<std::uint32_t> release(const ReleaseRequest& request) override;
  Status extend(const ExtendRequest& request) override;
  StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint now) override;
  std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> requests) override;
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) override;
  StatusOr<std::unique_ptr<StoreTransaction>> begin(TimePoint now) override;
  StatusOr<std::size_t> purge_expired(TimePoint now, std::size_t max_records) override;

  StatusOr<EntityRecord> read_entity(std::string_view key) override;
  Status write_entity(const EntityWrite& write) override;
  Status buffer_put(const BufferPut& put) override;
  std::vector<Status> buffer_put_batch(std::span<const BufferPut> puts) override;
  StatusOr<std::vector<BufferEntry>> buffer_read(std::string_view key, std::size_t max) override;
  Status buffer_remove(std::string_view key, std::uint64_t version) override;
  StatusOr<BufferSummary> buffer_summary(std::size_t max_keys) override;

  // The outbox (outbox.cpp): idem_outbox holds unsent entries, idem_outbox_sent the
  // sent ones until their expiry (the compaction filter drops them).
  StatusOr<std::vector<OutboxEntry>> outbox_pending(const OutboxQuery& q) override;
  Status outbox_mark_sent(std::span<const OutboxEntry> sent, TimePoint now, Duration ttl) override;
  // Adds q.outbox's puts to `batch`.
  Status stage_outbox(const CommitRequest& q, ::rocksdb::WriteBatch& batch);
  // Sets c.outbox_unsent when q.check_outbox, c is kCompleted and q.id has unsent
  // entries (one iterator seek); leaves other results alone.
  Status note_unsent(const ClaimRequest& q, ClaimResult& c);

  StatusOr<std::unique_ptr<StoreTransaction>> begin_observed(
      TimePoint now, std::function<void(const CommitRequest&)> before_commit) override;
  StatusOr<ClaimResult> claim_known_absent(const ClaimRequest& request) override;
  std::vector<StatusOr<ClaimResult>> claim_known_absent_batch(std::span<const ClaimRequest> requests) override;
  Status for_each_record(const std::function<void(std::string_view, TimePoint)>& visit) override;
  StatusOr<CompactionReport> compact(TimePoint now) override;

  // Commits `request` with the writes already in `batch` (transactional mode).
  Status commit_into(::rocksdb::WriteBatch& batch, const CommitRequest& request);

  // The column family a handler may write, or null.
  ::rocksdb::ColumnFamilyHandle* user_cf(std::string_view name) const;
  ::rocksdb::DB& db() { return *db_; }

  // --- set by open() ---
  Options options;
  std::shared_ptr<ExpiryFilter> filter;  // outlives db_
  std::unique_ptr<::rocksdb::DB> db_;
  std::vector<::rocksdb::ColumnFamilyHandle*> handles;
  ::rocksdb::ColumnFamilyHandle* meta_cf_ = nullptr;
  ::rocksdb::ColumnFamilyHandle* done_cf_ = nullptr;
  ::rocksdb::ColumnFamilyHandle* retries_cf_ = nullptr;
  ::rocksdb::ColumnFamilyHandle* entities_cf_ = nullptr;
  ::rocksdb::ColumnFamilyHandle* buffer_cf_ = nullptr;
  ::rocksdb::ColumnFamilyHandle* outbox_cf_ = nullptr;
  ::rocksdb::ColumnFamilyHandle* outbox_sent_cf_ = nullptr;
  std::map<std::string, ::rocksdb::ColumnFamilyHandle*, std::less<>> user_cfs;
  std::vector<std::unique_ptr<Stripe>> stripes;
  std::size_t entity_cache_per_stripe = 0;  // bound of Stripe::entities; 0: no cache
  // False while idem_retries is known to be empty: claims then skip reading it.
  std::atomic<bool> retries_possible{true};
  ::rocksdb::WriteOptions write_options;
  BufferTotals buffer_totals;

  // Sums the entries of idem_buffer into buffer_totals and fills Stripe::buffered
  // (open() calls it once). REQUIRES: the stripes exist; the store is not yet shared.
  Status rebuild_buffer_totals();

 private:
  std::atomic<std::size_t> purge_cursor_{0};  // the stripe purge_expired starts at
  std::size_t stripe_index(std::string_view id) const { return StringHash{}(id) % stripes.size(); }
  Stripe& stripe_of(std::string_view id) { return *stripes[stripe_index(id)]; }
  void observe(std::int64_t now_ms);
  // Reads id's records and, if entity_key is set, that key's entity record, in one
  // MultiGet.
  Status read(std::string_view id, Lookup& out, bool want_done = true,
              std::optional<std::string_view> entity_key = std::nullopt);
  // Reads the entity record of key from the database into out (revision 0 if absent).
  Status get_entity(std::string_view key, EntityRecord& out);
  // The cached record of key, or null. REQUIRES: key's stripe is locked.
  const EntityRecord* cached_entity(std::string_view key);
  // Caches r as key's record. REQUIRES: key's stripe is locked and r is what the
  // database holds (or will hold once the caller's write lands).
  void cache_entity(std::string_view key, const EntityRecord& r);
  // The record of key, from the cache or else the database (then cached).
  // REQUIRES: key's stripe is locked.
  Status current_entity(std::string_view key, EntityRecord& out);
  // After the write of a batch that staged `st`: if it landed, caches the staged
  // records and settles the buffer totals; if not, forgets the staged keys' cache
  // entries. REQUIRES: the stripes of the staged keys are still locked.
  void land_entities(const EntityStaging& st, bool landed);
  // Checks `w` against the stored record (or the one staged earlier in `st`) and adds
  // the entity write and the buffer deletion to `batch`. Adds nothing on failure:
  // kAborted if the revision moved. REQUIRES: the key's stripe is locked.
  Status stage_entity(const EntityWrite& w, EntityStaging& st, ::rocksdb::WriteBatch& batch);
  // Forgets the buffer entries a landed batch removed (Stripe::buffered) and
  // subtracts them from buffer_totals. REQUIRES: the stripes of their keys are locked.
  void settle(const EntityStaging& st);
  // The live buffer entries of key, or null if it has none. REQUIRES: key's stripe is
  // locked.
  KeyBuffer* key_buffer(std::string_view key);
  ClaimResult decide_claim(Stripe& s, const ClaimRequest& q, std::int64_t now, const Lookup& l);
  // claim_known_absent's decision. REQUIRES: the stripes of q.id and of q.entity_key (if
  // set) are locked.
  StatusOr<ClaimResult> decide_absent(const ClaimRequest& q);
  // Checks `q` against its lease (`lease`: s.leases.find(q.id)) and the looked-up
  // record (read if `pre` is null), stages q.entity (if set) into `st`, and adds its
  // writes to `batch`; adds nothing if a check fails. REQUIRES: the stripes of the id
  // and of q.entity->key are locked.
  Status stage_commit(Stripe& s, Stripe::LeaseMap::iterator lease, const CommitRequest& q, std::int64_t now,
                      const std::optional<DoneRecord>* pre, EntityStaging& st, ::rocksdb::WriteBatch& batch);
  Status write(::rocksdb::WriteBatch& batch);
  // Locks the stripes of `ids` in index order.
  std::vector<std::unique_lock<std::mutex>> lock_all(const std::vector<std::string_view>& ids);
  // Locks the stripes of a and b (one lock if they share one) in index order.
  std::pair<std::unique_lock<std::mutex>, std::unique_lock<std::mutex>> lock_pair(std::string_view a,
                                                                                  std::string_view b);
};

// Maps a RocksDB status to idem's, prefixed with `what`.
Status to_status(const ::rocksdb::Status& s, const std::string& what);

// kInvalidArgument if `w` breaks a REQUIRES of EntityWrite (idem::check_entity_write)
// or its key is longer than this format encodes.
Status check_entity_write_fits(const EntityWrite& w, const char* op);

}  // namespace idem::rocksdb::detail

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
#include <string>
#include <unordered_map>
#include <vector>

#include "idem/rocksdb_store.hpp"
#include "record.hpp"

namespace idem::rocksdb::detail {

inline constexpr const char* kMetaCf = "idem_meta";
inline constexpr const char* kDoneCf = "idem_done";
inline constexpr const char* kRetriesCf = "idem_retries";
inline constexpr const char* kLayoutKey = "layout";
inline constexpr const char* kLayoutPrefix = "idem.rocksdb/";
inline constexpr const char* kCommitPoint = "rocksdb.commit.write";

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
};

struct Stripe {
  std::mutex mu;
  std::unordered_map<std::string, Lease, StringHash, std::equal_to<>> leases;
};

// What the database says about one id.
struct Lookup {
  std::optional<DoneRecord> done;
  std::optional<RetryRecord> retries;
};

class RocksStore final : public Store {
 public:
  RocksStore() = default;
  ~RocksStore() override;

  StoreCapabilities capabilities() const override;
  StatusOr<ClaimResult> claim(const ClaimRequest& request) override;
  Status commit(const CommitRequest& request) override;
  StatusOr<std::uint32_t> release(const ReleaseRequest& request) override;
  Status extend(const ExtendRequest& request) override;
  StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint now) override;
  std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> requests) override;
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) override;
  StatusOr<std::unique_ptr<StoreTransaction>> begin(TimePoint now) override;
  StatusOr<std::size_t> purge_expired(TimePoint now, std::size_t max_records) override;

  StatusOr<std::unique_ptr<StoreTransaction>> begin_with(TimePoint now,
                                                         std::function<void(const CommitRequest&)> before_commit);
  StatusOr<ClaimResult> claim_absent(const ClaimRequest& request);
  Status for_each(const std::function<void(std::string_view, TimePoint)>& visit);
  StatusOr<CompactionReport> compact(TimePoint now);

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
  std::map<std::string, ::rocksdb::ColumnFamilyHandle*, std::less<>> user_cfs;
  std::vector<std::unique_ptr<Stripe>> stripes;
  // False while idem_retries is known to be empty: claims then skip reading it.
  std::atomic<bool> retries_possible{true};
  ::rocksdb::WriteOptions write_options;

 private:
  std::atomic<std::size_t> purge_cursor_{0};  // the stripe purge_expired starts at
  Stripe& stripe_of(std::string_view id) { return *stripes[StringHash{}(id) % stripes.size()]; }
  void observe(std::int64_t now_ms);
  Status read(std::string_view id, Lookup& out, bool want_done = true);
  ClaimResult decide_claim(Stripe& s, const ClaimRequest& q, std::int64_t now, const Lookup& l);
  // Checks `q` against the lease table and the looked-up record (read if `pre` is
  // null) and adds its writes to `batch`. REQUIRES: the id's stripe is locked.
  Status stage_commit(Stripe& s, const CommitRequest& q, std::int64_t now, const std::optional<DoneRecord>* pre,
                      ::rocksdb::WriteBatch& batch);
  Status write(::rocksdb::WriteBatch& batch);
  // Locks the stripes of `ids` in index order.
  std::vector<std::unique_lock<std::mutex>> lock_all(const std::vector<std::string_view>& ids);
};

// Maps a RocksDB status to idem's, prefixed with `what`.
Status to_status(const ::rocksdb::Status& s, const std::string& what);

}  // namespace idem::rocksdb::detail

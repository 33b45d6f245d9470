// The SQLite store's implementation class, internal to idem::sqlite.
//
// Thread-safety: one connection, guarded by mu_ (recursive, so that a handler running
// inside a transaction opened by begin() may call the store from its own thread; those
// calls join the open transaction through a SAVEPOINT).
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "idem/backend/request_checks.hpp"
#include "idem/sqlite_store.hpp"
#include "idem/store.hpp"
#include "statement.hpp"

namespace idem::sqlite::detail {

// Owns an open connection; closes it last (after every Statement is finalized).
struct Connection {
  sqlite3* db = nullptr;
  Connection() = default;
  explicit Connection(sqlite3* d) : db(d) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() { sqlite3_close_v2(db); }
};

class SqliteStore final : public Store,
                          public EntityStore,
                          public OutboxStore,
                          public StoreAdmin,
                          public std::enable_shared_from_this<SqliteStore> {
 public:
  // Takes the open connection `db`, whose schema ensure_schema() has checked.
  SqliteStore(sqlite3* db, Options options);

  // Prepares every statement. Returns kDataLoss if the tables do not fit them.
  Status prepare();

  StoreCapabilities capabilities() const override;
  EntityStore* entities() override { return this; }
  OutboxStore* outbox() override { return this; }
  StoreAdmin* admin() override { return this; }
  StatusOr<ClaimResult> claim(const ClaimRequest& request) override;
  Status commit(const CommitRequest& request) override;
  StatusOr<std::uint32_t> release(const ReleaseRequest& request) override;
  Status extend(const ExtendRequest& request) override;
  StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint now) override;
  std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> requests) override;
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) override;
  StatusOr<std::unique_ptr<StoreTransaction>> begin(TimePoint now) override;
  // BEGIN IMMEDIATE, held with mu_ until the batch commits or rolls back; begin() on
  // the same thread meanwhile opens a SAVEPOINT (transaction.cpp).
  StatusOr<std::unique_ptr<BatchTransaction>> begin_batch(TimePoint now) override;
  StatusOr<std::size_t> purge_expired(TimePoint now, std::size_t max_records) override;

  // The outbox (outbox.cpp): entries written by every commit form with the record;
  // outbox_mark_sent deletes them, in one write transaction (sent entries are not kept,
  // so purge_expired never counts any).
  StatusOr<std::vector<OutboxEntry>> outbox_pending(const OutboxQuery& q) override;
  Status outbox_mark_sent(std::span<const OutboxEntry> sent, TimePoint now, Duration ttl) override;

  StatusOr<EntityRecord> read_entity(std::string_view key) override;
  Status write_entity(const EntityWrite& write) override;
  Status buffer_put(const BufferPut& put) override;
  // One write transaction for every put; an error of SQLite fails them all.
  std::vector<Status> buffer_put_batch(std::span<const BufferPut> puts) override;
  StatusOr<std::vector<BufferEntry>> buffer_read(std::string_view key, std::size_t max) override;
  Status buffer_remove(std::string_view key, std::uint64_t version) override;
  StatusOr<BufferSummary> buffer_summary(std::size_t max_keys) override;

  // Operator tools (operator.cpp). leases=local: count_records sees only the leases of
  // this process (another process cannot have the file open meanwhile).
  StatusOr<RecordCounts> count_records(TimePoint now) override;
  StatusOr<bool> remove_record(std::string_view id, TimePoint now) override;
  StatusOr<bool> remove_entity(std::string_view key) override;

  // For SqliteTransaction. REQUIRES: mu_ held by the caller's thread and a transaction
  // opened by begin() still open. Writes the commit, then COMMITs; on any failure
  // ROLLBACKs. Either way the transaction is over afterwards.
  Status commit_transaction(const CommitRequest& request);
  // REQUIRES: as above. ROLLBACKs the open transaction, if any.
  void rollback_transaction();
  // For a transaction nested in a batch (a SAVEPOINT): writes the commit and RELEASEs
  // the savepoint; on failure rolls back to it. Either way the savepoint is over.
  Status commit_nested(const CommitRequest& request);
  // Rolls back to the nested transaction's savepoint and releases it.
  void rollback_nested();
  // For the batch transaction: COMMIT (ROLLBACK on failure), then the batch is over.
  Status commit_batch_transaction();
  Status commit_in_transaction(const CommitRequest& request, bool nested);
  void end_batch() { in_batch_ = false; }
  std::recursive_mutex& mutex() { return mu_; }
  sqlite3* db() const { return conn_.db; }

 private:
  struct Row {
    int state = 0;
    std::string owner;
    std::int64_t lease_until_ms = 0;
    std::optional<std::uint64_t> fingerprint;
    std::optional<std::string> result;
    std::uint32_t retries = 0;
    std::int64_t expires_ms = 0;
  };
  struct Lease {
    std::string owner;
    std::int64_t until_ms = 0;
    std::optional<std::uint64_t> fingerprint;
  };

  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  using LeaseMap = std::unordered_map<std::string, Lease, Hash, std::equal_to<>>;

  // A write transaction (BEGIN IMMEDIATE), or a SAVEPOINT when one is already open on
  // the connection. Rolls back unless finish() succeeded.
  class WriteScope {
   public:
    explicit WriteScope(SqliteStore& s) : s_(s) {}
    WriteScope(const WriteScope&) = delete;
    WriteScope& operator=(const WriteScope&) = delete;
    ~WriteScope();
    Status start();
    Status finish();

   private:
    SqliteStore& s_;
    bool nested_ = false;
    bool open_ = false;
  };

  bool shared() const { return options_.leases == LeaseMode::kShared; }
  // The statements of entities.cpp with their SQL, for prepare().
  std::vector<std::pair<Statement*, std::string_view>> entity_statements();
  // The statements of outbox.cpp.
  std::vector<std::pair<Statement*, std::string_view>> outbox_statements();
  // REQUIRES: a write transaction, rolled back by the caller on error. Writes q.outbox.
  Status write_outbox(const CommitRequest& q);
  // Whether incoming_id has unsent outbox entries. REQUIRES: mu_ held.
  StatusOr<bool> has_unsent(std::string_view incoming_id);
  Status run(const Statement& s, std::string_view what);  // steps to DONE
  // Prepares `sql` into `s` for one operator call. REQUIRES: mu_ held.
  Status prepare_once(Statement& s, std::string_view sql);
  Status fault(std::string_view point) const;
  Status error(int rc, std::string_view what) const;

  // All REQUIRE mu_ held. The *_one forms REQUIRE a write transaction when they write.
  StatusOr<std::optional<Row>> read_row(std::string_view id);
  // The lease on id, live or expired, from the lease table (local) or the row (shared).
  std::optional<Lease> lease_of(std::string_view id, const std::optional<Row>& row) const;
  // `seen`: entity records already read in the same transaction (claim_batch), by
  // key; the claim uses and fills it instead of reading a key again (nothing writes an
  // entity record between the claims of one transaction).
  StatusOr<ClaimResult> claim_one(const ClaimRequest& q,
                                  std::map<std::string, EntityRecord, std::less<>>* seen = nullptr);
  Status commit_one(const CommitRequest& q);
  // commit_one, then (if q.entity) the entity write and its buffer removal, with the
  // fault points of a commit between them. REQUIRES: a write transaction, which the
  // caller rolls back (or rolls back to a savepoint) on any error: on error some of
  // it may have been written.
  Status commit_with_entity(const CommitRequest& q);
  // The record of key (revision 0 if none).
  StatusOr<EntityRecord> read_entity_one(std::string_view key);
  // REQUIRES: a write transaction, rolled back by the caller on error. Applies w
  // (kAborted if the revision moved) and removes the buffer entry it names.
  Status write_entity_one(const EntityWrite& w);
  // The entity writes of one commit_batch, applied in memory and written once per key
  // at the end (a key written many times in a batch costs one row write).
  struct StagedEntity {
    EntityRecord record;
    bool written = false;  // false: read for a revision check only
  };
  using EntityStaging = std::unordered_map<std::string_view, StagedEntity>;
  // Returns kAborted unless w.key's revision (staged, else stored) is w.expect_revision;
  // writes nothing.
  Status check_staged_revision(const EntityWrite& w, EntityStaging& st);
  // REQUIRES: check_staged_revision(w, st) returned OK, a write transaction. Applies w
  // to the staged record and removes the buffer entry it names.
  Status stage_entity_write(const EntityWrite& w, EntityStaging& st);
  // REQUIRES: a write transaction that has held the write lock since the staged
  // records were read. Writes every staged record.
  Status write_staged(const EntityStaging& st);
  // REQUIRES: a write transaction. Removes (key, version) from the buffer and its
  // totals; OK if absent.
  Status remove_buffered(std::string_view key, std::uint64_t version);
  // REQUIRES: a write transaction. See buffer_put.
  Status buffer_put_one(const BufferPut& put);
  // Appends up to max entries of key with versions in [0, 2^63) (high = false) or
  // [2^63, 2^64) (high = true), ascending.
  Status read_buffered(std::string_view key, bool high, std::size_t max, std::vector<BufferEntry>& out);
  StatusOr<std::uint32_t> release_one(const ReleaseRequest& q, bool& drop_lease);
  Status write_pending(std::string_view id, std::uint32_t retries, std::int64_t expires_ms,
                       const std::optional<std::uint64_t>& fingerprint);
  // leases=local: drops id's lease, if any.
  void forget_lease(std::string_view id);
  // leases=local: drops up to `max` expired leases, examining O(max) buckets and
  // entries from where the previous call stopped. Returns how many it dropped.
  std::size_t purge_leases(std::int64_t now, std::size_t max);
  // REQUIRES: a write transaction. Reads at most scan_limit rows in id order from
  // purge_cursor_ (wrapping to the first row once past the last, never reading a row
  // twice) and deletes those expired at `now`, at most `max`. Sets next_cursor to
  // where the next call goes on (nullopt: the first row) and notes in `floor` the rows
  // it kept and the end of a pass. Returns how many it deleted.
  // What the purge knows of when rows may be purged (unix ms). A pass reads the table
  // from its first row to its last, over as many calls as it takes.
  struct PurgeFloor {
    // No row this process wrote, nor any the last whole pass read, may be purged
    // before this; the minimum: unknown.
    std::int64_t floor = INT64_MIN;
    std::int64_t pass_min = INT64_MAX;     // the rows the pass under way read and kept
    std::int64_t written_min = INT64_MAX;  // the rows written since that pass began
    std::size_t skipped = 0;               // calls in a row that read nothing
    void written(std::int64_t at) {
      floor = std::min(floor, at);
      written_min = std::min(written_min, at);
    }
    void end_pass() {
      floor = std::min(pass_min, written_min);
      pass_min = written_min = INT64_MAX;
    }
  };
  StatusOr<std::size_t> purge_rows(std::int64_t now, std::size_t max, std::size_t scan_limit,
                                   std::optional<std::string>& next_cursor, PurgeFloor& floor);

  Connection conn_;  // declared first: closed after the statements are finalized
  Options options_;
  std::recursive_mutex mu_;
  LeaseMap leases_;               // LeaseMode::kLocal only
  bool in_batch_ = false;         // a begin_batch() transaction is open (under mu_)
  std::size_t lease_cursor_ = 0;  // the bucket of leases_ where purge_leases goes on
  // The rotating purge scan goes on after this id; nullopt: at the first row.
  std::optional<std::string> purge_cursor_;
  PurgeFloor purge_floor_;

  Statement begin_immediate_, begin_read_, commit_, rollback_;
  Statement savepoint_, release_savepoint_, rollback_savepoint_;
  Statement select_row_, insert_done_, update_done_, upsert_pending_, upsert_lease_, extend_lease_;
  Statement delete_row_, scan_after_, scan_from_, scan_up_to_;
  Statement select_entity_, insert_entity_, update_entity_, put_entity_;
  Statement buffer_get_, buffer_key_count_, buffer_insert_, buffer_delete_, buffer_low_, buffer_high_;
  Statement buffer_keys_, totals_, totals_add_;
  Statement outbox_insert_, outbox_pending_all_, outbox_pending_of_, outbox_mark_, outbox_has_unsent_;
};

}  // namespace idem::sqlite::detail

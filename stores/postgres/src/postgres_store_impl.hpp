// The PostgreSQL store's implementation class, internal to idem::postgres.
//
// Thread-safety: a pool of connections (pool_), each used by one call at a time. A
// transaction opened by begin() or begin_batch() binds its connection to the thread
// that opened it: every store call of that thread runs on it until it ends.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/backend/request_checks.hpp"
#include "idem/postgres_store.hpp"
#include "idem/store.hpp"
#include "pg.hpp"

namespace idem::postgres::detail {

// The states of a row of idem_records.
enum RowState : int {
  kRowPending = 0,     // only a retry count is kept, until expires_ms
  kRowInProgress = 1,  // owner holds the lease until lease_until_ms
  kRowCompleted = 2,   // done until expires_ms
  kRowDeadLettered = 3,
};

class PgStore;

// A connection taken from the pool (returned on destruction), or the connection of the
// calling thread's open transaction (joined: not returned).
class ConnRef {
 public:
  ConnRef(PgStore* store, std::unique_ptr<Conn> owned) : store_(store), owned_(std::move(owned)) {}
  explicit ConnRef(Conn* joined) : joined_(joined) {}
  ConnRef(ConnRef&&) = default;
  ConnRef& operator=(ConnRef&&) = delete;
  ~ConnRef();
  Conn& operator*() const { return joined_ ? *joined_ : *owned_; }
  Conn* operator->() const { return joined_ ? joined_ : owned_.get(); }
  bool joined() const { return joined_ != nullptr; }
  // Gives up ownership (a transaction keeps the connection past this object).
  std::unique_ptr<Conn> take() { return std::move(owned_); }

 private:
  PgStore* store_ = nullptr;
  std::unique_ptr<Conn> owned_;
  Conn* joined_ = nullptr;
};

// Every statement of the store, its schema name filled in.
struct Statements {
  explicit Statements(const std::string& schema);
  Sql claim, claim_async, claim_batch, claim_batch_async, claim_lean, claim_lean_async, commit, commit_batch,
      commit_batch_same, read_row, read_row_locked, upsert_pending, delete_row, extend;
  Sql purge_from, purge_after;
  Sql read_entity, insert_entity, update_entity, unbuffer;
  Sql buffer_lock_totals, buffer_check, buffer_insert, buffer_read, buffer_totals, buffer_keys;
  Sql count_records, remove_record, remove_entity_record, remove_entity_buffer;
  Sql server_time;  // the server's clock_timestamp() in microseconds since the epoch
  Sql outbox_insert, outbox_pending_all, outbox_pending_of, outbox_mark_sent, outbox_purge;
};

// A statement named idem_<name>, its text with '@' replaced by the quoted schema.
Sql make_sql(const std::string& schema, const char* name, std::string text);
// Fills the outbox statements of t (outbox.cpp).
void add_outbox_statements(Statements& t, const std::string& schema);

class PgStore final : public Store,
                      public EntityStore,
                      public OutboxStore,
                      public StoreAdmin,
                      public std::enable_shared_from_this<PgStore> {
 public:
  explicit PgStore(Options options);
  ~PgStore() override;

  // Opens the first connection and creates or checks the schema (schema.cpp).
  Status init();

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
  StatusOr<std::unique_ptr<BatchTransaction>> begin_batch(TimePoint now) override;
  StatusOr<std::size_t> purge_expired(TimePoint now, std::size_t max_records) override;
  StatusOr<std::vector<OutboxEntry>> outbox_pending(const OutboxQuery& q) override;
  Status outbox_mark_sent(std::span<const OutboxEntry> sent, TimePoint now, Duration ttl) override;

  StatusOr<EntityRecord> read_entity(std::string_view key) override;
  Status write_entity(const EntityWrite& write) override;
  Status buffer_put(const BufferPut& put) override;
  StatusOr<std::vector<BufferEntry>> buffer_read(std::string_view key, std::size_t max) override;
  Status buffer_remove(std::string_view key, std::uint64_t version) override;
  StatusOr<BufferSummary> buffer_summary(std::size_t max_keys) override;

  StatusOr<TimePoint> server_time() override;
  StatusOr<RecordCounts> count_records(TimePoint now) override;
  StatusOr<bool> remove_record(std::string_view id, TimePoint now) override;
  StatusOr<bool> remove_entity(std::string_view key) override;

  // --- for the pool, transactions (transaction.cpp) and schema.cpp --------------
  // The calling thread's transaction connection, else one of the pool (opened if
  // none is idle and fewer than pool_size are open; else waits).
  StatusOr<ConnRef> acquire();
  void give_back(std::unique_ptr<Conn> c);
  // Binds c to the calling thread (batch: a begin_batch() transaction) / unbinds it.
  void bind(Conn* c, bool batch);
  void unbind();
  // The calling thread's bound connection and whether it is a batch's.
  std::pair<Conn*, bool> bound() const;
  // Writes the record of q, its outbox entries and, if set, its entity write, with the
  // commit's fault points. REQUIRES: c in a transaction, rolled back by the caller on
  // error.
  Status commit_in(Conn& c, const CommitRequest& q);
  Status fault(std::string_view point) const;
  const Statements& sql() const { return sql_; }
  const Options& options() const { return options_; }

 private:
  // Runs f in a transaction on a connection: BEGIN … COMMIT, or, on the calling
  // thread's open transaction, a SAVEPOINT. Rolls back if f fails.
  Status in_transaction(const std::function<Status(Conn&)>& f);
  StatusOr<std::unique_ptr<Conn>> connect();
  Status create_schema(Conn& c);  // schema.cpp

  // One claim (one statement, repeated if its read raced with another writer).
  // async: the statement commits without waiting for its WAL flush (see the header).
  StatusOr<ClaimResult> claim_on(Conn& c, const ClaimRequest& q, bool async);
  // The record statement of a commit; kFailedPrecondition if it was refused.
  Status commit_record(Conn& c, const CommitRequest& q);
  // Why a commit of id was refused (read after the fact).
  Status refusal(Conn& c, std::string_view id, std::int64_t now);
  // REQUIRES: c in a transaction. The revision compare-and-set and the buffer removal.
  Status write_entity_in(Conn& c, const EntityWrite& w);
  Status unbuffer_in(Conn& c, std::string_view key, std::uint64_t version);
  std::vector<Status> commit_batch_unnest(std::span<const CommitRequest> requests);
  std::vector<Status> commit_batch_transaction(std::span<const CommitRequest> requests);
  StatusOr<std::uint32_t> release_in(Conn& c, const ReleaseRequest& q);
  // outbox.cpp. Inserts the entries, in their order, in one statement. REQUIRES: c in
  // the transaction of their commit.
  Status write_outbox_in(Conn& c, const std::vector<const OutboxEntry*>& entries);
  // Removes up to max sent entries expired at now_ms (a bounded scan from the oldest).
  StatusOr<std::size_t> purge_outbox(Conn& c, std::int64_t now_ms, std::size_t max);

  Options options_;
  Statements sql_;
  std::string password_;  // scrubbed from connection errors

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Conn>> idle_;
  std::size_t open_ = 0;
  std::optional<std::string> purge_cursor_;  // under mu_; nullopt: the first row
};

// Buffer versions are stored with the top bit flipped so that bigint order is the
// order of the unsigned versions.
inline std::int64_t encode_version(std::uint64_t v) { return static_cast<std::int64_t>(v ^ (1ull << 63)); }
inline std::uint64_t decode_version(std::int64_t v) { return static_cast<std::uint64_t>(v) ^ (1ull << 63); }
inline std::optional<std::int64_t> encode_fp(const std::optional<std::uint64_t>& fp) {
  return fp ? std::optional<std::int64_t>(static_cast<std::int64_t>(*fp)) : std::nullopt;
}

}  // namespace idem::postgres::detail

// The store contract (docs/design.md §4). Every backend implements Store and passes the
// conformance suite in tests/conformance/.
//
// Ids are arbitrary bytes (NUL and non-UTF-8 included). Times are passed in by the
// caller (`now`), never read from a clock inside a store, so that expiry is
// deterministic under test; processes on several hosts that share a store take `now`
// from the store's own time (server_time(), StoreClock) so that they agree on it.
// Unless a backend says otherwise, every method is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/clock.hpp"
#include "idem/entity.hpp"
#include "idem/outbox.hpp"
#include "idem/status.hpp"

namespace idem {

// What a backend promises about its semantics. The consumer checks these against its
// options. What a store keeps beside the dedup records is not a flag: see
// Store::entities(), outbox() and admin().
struct StoreCapabilities {
  bool durable = false;        // committed records survive a process crash
  bool shared = false;         // several processes may use the same store at once
  bool probabilistic = false;  // may answer "completed" for an id never committed
  bool transactional = false;  // begin() gives a transaction the handler can write in
  // begin_batch() gives a transaction spanning many handlers, each in a savepoint
  // (transactional consumers' process_batch then commits once per batch).
  bool batch_transactions = false;
  bool native_ttl = false;  // the backend expires records by itself
  // commit_then_claim() costs one round trip rather than two (e.g. Redis pipelines the
  // commit and the claim): Consumer::process(m, next) then claims `next` with m's
  // commit. Other stores keep the default (two calls) and the lookahead stays off.
  bool combined_commit_claim = false;
  // probabilistic stores: the configured rate of "completed" answers for ids never
  // committed (each is a new message dropped as a duplicate); 0 otherwise.
  double false_positive_rate = 0.0;
  // commit_batch stops each key's chain of entity writes at its first failure: once a
  // request of the batch carrying an entity write of key K has failed, every later
  // request of the batch with an entity write of K fails with kAborted and writes
  // nothing. Without it a later write may land on a revision another writer produced
  // meanwhile, so the engine puts at most one write per key in a batch.
  bool entity_chains = false;
  // Every call is a short in-process operation (no I/O, no wait but a brief lock), as
  // in idem::memory: the consumer does not time its calls, so MetricsSnapshot's
  // store_latency stays empty for it (two clock reads and two histogram updates per
  // message fewer).
  bool in_process = false;
};

enum class ClaimStatus {
  kNew,         // the caller now holds the lease and must commit or release
  kCompleted,   // committed before (and not yet expired)
  kInProgress,  // some owner (the caller included) holds an unexpired lease
  kConflict,    // the id is known with a different payload fingerprint
};

struct ClaimRequest {
  std::string_view id;                       // REQUIRES: non-empty
  std::string_view owner;                    // who holds the lease if kNew
  Duration lease{0};                         // REQUIRES: > 0
  std::optional<std::uint64_t> fingerprint;  // payload hash; nullopt: do not compare
  TimePoint now;
  // Set: a granted claim also returns this key's entity record (ClaimResult::entity),
  // read in the same step as the claim. A caller that sets it for an id sets the same
  // key on every claim, release, extend and commit of that id (a store may place the
  // id's record by it, e.g. in the entity's Redis Cluster slot).
  std::optional<std::string_view> entity_key;
  // Set: a claim that finds the id completed also says whether its commit's outbox
  // entries are still unsent (ClaimResult::outbox_unsent). Unset: the store need not
  // look, and leaves outbox_unsent false. A consumer with an outbox sets it.
  bool check_outbox = false;
};

struct ClaimResult {
  ClaimStatus status = ClaimStatus::kNew;
  std::uint32_t retries = 0;          // kNew: failed attempts recorded for this id so far
  std::optional<std::string> result;  // kCompleted: the stored result, if any
  bool dead_lettered = false;         // kCompleted: the record marks a dead-lettered id
  std::string owner;                  // kInProgress: the lease holder
  Duration lease_left{0};             // kInProgress: time until the lease expires
  EntityRecord entity;                // kNew with ClaimRequest::entity_key: its record
  // kCompleted with ClaimRequest::check_outbox, on a store with an outbox():
  // true iff the id's commit wrote outbox entries (CommitRequest::outbox) that are
  // still unsent, read in the same step as the claim; the consumer then dispatches
  // them (outbox_pending of the id), and reads nothing more for a duplicate when it is
  // false. False otherwise.
  bool outbox_unsent = false;

  static ClaimResult granted(std::uint32_t retries) {
    ClaimResult r;
    r.retries = retries;
    return r;
  }
  static ClaimResult conflict() {
    ClaimResult r;
    r.status = ClaimStatus::kConflict;
    return r;
  }
};

enum class Outcome {
  kProcessed,     // the handler's effect happened
  kDeadLettered,  // the message went to the dead-letter path; redeliveries are duplicates
};

// Marks an id done. Succeeds iff the id is not completed and no other owner holds an
// unexpired lease on it (an expired lease of the caller itself is still accepted).
// On success the record is done until now + ttl and its retry count is cleared.
// With `entity` set, the entity write (entity.hpp) is part of the same atomic step:
// if its revision check fails, nothing is written and commit returns kAborted.
// REQUIRES: Store::entities() when `entity` is set (the consumer refuses to
// build ordering or a state machine over a store without them).
struct CommitRequest {
  std::string_view id;
  std::string_view owner;
  std::optional<std::uint64_t> fingerprint;
  TimePoint now;
  Duration ttl{0};                         // REQUIRES: > 0
  std::optional<std::string_view> result;  // stored and returned to duplicates
  Outcome outcome = Outcome::kProcessed;
  std::optional<EntityWrite> entity;
  // The entity key the claim carried, if any (as in ReleaseRequest); with `entity`
  // set, REQUIRES: equal to entity->key.
  std::optional<std::string_view> entity_key;
  // Outgoing messages written, unsent, in the same atomic step as the record (a
  // failed commit writes none of them). REQUIRES: Store::outbox() when
  // non-empty (the consumer never sends them to another store); each entry has
  // incoming_id == id, a non-empty destination and a distinct position
  // (kInvalidArgument otherwise, writing nothing). Must outlive the call.
  std::span<const OutboxEntry> outbox;
};

// Gives up a lease held by `owner` (no-op if it does not hold it) and, iff
// count_retry, adds one failed attempt to the id's durable retry count, which is kept
// until now + retry_ttl or until a commit.
struct ReleaseRequest {
  std::string_view id;
  std::string_view owner;
  bool count_retry = false;
  TimePoint now;
  Duration retry_ttl{0};  // REQUIRES: > 0 when count_retry
  // The entity key the claim carried, if any (a store may place an id's record by it).
  std::optional<std::string_view> entity_key;
};

// Moves the lease expiry of a lease held by `owner` to now + lease.
struct ExtendRequest {
  std::string_view id;
  std::string_view owner;
  Duration lease{0};  // the new lease from now; REQUIRES: > 0 (kInvalidArgument otherwise)
  TimePoint now;
  std::optional<std::string_view> entity_key;  // as in ReleaseRequest
};

// The answers of Store::commit_then_claim: those of commit(c), then of claim(q).
struct CommitThenClaimResult {
  Status commit;
  StatusOr<ClaimResult> claim;
};

enum class RecordState { kPending, kInProgress, kCompleted, kDeadLettered };

// A read-only view of one record, for tools and tests.
struct RecordInfo {
  RecordState state = RecordState::kPending;  // kPending: only a retry count is kept
  std::string owner;                          // kInProgress
  TimePoint lease_until;                      // kInProgress
  std::optional<std::uint64_t> fingerprint;
  std::optional<std::string> result;
  std::uint32_t retries = 0;
  TimePoint expires_at;  // kPending, kCompleted, kDeadLettered
};

// The records of a store at one time, by the state inspect() would report
// (Store::count_records).
struct RecordCounts {
  std::size_t pending = 0;        // only a retry count is kept
  std::size_t in_progress = 0;    // a lease this store can see is held (see the store's notes)
  std::size_t completed = 0;      // done, not yet expired
  std::size_t dead_lettered = 0;  // done as dead-lettered, not yet expired
  std::size_t expired = 0;        // no longer live, still held until purge_expired reaches it
};

// A write transaction the handler can add its own writes to (transactional mode).
// Not thread-safe; owned by one handler invocation. Destroying it without commit()
// rolls it back.
class StoreTransaction {
 public:
  virtual ~StoreTransaction() = default;
  // Writes the commit inside this transaction, then commits the whole transaction:
  // the handler's writes and the record land together or not at all.
  virtual Status commit(const CommitRequest& request) = 0;
  // Undoes every write of this transaction. Idempotent.
  virtual void rollback() = 0;
};

// A transaction spanning the handlers of many messages (transactional batches).
// While it is open, begin() on the thread that opened it gives a nested transaction
// (a savepoint): its commit(request) writes the record and ends the savepoint, and
// its writes become durable only with this transaction's commit(); its rollback()
// undoes only its own writes. Not thread-safe; destroying it without commit() rolls
// every nested transaction back.
class BatchTransaction {
 public:
  virtual ~BatchTransaction() = default;
  // Commits everything written since begin_batch(). On failure nothing was written.
  virtual Status commit() = 0;
  // Undoes everything written since begin_batch(). Idempotent.
  virtual void rollback() = 0;
};

// Called by a backend at named points inside multi-step operations, for crash and
// atomicity tests; a non-OK answer makes the operation fail at that point as if the
// process had died there. Null in production.
using FaultHook = std::function<Status(std::string_view point)>;

// Entity records and the durable reorder buffer of a store (Store::entities()).
// Thread-safe as the store is.
class EntityStore {
 public:
  virtual ~EntityStore() = default;

  // Returns the record of key (revision 0 if it has none).
  virtual StatusOr<EntityRecord> read_entity(std::string_view key) = 0;
  // Applies `write` alone (no dedup record). Returns kAborted if the revision moved.
  virtual Status write_entity(const EntityWrite& write) = 0;
  // Stores an entry durably. Idempotent: OK if (key, version) already holds the same
  // id. Returns kFailedPrecondition if it holds another id, kResourceExhausted
  // (naming the limit) if the entry would exceed put.limits; nothing is stored then.
  virtual Status buffer_put(const BufferPut& put) = 0;
  // The same answers as one buffer_put per element, in order (a later put sees the
  // earlier ones: their limits, their versions), in as few transactions as the store
  // allows. Default: the loop.
  virtual std::vector<Status> buffer_put_batch(std::span<const BufferPut> puts);
  // Returns up to max entries of key, by ascending version.
  virtual StatusOr<std::vector<BufferEntry>> buffer_read(std::string_view key, std::size_t max) = 0;
  // Removes the entry (key, version); OK if absent.
  virtual Status buffer_remove(std::string_view key, std::uint64_t version) = 0;
  // Returns the totals and up to max_keys keys with entries, oldest first.
  virtual StatusOr<BufferSummary> buffer_summary(std::size_t max_keys) = 0;
};

// The transactional outbox of a store (Store::outbox(); outbox.hpp). Thread-safe as
// the store is.
class OutboxStore {
 public:
  virtual ~OutboxStore() = default;

  // Returns up to q.max unsent entries that q selects: one incoming id's by ascending
  // position, or every incoming id's (an incoming id's entries in position order).
  virtual StatusOr<std::vector<OutboxEntry>> outbox_pending(const OutboxQuery& q) = 0;
  // Marks the entries (by incoming_id, position) sent: outbox_pending no longer returns
  // them, nor does a claim count them in ClaimResult::outbox_unsent. A store either
  // keeps them until now + ttl (then purge_expired, or the backend's own expiry,
  // removes them) or removes them at once (nothing reads a sent entry). Entries
  // already sent or absent are skipped. One atomic step. REQUIRES: ttl > 0.
  virtual Status outbox_mark_sent(std::span<const OutboxEntry> sent, TimePoint now, Duration ttl) = 0;
};

// The operator calls of a store (Store::admin(); `idem inspect`, `idem purge`,
// docs/design.md §8). None is for a hot path.
class StoreAdmin {
 public:
  virtual ~StoreAdmin() = default;

  // Counts every record of the store by its state at `now`. Reads the whole store.
  virtual StatusOr<RecordCounts> count_records(TimePoint now) = 0;
  // Removes the record of id whatever its state, a held lease included (the holder's
  // commit then succeeds as for an id never claimed). Returns true iff id had a live
  // record at `now` (the one inspect(id, now) returns); an expired record is removed
  // too. REQUIRES: id non-empty.
  virtual StatusOr<bool> remove_record(std::string_view id, TimePoint now) = 0;
  // Removes key's entity record and every buffered entry of key, in one step. The key
  // starts over at revision 0: a writer holding an older revision gets kAborted, and
  // the key's next message is ordered as if it were the key's first. Returns true iff
  // the key had a record or buffered entries. REQUIRES: key non-empty; the store has
  // entities() (every store with an admin() has).
  virtual StatusOr<bool> remove_entity(std::string_view key) = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  virtual StoreCapabilities capabilities() const = 0;

  // Tries to take the lease on request.id for request.owner.
  // Returns kConflict iff the id has a record with a fingerprint and the request has a
  // different one. An expired lease or an expired record counts as absent.
  virtual StatusOr<ClaimResult> claim(const ClaimRequest& request) = 0;

  // See CommitRequest. Returns kFailedPrecondition if another owner holds the lease or
  // the id is already completed.
  virtual Status commit(const CommitRequest& request) = 0;

  // See ReleaseRequest. Returns the retry count after the call.
  virtual StatusOr<std::uint32_t> release(const ReleaseRequest& request) = 0;

  // See ExtendRequest. Returns kFailedPrecondition if the caller does not hold the lease.
  virtual Status extend(const ExtendRequest& request) = 0;

  // Returns the live record of id at `now`, or nullopt.
  virtual StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint now) = 0;

  // Batch forms: the same answers as one call per element, in order, in as few round
  // trips or transactions as the backend allows. Defaults loop.
  virtual std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> requests);
  virtual std::vector<Status> commit_batch(std::span<const CommitRequest> requests);
  // Commits c, then claims q, in as few round trips as the backend allows
  // (capabilities().combined_commit_claim: one). The answers are those of commit(c)
  // followed by claim(q). Default: the two calls.
  virtual CommitThenClaimResult commit_then_claim(const CommitRequest& c, const ClaimRequest& q);

  // Opens a write transaction (transactional backends). Default: kUnimplemented.
  virtual StatusOr<std::unique_ptr<StoreTransaction>> begin(TimePoint now);

  // Opens a transaction for many handlers (capabilities().batch_transactions; see
  // BatchTransaction). Every store call of this thread until its commit() or
  // rollback() belongs to it; other threads' calls wait. Default: kUnimplemented.
  virtual StatusOr<std::unique_ptr<BatchTransaction>> begin_batch(TimePoint now);

  // Removes up to max_records expired records (and, with an outbox, sent outbox
  // entries past their expiry). Returns how many were removed.
  // Backends with native TTL return 0. Bounded work: safe to call from a hot loop.
  virtual StatusOr<std::size_t> purge_expired(TimePoint now, std::size_t max_records) = 0;

  // The store's own time, read from its server now (Redis TIME, PostgreSQL
  // clock_timestamp()): the one timeline of every process that shares the store
  // (StoreClock, store_clock.hpp, follows it). kUnimplemented (the default) for a store
  // that lives in one process or on one host (memory, SQLite, RocksDB), whose timeline
  // is that host's clock. kUnavailable when the server cannot be reached.
  virtual StatusOr<TimePoint> server_time();

  // --- what some stores keep beside the dedup records ------------------------------
  // Each is an interface of its own, reached from the store; null when the store
  // keeps none. A pointer stays valid as long as the store.

  // Entity records and the reorder buffer (entity.hpp): required by ordering modes
  // other than watermark and by state machines. Default: null.
  virtual EntityStore* entities() { return nullptr; }
  // The transactional outbox (outbox.hpp): commits write CommitRequest::outbox.
  // Required by ConsumerOptions::outbox. Default: null.
  virtual OutboxStore* outbox() { return nullptr; }
  // The operator calls of `idem inspect` and `idem purge`. Default: null.
  virtual StoreAdmin* admin() { return nullptr; }
};

}  // namespace idem

// rocksdb:PATH — the embedded durable store for high message rates (idem::rocksdb).
//
// One RocksDB database (a directory). Key layout, one column family per kind of
// record (docs/stores.md has the byte formats):
//   idem_meta     "layout" → "idem.rocksdb/<kLayoutVersion>"
//   idem_done     id → completed / dead-lettered record: expiry, fingerprint, result
//   idem_retries  id → retry count and its expiry
//   idem_entities entity key → entity record (revision, version, state); no expiry
//   idem_buffer   length-prefixed entity key + big-endian version → buffered message
//                 (buffered_at, id, message); a key's entries by ascending version
//   idem_outbox   length-prefixed incoming id + big-endian position → unsent outgoing
//                 message (outbox.hpp), put by its incoming message's commit
//   idem_outbox_sent  the same key → its expiry, once sent (outbox_mark_sent moves it
//                 here in one WriteBatch); the compaction filter drops it at expiry
//   default and Options::user_column_families: the handler's own data (transactional
//   mode); idem never reads or writes them itself.
// Names starting with "idem_" are reserved for idem. A database from before
// idem_entities, idem_buffer or the outbox's column families existed gets them added
// at open.
//
// Leases (in-progress claims) live in this process's memory, in lock stripes keyed by
// the id's hash. RocksDB locks its directory to one process (the LOCK file), so no
// other process can see or take a lease anyway; keeping them in memory saves a WAL
// write per message, and a crash drops them with the process — what their expiry
// would do, only sooner. A claim is a read of idem_done and idem_retries under the
// id's stripe lock (so exactly one of many concurrent claimers wins); a commit is one
// WriteBatch (the record, the cleared retry count and, in transactional mode, the
// handler's writes), written under the same lock.
//
// Entity records (Store::entities()): an entity write is a compare-and-set
// made under the lock stripe of the entity key (taken with the id's stripe, in stripe
// order, by a commit), and lands in the commit's one WriteBatch with the dedup record
// and the removal of the unbuffered entry. Up to Options::entity_cache records are
// kept in memory, exact because this process is the only writer. The reorder
// buffer's totals and the live versions of every key with buffered entries are kept
// in memory, rebuilt by a scan at open: buffer_put counts a key's entries and
// buffer_read seeks to its first live entry without scanning its removed ones.
//
// Expiry: every record carries its expiry time. Reads treat an expired record as
// absent. A compaction filter drops records that expired before the largest `now`
// this handle has been given (never by the wall clock, so injected time stays
// authoritative), so purge_expired() has nothing to do (capabilities().native_ttl).
//
// Thread-safe. Durable across a process crash (WAL on); with sync=false (default)
// a power loss may lose the last commits, sync=true fsyncs the WAL per commit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/backend/store_uri.hpp"
#include "idem/handler.hpp"
#include "idem/store.hpp"

namespace idem::rocksdb {

struct Options {
  std::string path;  // the database directory; REQUIRES: non-empty; created if absent
  // fsync the WAL on every commit. Default false: a process crash loses nothing that
  // commit() acknowledged, a power loss or OS crash may lose the last commits.
  bool sync = false;
  std::size_t block_cache_mib = 64;  // shared LRU block cache in MiB; default 64
  int bloom_bits_per_key = 10;       // SST Bloom filter bits per key; 0: none; default 10
  std::size_t write_buffer_mib = 4;  // memtable size per column family in MiB; default 4
  std::size_t lease_stripes = 64;    // lock stripes for leases; REQUIRES: > 0; default 64
  // Entity records kept in memory (a cache of idem_entities, exact because this
  // process is the only writer), so that the ordering path reads none from the
  // database. In records; 0: none cached. Default 100,000.
  std::size_t entity_cache = 100'000;
  // Column families the handler may write in transactional mode besides "default";
  // created if absent. Names must not start with "idem_". Default: none.
  std::vector<std::string> user_column_families{};
  // Tests only (see store.hpp): called at "rocksdb.commit.write",
  // "rocksdb.buffer_put.write" and "rocksdb.outbox.mark_sent.write", before the
  // operation's one WriteBatch is written.
  FaultHook fault_hook{};
};

// Opens (creating if needed) the store. Errors, each naming the path:
// kInvalidArgument (bad options, or PATH is not a directory), kUnavailable (locked by
// another process, or the directory cannot be created or written), kDataLoss (a
// RocksDB database of another layout, or corrupt), kFailedPrecondition (written by a
// newer layout version). A failed open changes nothing on disk.
class RocksDbStore;
StatusOr<std::shared_ptr<RocksDbStore>> open(const Options& options);

// From a URI: rocksdb:PATH?sync=true|false&block_cache_mib=N&bloom_bits=N&
// write_buffer_mib=N&stripes=N&entity_cache=N&cf=NAME[,NAME…]; every parameter left
// out keeps its Options default. Returns kInvalidArgument for an unknown parameter or
// a bad value, and open()'s errors.
StatusOr<std::shared_ptr<RocksDbStore>> open(const StoreUri& uri);

// The Options of such a URI, without opening anything: open(uri) is open(parse_uri(uri)).
StatusOr<Options> parse_uri(const StoreUri& uri);

// Writes the handler adds to the commit's WriteBatch in transactional mode. They land
// in the same atomic write as the dedup record, or not at all. Not thread-safe; valid
// only while the handler runs.
class Batch {
 public:
  virtual ~Batch() = default;
  // Adds key → value in column family `cf` ("default" or a user column family).
  // Returns kInvalidArgument for an unknown or an idem_ column family.
  virtual Status put(std::string_view cf, std::string_view key, std::string_view value) = 0;
  // Adds a deletion of key in column family `cf`. Errors as put().
  virtual Status del(std::string_view cf, std::string_view key) = 0;
  // Reads key from the committed database (this batch's own writes are not visible).
  // Returns nullopt if absent; errors as put() or kUnavailable.
  virtual StatusOr<std::optional<std::string>> get(std::string_view cf, std::string_view key) const = 0;
  // Number of puts and deletions added so far.
  virtual std::size_t size() const = 0;
};

// The batch of the RocksDB transaction ctx runs in, or null if ctx carries none.
Batch* batch(const HandlerContext& ctx);

struct CompactionReport {
  std::uint64_t dropped = 0;  // expired records the compaction filter removed so far
};

// A store opened by rocksdb::open: the Store contract, and RocksDB's own calls for the
// Bloom front filter (bloom+rocksdb:) and for operations. A wrapper of it
// (StoreWrapper) keeps it as its base(), so these stay reachable through the handle
// open() returned.
class RocksDbStore : public Store {
 public:
  // Takes the lease like Store::claim, given the caller knows that request.id has no
  // committed record and no retry count (a negative from a filter holding every id
  // this store has a record of): skips the reads. Leases are still checked.
  virtual StatusOr<ClaimResult> claim_known_absent(const ClaimRequest& request) = 0;

  // claim_known_absent for each request, under one locking of all their stripes.
  // Results in request order; a later copy of an id in `requests` sees the lease the
  // earlier copy took (kInProgress), as with Store::claim_batch.
  virtual std::vector<StatusOr<ClaimResult>> claim_known_absent_batch(std::span<const ClaimRequest> requests) = 0;

  // Calls visit(id, expires_at) for every record in idem_done and idem_retries,
  // expired ones included. Not a snapshot: concurrent writes may or may not be seen.
  virtual Status for_each_record(const std::function<void(std::string_view id, TimePoint expires_at)>& visit) = 0;

  // Store::begin, with before_commit(request) called inside commit() before anything
  // is checked or written (a front filter notes the id there).
  virtual StatusOr<std::unique_ptr<StoreTransaction>> begin_observed(
      TimePoint now, std::function<void(const CommitRequest&)> before_commit) = 0;

  // Lets the compaction filter drop records expired at `now`, compacts idem_done and
  // idem_retries fully, and reports. Ops and tests; not needed in normal operation.
  virtual StatusOr<CompactionReport> compact(TimePoint now) = 0;
};

// The layout version this build writes.
inline constexpr int kLayoutVersion = 1;

}  // namespace idem::rocksdb

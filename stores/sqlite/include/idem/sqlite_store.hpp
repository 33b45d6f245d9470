// sqlite:PATH — the durable embedded default store (idem::sqlite).
//
// One SQLite file in WAL mode, prepared statements only. Committed records, retry
// counts and the schema version live in the file. Leases live either:
//   - LeaseMode::kLocal (default): in this process's memory; the file is locked
//     exclusively (PRAGMA locking_mode=EXCLUSIVE) so no other process can use it at
//     the same time. A crash drops the leases with the process, which is what a lease
//     expiry would do anyway. One write transaction per commit.
//   - LeaseMode::kShared: in the file, so several processes on one host can share it.
//     Costs a second write transaction per message (the claim).
//
// Entity records and the reorder buffer (entity.hpp): Store::entities() is not null
// in both lease modes. A claim with entity_key reads the key's record in the same step
// (leases=shared: in the claim's write transaction). A commit with `entity` writes the
// dedup record, the entity compare-and-set and the buffer removal in one write
// transaction; a revision mismatch rolls it all back (kAborted). The buffer keeps a
// totals row, so buffer_put checks its limits in O(per_key) rows read.
// buffer_summary reads the whole buffer (bounded by BufferLimits::total).
//
// Transactional mode: begin() opens a write transaction (BEGIN IMMEDIATE) on the
// store's connection and holds the store's lock until it commits or rolls back; the
// handler writes its own tables through connection(ctx) and the dedup record lands in
// the same transaction. Other threads using this store wait meanwhile; store calls
// from the handler's own thread (e.g. extend_lease) join the open transaction. A
// second begin() on that thread before the first ends is kFailedPrecondition.
#pragma once

#include <memory>
#include <string>

#include "idem/backend/store_uri.hpp"
#include "idem/handler.hpp"
#include "idem/store.hpp"

struct sqlite3;

namespace idem::sqlite {

enum class LeaseMode { kLocal, kShared };
enum class Synchronous { kNormal, kFull };

struct Options {
  std::string path;                      // REQUIRES: non-empty; created if absent
  LeaseMode leases = LeaseMode::kLocal;  // default local (see above)
  Duration busy_timeout{5000};           // ms to wait for another process's lock; 5 s
  // PRAGMA synchronous. kNormal (default): in WAL mode a process crash loses nothing
  // committed; a power loss may lose the last commits. kFull: fsync per commit.
  Synchronous synchronous = Synchronous::kNormal;
  std::int64_t cache_mib = 64;  // page cache size in MiB; default 64; REQUIRES: > 0
  // PRAGMA wal_autocheckpoint: the commit that brings the WAL to this many pages
  // copies it back into the database file (with leases=local, and with leases=shared
  // when no reader holds an older snapshot). Default 10000 pages (about 40 MiB at the
  // default 4 KiB page size): a page that many commits rewrite is copied back once
  // per checkpoint rather than once per commit, and the fsyncs of checkpoints happen a
  // tenth as often as at SQLite's default of 1000. REQUIRES: > 0.
  std::int64_t wal_autocheckpoint_pages = 10'000;
  // Tests only (see store.hpp); null by default. Called inside the write transaction
  // at "commit.before_write", "commit.after_record" and, for a commit with an entity
  // write, "commit.after_entity" (after the entity write and the buffer removal)
  // (commit() and StoreTransaction::commit()), and at "commit_batch.before_write",
  // "commit_batch.after_first" (after the first record is written) and
  // "commit_batch.before_commit", and at "outbox.mark_sent.before_commit" in
  // outbox_mark_sent. A non-OK answer rolls the whole transaction back and is
  // returned (for every item of a batch).
  FaultHook fault_hook;
};

// Opens (creating if needed) the store. Errors: kInvalidArgument (bad options),
// kUnavailable (locked by another process past busy_timeout, unreadable or read-only
// file or directory), kDataLoss (not a database, or idem tables of another layout;
// tables of the user's own are fine), kFailedPrecondition (created by a newer schema
// version). The store is thread-safe (one connection behind a mutex).
//
// Layout: idem_meta(key, value) holds 'schema_version'; idem_records holds one row
// per id (a BLOB key, WITHOUT ROWID) with its state, fingerprint, result, retry count
// and expiry, and no secondary index, so that a commit writes one b-tree. A file that
// still has the index idem_records_expires on idem_records (written by an earlier
// build) opens, and the index is dropped. Schema version 2 adds idem_entities (one row
// per entity key, WITHOUT ROWID), idem_buffer (PRIMARY KEY (key, version), WITHOUT
// ROWID) and idem_buffer_totals (one row: entries and bytes in the buffer). Schema
// version 4 adds idem_outbox (the transactional outbox, outbox.hpp: one row per
// unsent outgoing message, PRIMARY KEY (incoming, position), WITHOUT ROWID), inserted
// by the commit of its incoming message and deleted when marked sent, so it stays as
// small as the backlog of unsent messages (version 3 kept sent rows in commit order
// until their expiry; its unsent rows move to the new table). A file of an older
// version is upgraded at open, in one transaction.
//
// Purge: purge_expired(now, max_records) is a rotating scan over the primary key. The
// store keeps a cursor (the last id read, in memory; the first row after open). Each
// call, in one short write transaction, reads at most 4 × max_records + 64 rows in id
// order from the cursor, wrapping to the first row past the last (never reading a row
// twice in one call), deletes those expired at `now` (a done record or retry count
// past its ttl, an abandoned shared lease), at most max_records, and moves the cursor
// to the last row read. With leases=local it then drops expired in-memory leases, up
// to the rest of max_records. So each call does bounded work; every record expired at
// `now` is gone after at most one full sweep of the cursor over the table (each call
// moves it on by 4 × max_records + 64 rows, or past max_records deleted ones); live
// records are never removed. After a whole pass over the table the store knows the
// earliest time any row it read or wrote since may be purged; a call before then
// reads nothing, except every 16th, which goes on with the pass for rows other
// processes wrote (leases=shared). An expired record not yet purged is still
// answered as expired by claim and inspect: purging only reclaims space. Sent outbox
// entries are not kept (outbox_mark_sent deletes them), so the purge never counts any.
StatusOr<std::shared_ptr<Store>> open(const Options& options);

// From a URI: sqlite:PATH?leases=local|shared&busy_timeout_ms=N&synchronous=normal|full&cache_mib=N;
// every parameter left out keeps its Options default. Returns kInvalidArgument for an
// unknown parameter or a bad value, and open()'s errors.
StatusOr<std::shared_ptr<Store>> open(const StoreUri& uri);

// The Options of such a URI, without opening anything: open(uri) is open(parse_uri(uri)).
StatusOr<Options> parse_uri(const StoreUri& uri);

// The connection of the open transaction in transactional mode: the handler writes
// its own tables through it (plain SQL, no BEGIN/COMMIT). Null if ctx carries no
// SQLite transaction.
sqlite3* connection(const HandlerContext& ctx);

// The schema version this build writes.
inline constexpr int kSchemaVersion = 4;

}  // namespace idem::sqlite

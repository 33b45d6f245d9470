// The idem tables inside an SQLite file, internal to idem::sqlite.
//
//   idem_meta(key TEXT PRIMARY KEY, value)          'schema_version' → kSchemaVersion
//   idem_records(id BLOB PRIMARY KEY, state, owner, lease_until_ms, fingerprint,
//                result, retries, expires_ms) WITHOUT ROWID
//   no secondary index: purge_expired scans the primary key in rotation. An older
//   file's idem_records_expires index is dropped at open.
// Version 2 adds:
//   idem_entities(key BLOB PRIMARY KEY, revision, version, state BLOB) WITHOUT ROWID
//     one row per entity key that was ever written; no row = revision 0. version holds
//     the uint64 with the same bits as the INTEGER; state is empty when none.
//   idem_buffer(key BLOB, version, id BLOB, message BLOB, buffered_ns,
//               PRIMARY KEY(key, version)) WITHOUT ROWID
//     the reorder buffer; buffered_ns is buffered_at in ns since the Unix epoch;
//     version as above (so versions >= 2^63 are negative and come
//     after the others in unsigned order: readers order them explicitly).
//   idem_buffer_totals(one = 1, count, bytes)
//     one row: the entries and BufferEntry::bytes() in idem_buffer, updated in the
//     transaction that changes idem_buffer, so that buffer_put checks its limits
//     without counting the table.
// Version 4 adds (version 3 had an idem_outbox of another layout: rows in commit
// order, kept until expiry once sent, with a partial index of the unsent ones):
//   idem_outbox(incoming BLOB, position, id BLOB, destination BLOB, body BLOB,
//               headers BLOB, created_ms, PRIMARY KEY(incoming, position))
//               WITHOUT ROWID
//     the transactional outbox's unsent entries: one row per outgoing message,
//     inserted by the commit of its incoming message and deleted when it is marked
//     sent (nothing reads a sent entry). The table stays as small as the backlog, so
//     in the steady state a commit's insert and the deletion of the entries sent
//     before it touch one page. headers is idem::encode_headers' form. A version-3
//     file's unsent rows move into it at open; its sent rows are dropped.
// An older file gets the later tables at open, in the transaction that checks it.
//
// Record states (column `state`): see RowState. Other tables in the file are the
// user's (transactional mode) and are never touched.
#pragma once

#include <sqlite3.h>

#include <string>

#include "idem/status.hpp"

namespace idem::sqlite::detail {

enum RowState : int {
  kRowPending = 0,     // only a retry count is kept, until expires_ms
  kRowInProgress = 1,  // leases=shared only: owner holds the lease until lease_until_ms
  kRowCompleted = 2,   // done until expires_ms
  kRowDeadLettered = 3,
};

// Creates the idem tables if the file has no idem_meta, else checks that they are
// ours and of a version this build reads, upgrading an older file to kSchemaVersion.
// All in one write transaction. REQUIRES: no open transaction on db.
// Returns kDataLoss for a foreign idem_meta, idem_records or later table (or a file
// missing one of its version), kFailedPrecondition for a newer schema version, or the
// SQLite error (e.g. kUnavailable when locked).
Status ensure_schema(sqlite3* db, const std::string& path);

}  // namespace idem::sqlite::detail

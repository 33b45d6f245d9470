// The idem tables inside an SQLite file, internal to idem::sqlite.
//
//   idem_meta(key TEXT PRIMARY KEY, value)          'schema_version' → kSchemaVersion
//   idem_records(id BLOB PRIMARY KEY, state, owner, lease_until_ms, fingerprint,
//                result, retries, expires_ms) WITHOUT ROWID
//   no secondary index: purge_expired scans the primary key in rotation. An older
//   file's idem_records_expires index is dropped at open.
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
// ours and of a version this build reads. REQUIRES: no open transaction on db.
// Returns kDataLoss for a foreign idem_meta or idem_records, kFailedPrecondition for a
// newer schema version, or the SQLite error (e.g. kUnavailable when locked).
Status ensure_schema(sqlite3* db, const std::string& path);

}  // namespace idem::sqlite::detail

#include "schema.hpp"

#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/sqlite_store.hpp"
#include "statement.hpp"

namespace idem::sqlite::detail {
namespace {

constexpr std::string_view kCreateV1 =
    "CREATE TABLE idem_meta(key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;"
    "CREATE TABLE idem_records("
    "  id BLOB PRIMARY KEY NOT NULL,"
    "  state INTEGER NOT NULL,"
    "  owner BLOB,"
    "  lease_until_ms INTEGER,"
    "  fingerprint INTEGER,"
    "  result BLOB,"
    "  retries INTEGER NOT NULL DEFAULT 0,"
    "  expires_ms INTEGER NOT NULL"
    ") WITHOUT ROWID;";
// The tables version 2 adds: entity records, the reorder buffer and its totals.
constexpr std::string_view kCreateV2 =
    "CREATE TABLE idem_entities("
    "  key BLOB PRIMARY KEY NOT NULL,"
    "  revision INTEGER NOT NULL,"
    "  version INTEGER NOT NULL,"
    "  state BLOB NOT NULL"
    ") WITHOUT ROWID;"
    "CREATE TABLE idem_buffer("
    "  key BLOB NOT NULL,"
    "  version INTEGER NOT NULL,"
    "  id BLOB NOT NULL,"
    "  message BLOB NOT NULL,"
    "  buffered_ns INTEGER NOT NULL,"
    "  PRIMARY KEY(key, version)"
    ") WITHOUT ROWID;"
    "CREATE TABLE idem_buffer_totals("
    "  one INTEGER PRIMARY KEY NOT NULL CHECK (one = 1),"
    "  count INTEGER NOT NULL,"
    "  bytes INTEGER NOT NULL"
    ");"
    "INSERT INTO idem_buffer_totals(one, count, bytes) VALUES(1, 0, 0);";
// The table of the transactional outbox (version 4; version 3 had another layout):
// the unsent entries only, clustered by (incoming, position). A commit inserts its
// entries and marking them sent deletes them, so the table stays as small as the
// backlog: in the steady state one page, which the commit's insert and the deletion
// of the previous commit's sent entries share.
constexpr std::string_view kCreateOutbox =
    "CREATE TABLE idem_outbox("
    "  incoming BLOB NOT NULL,"
    "  position INTEGER NOT NULL,"
    "  id BLOB NOT NULL,"
    "  destination BLOB NOT NULL,"
    "  body BLOB NOT NULL,"
    "  headers BLOB NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  PRIMARY KEY(incoming, position)"
    ") WITHOUT ROWID;";
// Version 3 → 4: the unsent entries of the old table (rows in commit order, expires_ms
// NULL while unsent, a partial index of those) move to the new one; the sent ones
// are dropped (nothing reads them). A later row of the same (incoming, position)
// replaces an earlier one, as a later commit of the id does.
constexpr std::string_view kRenameOutboxV3 =
    "ALTER TABLE idem_outbox RENAME TO idem_outbox_v3;"
    "DROP INDEX IF EXISTS idem_outbox_unsent;";
constexpr std::string_view kMoveOutboxV3 =
    "INSERT OR REPLACE INTO idem_outbox(incoming, position, id, destination, body, headers, created_ms)"
    " SELECT incoming, position, id, destination, body, headers, created_ms FROM idem_outbox_v3"
    " WHERE expires_ms IS NULL ORDER BY seq;"
    "DROP TABLE idem_outbox_v3;";
// An index on expires_ms that files written before the rotating purge scan carry: it
// costs a second b-tree write per record and nothing reads it any more.
constexpr std::string_view kHasExpiresIndex =
    "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'idem_records_expires'"
    " AND tbl_name = 'idem_records'";
constexpr std::string_view kDropExpiresIndex = "DROP INDEX idem_records_expires";

// Runs one statement of SQL text (open-time only). Returns its SQLite result code.
int exec(sqlite3* db, const char* sql) { return sqlite3_exec(db, sql, nullptr, nullptr, nullptr); }

// Column names of `table`, or an error.
StatusOr<std::set<std::string>> columns(sqlite3* db, const std::string& path, const std::string& table) {
  Statement s;
  if (int rc = s.prepare(db, "SELECT name FROM pragma_table_info(?1)"); rc != SQLITE_OK)
    return sqlite_status(rc, db, "reading the layout", path);
  Use u(s);
  sqlite3_bind_text(s.get(), 1, table.c_str(), -1, SQLITE_TRANSIENT);
  std::set<std::string> out;
  int rc;
  while ((rc = u.step()) == SQLITE_ROW) out.insert(u.column_blob(0));
  if (rc != SQLITE_DONE) return sqlite_status(rc, db, "reading the layout", path);
  return out;
}

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Drops the old expiry index on idem_records, if the file has one. REQUIRES: inside a
// write transaction.
Status drop_expires_index(sqlite3* db, const std::string& path) {
  bool present = false;
  {
    Statement s;
    if (int rc = s.prepare(db, kHasExpiresIndex); rc != SQLITE_OK)
      return sqlite_status(rc, db, "reading the layout", path);
    Use u(s);
    const int rc = u.step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sqlite_status(rc, db, "reading the layout", path);
    present = rc == SQLITE_ROW;
  }
  if (!present) return ok_status();
  if (int rc = exec(db, std::string(kDropExpiresIndex).c_str()); rc != SQLITE_OK)
    return sqlite_status(rc, db, "dropping the unused expiry index", path);
  return ok_status();
}

// Returns kDataLoss unless `table` has exactly the columns `expected`.
Status check_columns(const std::string& path, const std::string& table, const std::set<std::string>& found,
                     const std::set<std::string>& expected) {
  if (found == expected) return ok_status();
  return data_loss("sqlite: " + path + " has a table " + table + " of a foreign layout (columns: " + join(found) +
                   "; idem expects " + join(expected) + ")");
}

const std::set<std::string>& records_columns() {
  static const std::set<std::string> c = {"id",          "state",  "owner",   "lease_until_ms",
                                          "fingerprint", "result", "retries", "expires_ms"};
  return c;
}

// The tables of version 2, each with its columns.
const std::vector<std::pair<std::string, std::set<std::string>>>& v2_tables() {
  static const std::vector<std::pair<std::string, std::set<std::string>>> t = {
      {"idem_entities", {"key", "revision", "version", "state"}},
      {"idem_buffer", {"key", "version", "id", "message", "buffered_ns"}},
      {"idem_buffer_totals", {"one", "count", "bytes"}},
  };
  return t;
}

const std::set<std::string>& outbox_columns() {
  static const std::set<std::string> c = {"incoming", "position", "id", "destination", "body", "headers", "created_ms"};
  return c;
}

// The columns of version 3's idem_outbox.
const std::set<std::string>& outbox_v3_columns() {
  static const std::set<std::string> c = {"seq",  "incoming", "position",   "id",        "destination",
                                          "body", "headers",  "created_ms", "expires_ms"};
  return c;
}

Status write_version(sqlite3* db, const std::string& path, const char* sql) {
  if (int rc = exec(db, sql); rc != SQLITE_OK) return sqlite_status(rc, db, "writing the schema version", path);
  return ok_status();
}

// Adds the tables of version 2 to a version-1 file and records version 2. A file of
// version 1 has none of them: any such table is someone else's. REQUIRES: inside the
// write transaction that checked the file.
Status upgrade_to_v2(sqlite3* db, const std::string& path) {
  for (const auto& [table, cols] : v2_tables()) {
    auto found = columns(db, path, table);
    if (!found.ok()) return found.status();
    if (!found->empty())
      return data_loss("sqlite: " + path + " is of idem sqlite schema version 1 but already has a table " + table +
                       ": not a file idem wrote");
  }
  if (int rc = exec(db, std::string(kCreateV2).c_str()); rc != SQLITE_OK)
    return sqlite_status(rc, db, "upgrading to schema version 2", path);
  return write_version(db, path, "UPDATE idem_meta SET value = 2 WHERE key = 'schema_version'");
}

// Adds the outbox table of version 4 to a version-2 file and records version 4.
// REQUIRES: inside the write transaction that checked the file.
Status upgrade_v2_to_v4(sqlite3* db, const std::string& path) {
  auto found = columns(db, path, "idem_outbox");
  if (!found.ok()) return found.status();
  if (!found->empty())
    return data_loss("sqlite: " + path +
                     " is of idem sqlite schema version 2 but already has a table idem_outbox: not a file idem wrote");
  if (int rc = exec(db, std::string(kCreateOutbox).c_str()); rc != SQLITE_OK)
    return sqlite_status(rc, db, "upgrading to schema version 4", path);
  return write_version(db, path, "UPDATE idem_meta SET value = 4 WHERE key = 'schema_version'");
}

// Checks that a file of `version` (3 or 4) has the idem_outbox of that version.
Status check_outbox(sqlite3* db, const std::string& path, std::int64_t version) {
  auto found = columns(db, path, "idem_outbox");
  if (!found.ok()) return found.status();
  if (found->empty())
    return data_loss("sqlite: " + path + " is of idem sqlite schema version " + std::to_string(version) +
                     " but has no table idem_outbox");
  return check_columns(path, "idem_outbox", *found, version == 3 ? outbox_v3_columns() : outbox_columns());
}

// Moves a version-3 file's unsent outbox entries to the layout of version 4 and
// records version 4. REQUIRES: inside the write transaction that checked the file.
Status upgrade_v3_to_v4(sqlite3* db, const std::string& path) {
  if (Status s = check_outbox(db, path, 3); !s.ok()) return s;
  auto taken = columns(db, path, "idem_outbox_v3");
  if (!taken.ok()) return taken.status();
  if (!taken->empty()) return data_loss("sqlite: " + path + " has a table idem_outbox_v3: not a file idem wrote");
  const std::string sql = std::string(kRenameOutboxV3) + std::string(kCreateOutbox) + std::string(kMoveOutboxV3);
  if (int rc = exec(db, sql.c_str()); rc != SQLITE_OK)
    return sqlite_status(rc, db, "upgrading to schema version 4", path);
  return write_version(db, path, "UPDATE idem_meta SET value = 4 WHERE key = 'schema_version'");
}

// Checks the tables of a version-2 file and its buffer totals row.
Status check_v2(sqlite3* db, const std::string& path) {
  for (const auto& [table, cols] : v2_tables()) {
    auto found = columns(db, path, table);
    if (!found.ok()) return found.status();
    if (found->empty())
      return data_loss("sqlite: " + path + " is of idem sqlite schema version 2 but has no table " + table);
    if (Status s = check_columns(path, table, *found, cols); !s.ok()) return s;
  }
  Statement s;
  if (int rc = s.prepare(db, "SELECT count(*) FROM idem_buffer_totals WHERE one = 1"); rc != SQLITE_OK)
    return sqlite_status(rc, db, "reading the layout", path);
  Use u(s);
  if (int rc = u.step(); rc != SQLITE_ROW) return sqlite_status(rc, db, "reading the layout", path);
  if (u.column_i64(0) != 1)
    return data_loss("sqlite: " + path + " has a table idem_buffer_totals without its totals row");
  return ok_status();
}

// REQUIRES: inside a write transaction.
Status check_or_create(sqlite3* db, const std::string& path) {
  auto meta = columns(db, path, "idem_meta");
  if (!meta.ok()) return meta.status();
  auto records = columns(db, path, "idem_records");
  if (!records.ok()) return records.status();
  if (meta->empty()) {
    if (!records->empty())
      return data_loss("sqlite: " + path + " has a table idem_records but no idem_meta: not a file idem created");
    std::vector<std::string> later = {"idem_outbox"};
    for (const auto& t : v2_tables()) later.push_back(t.first);
    for (const auto& table : later) {
      auto found = columns(db, path, table);
      if (!found.ok()) return found.status();
      if (!found->empty())
        return data_loss("sqlite: " + path + " has a table " + table + " but no idem_meta: not a file idem created");
    }
    if (int rc = exec(db, (std::string(kCreateV1) + std::string(kCreateV2) + std::string(kCreateOutbox)).c_str());
        rc != SQLITE_OK)
      return sqlite_status(rc, db, "creating the idem tables", path);
    const std::string insert =
        "INSERT INTO idem_meta(key, value) VALUES('schema_version', " + std::to_string(kSchemaVersion) + ")";
    return write_version(db, path, insert.c_str());
  }
  if (*meta != std::set<std::string>{"key", "value"})
    return data_loss("sqlite: " + path + " has a table idem_meta of a foreign layout (columns: " + join(*meta) +
                     "; idem expects key, value)");
  Statement s;
  if (int rc = s.prepare(db, "SELECT value FROM idem_meta WHERE key = 'schema_version'"); rc != SQLITE_OK)
    return sqlite_status(rc, db, "reading the schema version", path);
  std::int64_t version = 0;
  {
    Use u(s);
    const int rc = u.step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sqlite_status(rc, db, "reading the schema version", path);
    if (rc == SQLITE_DONE || sqlite3_column_type(s.get(), 0) != SQLITE_INTEGER)
      return data_loss("sqlite: " + path + " has a table idem_meta without an integer schema_version");
    version = u.column_i64(0);
  }
  if (version > kSchemaVersion)
    return failed_precondition("sqlite: " + path + " was written by idem sqlite schema version " +
                               std::to_string(version) + ", newer than version " + std::to_string(kSchemaVersion) +
                               " that this build reads; upgrade idem to open it");
  if (version < 1) return data_loss("sqlite: " + path + " has an invalid schema version " + std::to_string(version));
  if (*records != records_columns())
    return data_loss("sqlite: " + path + " has a table idem_records of a foreign layout (columns: " + join(*records) +
                     ")");
  if (version == 1) {
    if (Status up = upgrade_to_v2(db, path); !up.ok()) return up;
    return upgrade_v2_to_v4(db, path);
  }
  if (Status v2 = check_v2(db, path); !v2.ok()) return v2;
  if (version == 2) return upgrade_v2_to_v4(db, path);
  if (version == 3) return upgrade_v3_to_v4(db, path);
  return check_outbox(db, path, version);
}

}  // namespace

Status ensure_schema(sqlite3* db, const std::string& path) {
  if (int rc = exec(db, "BEGIN IMMEDIATE"); rc != SQLITE_OK) return sqlite_status(rc, db, "opening", path);
  Status s = check_or_create(db, path);
  if (s.ok()) s = drop_expires_index(db, path);
  if (s.ok()) {
    if (int rc = exec(db, "COMMIT"); rc != SQLITE_OK) s = sqlite_status(rc, db, "creating the idem tables", path);
  }
  if (!s.ok()) (void)exec(db, "ROLLBACK");
  return s;
}

}  // namespace idem::sqlite::detail

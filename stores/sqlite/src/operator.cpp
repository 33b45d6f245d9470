// The operator tools of the SQLite store: count_records, remove_record, remove_entity
// (store.hpp). Their statements are prepared per call: none is on a hot path.
#include <cstdint>
#include <optional>
#include <string>

#include "schema.hpp"
#include "sqlite_store_impl.hpp"

namespace idem::sqlite::detail {
namespace {

// Each row's state at ?1 = now, as inspect() reports it from the row alone (-1: expired,
// else a RowState), with how many rows are in it.
constexpr std::string_view kCountRows =
    "SELECT CASE WHEN state >= 2 AND expires_ms > ?1 THEN state"
    " WHEN state = 1 AND lease_until_ms > ?1 THEN 1"
    " WHEN retries > 0 AND expires_ms > ?1 THEN 0 ELSE -1 END, count(*) FROM idem_records GROUP BY 1";
constexpr std::string_view kDeleteEntity = "DELETE FROM idem_entities WHERE key = ?1";
constexpr std::string_view kDeleteKeyBuffer =
    "DELETE FROM idem_buffer WHERE key = ?1 RETURNING length(key) + length(id) + length(message)";

constexpr int kExpired = -1;

std::size_t& slot(RecordCounts& c, std::int64_t category) {
  switch (category) {
    case kRowPending:
      return c.pending;
    case kRowInProgress:
      return c.in_progress;
    case kRowCompleted:
      return c.completed;
    case kRowDeadLettered:
      return c.dead_lettered;
    default:
      return c.expired;
  }
}

}  // namespace

Status SqliteStore::prepare_once(Statement& s, std::string_view sql) {
  const int rc = s.prepare(conn_.db, sql);
  return rc == SQLITE_OK ? ok_status() : error(rc, "preparing an operator statement for");
}

StatusOr<RecordCounts> SqliteStore::count_records(TimePoint t) {
  const std::int64_t now = to_unix_ms(t);
  std::lock_guard lock(mu_);
  Statement count;
  if (Status s = prepare_once(count, kCountRows); !s.ok()) return s;
  RecordCounts counts;
  {
    Use u(count);
    u.i64(1, now);
    int rc = SQLITE_DONE;
    while ((rc = u.step()) == SQLITE_ROW) slot(counts, u.column_i64(0)) += static_cast<std::size_t>(u.column_i64(1));
    if (rc != SQLITE_DONE) return error(rc, "counting the records of");
  }
  // leases=local: a live lease makes its id in progress unless the row is done.
  for (const auto& [id, lease] : leases_) {
    if (lease.until_ms <= now) continue;
    auto row = read_row(id);
    if (!row.ok()) return row.status();
    if (const auto& r = *row) {
      const bool live = r->expires_ms > now;
      if (live && r->state >= kRowCompleted) continue;  // done wins over a stale lease
      // The row was counted above as pending (a live retry count) or expired.
      --slot(counts, live && r->retries > 0 ? kRowPending : kExpired);
    }
    ++counts.in_progress;
  }
  return counts;
}

StatusOr<bool> SqliteStore::remove_record(std::string_view id, TimePoint now) {
  if (id.empty()) return invalid_argument("remove_record: empty id");
  std::lock_guard lock(mu_);
  auto before = inspect(id, now);
  if (!before.ok()) return before.status();
  WriteScope w(*this);
  if (Status s = w.start(); !s.ok()) return s;
  {
    Use u(delete_row_);
    u.blob(1, id);
    if (int rc = u.step(); rc != SQLITE_DONE) return error(rc, "removing a record from");
  }
  if (Status s = w.finish(); !s.ok()) return s;
  forget_lease(id);
  return before->has_value();
}

StatusOr<bool> SqliteStore::remove_entity(std::string_view key) {
  if (key.empty()) return invalid_argument("remove_entity: empty key");
  std::lock_guard lock(mu_);
  Statement drop_record, drop_buffer;
  if (Status s = prepare_once(drop_record, kDeleteEntity); !s.ok()) return s;
  if (Status s = prepare_once(drop_buffer, kDeleteKeyBuffer); !s.ok()) return s;
  WriteScope w(*this);
  if (Status s = w.start(); !s.ok()) return s;
  {
    Use u(drop_record);
    u.blob(1, key);
    if (int rc = u.step(); rc != SQLITE_DONE) return error(rc, "removing an entity record from");
  }
  const bool had_record = sqlite3_changes(conn_.db) > 0;
  std::int64_t count = 0, bytes = 0;
  {
    Use u(drop_buffer);
    u.blob(1, key);
    int rc = SQLITE_DONE;
    while ((rc = u.step()) == SQLITE_ROW) {
      ++count;
      bytes += u.column_i64(0);
    }
    if (rc != SQLITE_DONE) return error(rc, "removing buffered messages from");
  }
  if (count > 0) {
    Use t(totals_add_);
    t.i64(1, -count).i64(2, -bytes);
    if (int rc = t.step(); rc != SQLITE_DONE) return error(rc, "updating the buffer totals in");
  }
  if (Status s = w.finish(); !s.ok()) return s;
  return had_record || count > 0;
}

}  // namespace idem::sqlite::detail

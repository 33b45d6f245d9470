// Entity records and the reorder buffer of the SQLite store (entity.hpp).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "sqlite_store_impl.hpp"

namespace idem::sqlite::detail {
namespace {

constexpr std::string_view kSelectEntity = "SELECT revision, version, state FROM idem_entities WHERE key = ?1";
// The first write of a key (expect_revision 0); changes() == 0: the key has a record.
constexpr std::string_view kInsertEntity =
    "INSERT OR IGNORE INTO idem_entities(key, revision, version, state) VALUES(?1, 1, coalesce(?2, 0), coalesce(?3, "
    "x''))";
// A later write; changes() == 0: the revision moved (or the key has no record).
constexpr std::string_view kUpdateEntity =
    "UPDATE idem_entities SET revision = revision + 1, version = coalesce(?3, version), state = coalesce(?4, state)"
    " WHERE key = ?1 AND revision = ?2";
// A staged record (commit_batch), its revision checked in the same write transaction.
constexpr std::string_view kPutEntity =
    "INSERT OR REPLACE INTO idem_entities(key, revision, version, state) VALUES(?1, ?2, ?3, ?4)";
constexpr std::string_view kBufferGet = "SELECT id FROM idem_buffer WHERE key = ?1 AND version = ?2";
// Entries of key ?1, counted up to ?2 (a range of the primary key, never more rows).
constexpr std::string_view kBufferKeyCount = "SELECT count(*) FROM (SELECT 1 FROM idem_buffer WHERE key = ?1 LIMIT ?2)";
constexpr std::string_view kBufferInsert =
    "INSERT INTO idem_buffer(key, version, id, message, buffered_ns) VALUES(?1, ?2, ?3, ?4, ?5)";
constexpr std::string_view kBufferDelete =
    "DELETE FROM idem_buffer WHERE key = ?1 AND version = ?2 RETURNING length(key) + length(id) + length(message)";
// Versions are stored with the bits of the uint64: [0, 2^63) as non-negative INTEGERs,
// [2^63, 2^64) as negative ones. Unsigned order is the first range, then the second.
constexpr std::string_view kBufferLow =
    "SELECT version, id, message, buffered_ns FROM idem_buffer WHERE key = ?1 AND version >= 0"
    " ORDER BY version LIMIT ?2";
constexpr std::string_view kBufferHigh =
    "SELECT version, id, message, buffered_ns FROM idem_buffer WHERE key = ?1 AND version < 0"
    " ORDER BY version LIMIT ?2";
constexpr std::string_view kBufferKeys =
    "SELECT key, count(*), coalesce(min(CASE WHEN version >= 0 THEN version END), min(version)), min(buffered_ns)"
    " FROM idem_buffer GROUP BY key ORDER BY 4 LIMIT ?1";
constexpr std::string_view kTotals = "SELECT count, bytes FROM idem_buffer_totals WHERE one = 1";
constexpr std::string_view kTotalsAdd =
    "UPDATE idem_buffer_totals SET count = count + ?1, bytes = bytes + ?2 WHERE one = 1";

std::int64_t bits(std::uint64_t v) { return static_cast<std::int64_t>(v); }
std::uint64_t unbits(std::int64_t v) { return static_cast<std::uint64_t>(v); }

// A count or size for a LIMIT or a comparison with an INTEGER column.
std::int64_t clamp(std::size_t n) {
  return n > static_cast<std::size_t>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(n);
}

std::int64_t to_ns(TimePoint t) { return t.time_since_epoch().count(); }
TimePoint from_ns(std::int64_t ns) { return TimePoint(std::chrono::nanoseconds(ns)); }

Status revision_moved(std::uint64_t stored, std::uint64_t expected) {
  return aborted("entity write: the record's revision is " + std::to_string(stored) + ", not " +
                 std::to_string(expected) + " (another writer changed it)");
}

}  // namespace

std::vector<std::pair<Statement*, std::string_view>> SqliteStore::entity_statements() {
  return {
      {&select_entity_, kSelectEntity}, {&insert_entity_, kInsertEntity}, {&update_entity_, kUpdateEntity},
      {&put_entity_, kPutEntity},       {&buffer_get_, kBufferGet},       {&buffer_key_count_, kBufferKeyCount},
      {&buffer_insert_, kBufferInsert}, {&buffer_delete_, kBufferDelete}, {&buffer_low_, kBufferLow},
      {&buffer_high_, kBufferHigh},     {&buffer_keys_, kBufferKeys},     {&totals_, kTotals},
      {&totals_add_, kTotalsAdd},
  };
}

// --- entity records --------------------------------------------------------------

StatusOr<EntityRecord> SqliteStore::read_entity_one(std::string_view key) {
  Use u(select_entity_);
  u.blob(1, key);
  const int rc = u.step();
  if (rc == SQLITE_DONE) return EntityRecord{};
  if (rc != SQLITE_ROW) return error(rc, "reading an entity record in");
  EntityRecord r;
  r.revision = unbits(u.column_i64(0));
  r.version = unbits(u.column_i64(1));
  r.state = u.column_blob(2);
  return r;
}

Status SqliteStore::check_staged_revision(const EntityWrite& w, EntityStaging& st) {
  auto it = st.find(w.key);
  if (it == st.end()) {
    auto now = read_entity_one(w.key);
    if (!now.ok()) return now.status();
    it = st.emplace(w.key, StagedEntity{std::move(now).value(), false}).first;
  }
  if (it->second.record.revision == w.expect_revision) return ok_status();
  return revision_moved(it->second.record.revision, w.expect_revision);
}

Status SqliteStore::stage_entity_write(const EntityWrite& w, EntityStaging& st) {
  StagedEntity& staged = st[w.key];
  staged.written = true;
  apply_entity_write(w, staged.record);
  if (w.unbuffer) return remove_buffered(w.key, *w.unbuffer);
  return ok_status();
}

Status SqliteStore::write_staged(const EntityStaging& st) {
  for (const auto& [key, staged] : st) {
    if (!staged.written) continue;
    const EntityRecord& r = staged.record;
    Use u(put_entity_);
    u.blob(1, key).i64(2, bits(r.revision)).i64(3, bits(r.version)).blob(4, std::string_view(r.state));
    if (int rc = u.step(); rc != SQLITE_DONE) return error(rc, "writing an entity record in");
  }
  return ok_status();
}

Status SqliteStore::write_entity_one(const EntityWrite& w) {
  {
    const bool first = w.expect_revision == 0;
    Use u(first ? insert_entity_ : update_entity_);
    const int at = first ? 2 : 3;  // the first of the version and state parameters
    u.blob(1, w.key);
    if (!first) u.i64(2, bits(w.expect_revision));
    if (w.version) u.i64(at, bits(*w.version));
    u.blob(at + 1, w.state);
    if (int rc = u.step(); rc != SQLITE_DONE) return error(rc, "writing an entity record in");
  }
  if (sqlite3_changes(conn_.db) == 0) {
    auto now = read_entity_one(w.key);
    if (!now.ok()) return now.status();
    return revision_moved(now->revision, w.expect_revision);
  }
  if (w.unbuffer) return remove_buffered(w.key, *w.unbuffer);
  return ok_status();
}

StatusOr<EntityRecord> SqliteStore::read_entity(std::string_view key) {
  std::lock_guard lock(mu_);
  return read_entity_one(key);
}

Status SqliteStore::write_entity(const EntityWrite& w) {
  if (Status s = check_entity_write(w, "write_entity"); !s.ok()) return s;
  std::lock_guard lock(mu_);
  WriteScope scope(*this);
  if (Status s = scope.start(); !s.ok()) return s;
  if (Status s = write_entity_one(w); !s.ok()) return s;
  return scope.finish();
}

// --- the reorder buffer ----------------------------------------------------------

Status SqliteStore::remove_buffered(std::string_view key, std::uint64_t version) {
  std::int64_t bytes = -1;  // -1: no entry
  {
    Use u(buffer_delete_);
    u.blob(1, key).i64(2, bits(version));
    int rc = u.step();
    if (rc == SQLITE_ROW) {
      bytes = u.column_i64(0);
      rc = u.step();
    }
    if (rc != SQLITE_DONE) return error(rc, "removing a buffered message from");
  }
  if (bytes < 0) return ok_status();
  Use t(totals_add_);
  t.i64(1, -1).i64(2, -bytes);
  if (int rc = t.step(); rc != SQLITE_DONE) return error(rc, "updating the buffer totals in");
  return ok_status();
}

Status SqliteStore::buffer_put_one(const BufferPut& p) {
  {
    Use g(buffer_get_);
    g.blob(1, p.key).i64(2, bits(p.version));
    const int rc = g.step();
    if (rc == SQLITE_ROW) {
      if (g.column_blob(0) == p.id) return ok_status();
      return failed_precondition("buffer_put: version " + std::to_string(p.version) +
                                 " of this key is already buffered with another message id");
    }
    if (rc != SQLITE_DONE) return error(rc, "reading the reorder buffer in");
  }
  {
    Use c(buffer_key_count_);
    c.blob(1, p.key).i64(2, clamp(p.limits.per_key));
    const int rc = c.step();
    if (rc != SQLITE_ROW) return error(rc, "counting the reorder buffer in");
    if (static_cast<std::uint64_t>(c.column_i64(0)) >= p.limits.per_key)
      return resource_exhausted("reorder buffer limit per_key=" + std::to_string(p.limits.per_key) +
                                " reached for this key");
  }
  const std::size_t entry = p.key.size() + p.id.size() + p.message.size();
  {
    Use t(totals_);
    const int rc = t.step();
    if (rc != SQLITE_ROW) return error(rc, "reading the buffer totals in");
    const auto count = static_cast<std::uint64_t>(t.column_i64(0));
    const auto bytes = static_cast<std::uint64_t>(t.column_i64(1));
    if (count >= p.limits.total)
      return resource_exhausted("reorder buffer limit total=" + std::to_string(p.limits.total) +
                                " reached (entries in the whole buffer)");
    if (entry > p.limits.total_bytes || bytes > p.limits.total_bytes - entry)
      return resource_exhausted("reorder buffer limit total_bytes=" + std::to_string(p.limits.total_bytes) +
                                " would be exceeded (the buffer holds " + std::to_string(bytes) +
                                " bytes, this entry " + std::to_string(entry) + ")");
  }
  {
    Use i(buffer_insert_);
    i.blob(1, p.key).i64(2, bits(p.version)).blob(3, p.id).blob(4, p.message).i64(5, to_ns(p.now));
    if (int rc = i.step(); rc != SQLITE_DONE) return error(rc, "buffering a message in");
  }
  Use t(totals_add_);
  t.i64(1, 1).i64(2, clamp(entry));
  if (int rc = t.step(); rc != SQLITE_DONE) return error(rc, "updating the buffer totals in");
  return ok_status();
}

Status SqliteStore::buffer_put(const BufferPut& p) { return buffer_put_batch(std::span<const BufferPut>(&p, 1))[0]; }

std::vector<Status> SqliteStore::buffer_put_batch(std::span<const BufferPut> puts) {
  std::vector<Status> out;
  out.reserve(puts.size());
  auto fail_all = [&](const Status& s) { return std::vector<Status>(puts.size(), s); };
  std::lock_guard lock(mu_);
  WriteScope scope(*this);
  if (Status s = scope.start(); !s.ok()) return fail_all(s);
  for (const BufferPut& p : puts) {
    Status s = check_buffer_put(p);
    // buffer_put_one answers a conflict or a limit before it writes anything.
    if (s.ok()) s = buffer_put_one(p);
    const StatusCode code = s.code();
    if (!s.ok() && code != StatusCode::kInvalidArgument && code != StatusCode::kFailedPrecondition &&
        code != StatusCode::kResourceExhausted)
      return fail_all(s);  // an error of SQLite: nothing of the batch is kept
    out.push_back(std::move(s));
  }
  if (Status s = scope.finish(); !s.ok()) return fail_all(s);
  return out;
}

Status SqliteStore::read_buffered(std::string_view key, bool high, std::size_t max, std::vector<BufferEntry>& out) {
  Use u(high ? buffer_high_ : buffer_low_);
  u.blob(1, key).i64(2, clamp(max));
  int rc;
  while ((rc = u.step()) == SQLITE_ROW) {
    BufferEntry e;
    e.key = std::string(key);
    e.version = unbits(u.column_i64(0));
    e.id = u.column_blob(1);
    e.message = u.column_blob(2);
    e.buffered_at = from_ns(u.column_i64(3));
    out.push_back(std::move(e));
  }
  return rc == SQLITE_DONE ? ok_status() : error(rc, "reading the reorder buffer in");
}

StatusOr<std::vector<BufferEntry>> SqliteStore::buffer_read(std::string_view key, std::size_t max) {
  std::vector<BufferEntry> out;
  if (max == 0) return out;
  std::lock_guard lock(mu_);
  // One read transaction, so that both ranges come from one snapshot.
  const bool outer = sqlite3_get_autocommit(conn_.db) != 0;
  if (outer) {
    if (Status s = run(begin_read_, "starting a read transaction on"); !s.ok()) return s;
  }
  Status s = read_buffered(key, false, max, out);
  if (s.ok() && out.size() < max) s = read_buffered(key, true, max - out.size(), out);
  if (outer && sqlite3_get_autocommit(conn_.db) == 0) (void)run(commit_, "ending a read transaction on");
  if (!s.ok()) return s;
  return out;
}

Status SqliteStore::buffer_remove(std::string_view key, std::uint64_t version) {
  std::lock_guard lock(mu_);
  WriteScope scope(*this);
  if (Status s = scope.start(); !s.ok()) return s;
  if (Status s = remove_buffered(key, version); !s.ok()) return s;
  return scope.finish();
}

StatusOr<BufferSummary> SqliteStore::buffer_summary(std::size_t max_keys) {
  BufferSummary out;
  std::lock_guard lock(mu_);
  const bool outer = sqlite3_get_autocommit(conn_.db) != 0;
  if (outer) {
    if (Status s = run(begin_read_, "starting a read transaction on"); !s.ok()) return s;
  }
  auto read = [&]() -> Status {
    {
      Use t(totals_);
      const int rc = t.step();
      if (rc != SQLITE_ROW) return error(rc, "reading the buffer totals in");
      out.count = static_cast<std::size_t>(t.column_i64(0));
      out.bytes = static_cast<std::size_t>(t.column_i64(1));
    }
    if (max_keys == 0 || out.count == 0) return ok_status();
    Use u(buffer_keys_);
    u.i64(1, clamp(max_keys));
    int rc;
    while ((rc = u.step()) == SQLITE_ROW) {
      BufferedKey k;
      k.key = u.column_blob(0);
      k.count = static_cast<std::size_t>(u.column_i64(1));
      k.lowest_version = unbits(u.column_i64(2));
      k.oldest_at = from_ns(u.column_i64(3));
      out.keys.push_back(std::move(k));
    }
    return rc == SQLITE_DONE ? ok_status() : error(rc, "summarising the reorder buffer in");
  };
  Status s = read();
  if (outer && sqlite3_get_autocommit(conn_.db) == 0) (void)run(commit_, "ending a read transaction on");
  if (!s.ok()) return s;
  return out;
}

}  // namespace idem::sqlite::detail

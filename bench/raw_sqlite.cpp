#include "raw_sqlite.hpp"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace idem::bench {
namespace {

[[noreturn]] void die(sqlite3* db, const std::string& what) {
  std::fprintf(stderr, "idem_bench_dedup: %s: %s\n", what.c_str(), db ? sqlite3_errmsg(db) : "out of memory");
  std::exit(2);
}

void exec(sqlite3* db, const std::string& sql) {
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) die(db, sql);
}

// An open connection with the benchmark's pragmas and the table created.
class RawDb {
 public:
  RawDb(const std::string& path, const RawOptions& o) : path_(path) {
    remove_database(path);
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
      die(db_, "open " + path);
    if (o.page_size > 0) exec(db_, "PRAGMA page_size=" + std::to_string(o.page_size));
    exec(db_, "PRAGMA journal_mode=WAL");
    exec(db_, "PRAGMA synchronous=NORMAL");
    exec(db_, "PRAGMA cache_size=-" + std::to_string(o.cache_mib * 1024));
    if (o.wal_autocheckpoint > 0) exec(db_, "PRAGMA wal_autocheckpoint=" + std::to_string(o.wal_autocheckpoint));
    exec(db_, o.table.create);
  }
  ~RawDb() {
    sqlite3_close_v2(db_);
    remove_database(path_);
  }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  sqlite3* db() const { return db_; }

  sqlite3_stmt* prepare(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr) != SQLITE_OK)
      die(db_, "prepare " + sql);
    return st;
  }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

constexpr std::int64_t kTtlMs = 7LL * 24 * 3600 * 1000;

std::int64_t expiry_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count() + kTtlMs;
}

// Runs st (bound to id, and ?2 to an expiry if it has one) to completion; returns the
// rows changed (0 or 1).
int step_insert(sqlite3* db, sqlite3_stmt* st, const std::string& id) {
  sqlite3_bind_text(st, 1, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
  if (sqlite3_bind_parameter_count(st) >= 2) sqlite3_bind_int64(st, 2, expiry_ms());
  if (sqlite3_step(st) != SQLITE_DONE) die(db, "insert");
  sqlite3_reset(st);
  return sqlite3_changes(db);
}

// The no-op handler the naive path calls, kept opaque to the optimiser.
const std::function<void(const Msg&)> noop_handler = [](const Msg&) {};

}  // namespace

RawTable idem_layout_table(bool with_expires_index) {
  RawTable t;
  t.create =
      "CREATE TABLE idem_records(id BLOB PRIMARY KEY NOT NULL, state INTEGER NOT NULL, owner BLOB,"
      " lease_until_ms INTEGER, fingerprint INTEGER, result BLOB, retries INTEGER NOT NULL DEFAULT 0,"
      " expires_ms INTEGER NOT NULL) WITHOUT ROWID;";
  if (with_expires_index) t.create += "CREATE INDEX idem_records_expires ON idem_records(expires_ms);";
  t.insert_or_ignore =
      "INSERT OR IGNORE INTO idem_records(id, state, owner, lease_until_ms, fingerprint, result, retries, expires_ms)"
      " VALUES(?1, 2, NULL, NULL, NULL, NULL, 0, ?2)";
  t.insert =
      "INSERT INTO idem_records(id, state, owner, lease_until_ms, fingerprint, result, retries, expires_ms)"
      " VALUES(?1, 2, NULL, NULL, NULL, NULL, 0, ?2)";
  t.select = "SELECT 1 FROM idem_records WHERE id = ?1";
  return t;
}

void remove_database(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((path + suffix).c_str());
}

PathResult run_raw_autocommit(const std::string& path, const Stream& s, const RawOptions& o) {
  RawDb db(path, o);
  sqlite3_stmt* ins = db.prepare(o.table.insert_or_ignore);
  PathResult r;
  Stopwatch sw;
  for (const Msg& m : s.messages) {
    if (step_insert(db.db(), ins, m.id) == 1)
      ++r.processed;
    else
      ++r.duplicates;
  }
  sw.stop_into(r);
  r.messages = s.messages.size();
  sqlite3_finalize(ins);
  return r;
}

PathResult run_raw_batched(const std::string& path, const Stream& s, const RawOptions& o) {
  RawDb db(path, o);
  sqlite3_stmt* ins = db.prepare(o.table.insert_or_ignore);
  sqlite3_stmt* begin = db.prepare("BEGIN");
  sqlite3_stmt* commit = db.prepare("COMMIT");
  auto run = [&](sqlite3_stmt* st, const char* what) {
    if (sqlite3_step(st) != SQLITE_DONE) die(db.db(), what);
    sqlite3_reset(st);
  };
  PathResult r;
  std::vector<const std::string*> ids;
  ids.reserve(o.batch);
  Stopwatch sw;
  const std::size_t n = s.messages.size();
  for (std::size_t i = 0; i < n; i += o.batch) {
    const std::size_t end = std::min(n, i + o.batch);
    ids.clear();
    for (std::size_t k = i; k < end; ++k) ids.push_back(&s.messages[k].id);
    if (o.sort_batch) std::sort(ids.begin(), ids.end(), [](auto* a, auto* b) { return *a < *b; });
    run(begin, "BEGIN");
    for (const std::string* id : ids) {
      if (step_insert(db.db(), ins, *id) == 1)
        ++r.processed;
      else
        ++r.duplicates;
    }
    run(commit, "COMMIT");
  }
  sw.stop_into(r);
  r.messages = n;
  sqlite3_finalize(ins);
  sqlite3_finalize(begin);
  sqlite3_finalize(commit);
  return r;
}

PathResult run_naive(const std::string& path, const Stream& s, const RawOptions& o) {
  RawDb db(path, o);
  sqlite3_stmt* sel = db.prepare(o.table.select);
  sqlite3_stmt* ins = db.prepare(o.table.insert);
  PathResult r;
  Stopwatch sw;
  for (const Msg& m : s.messages) {
    sqlite3_bind_text(sel, 1, m.id.data(), static_cast<int>(m.id.size()), SQLITE_STATIC);
    const int rc = sqlite3_step(sel);
    sqlite3_reset(sel);
    if (rc == SQLITE_ROW) {
      ++r.duplicates;
      continue;
    }
    if (rc != SQLITE_DONE) die(db.db(), "select");
    noop_handler(m);
    if (step_insert(db.db(), ins, m.id) != 1)
      ++r.other;
    else
      ++r.processed;
  }
  sw.stop_into(r);
  r.messages = s.messages.size();
  sqlite3_finalize(sel);
  sqlite3_finalize(ins);
  return r;
}

}  // namespace idem::bench

// `idem bench` on sqlite: the raw primitive is a prepared INSERT OR IGNORE into a
// one-column table, in a database of its own beside the store's file (PATH.raw-bench,
// removed afterwards), with idem::sqlite's default pragmas.
#include <sqlite3.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "bench_rows.hpp"
#include "idem/backend/store_uri.hpp"

namespace idem::cli {
namespace {

const std::function<void(const Msg&)> noop_handler = [](const Msg&) {};

void remove_database(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((path + suffix).c_str());
}

// A fresh database with the raw table and its statements; removed on destruction.
class RawSqlite {
 public:
  explicit RawSqlite(std::string path) : path_(std::move(path)) {
    remove_database(path_);
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
      fail("open " + path_);
    for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA cache_size=-65536",
                            "CREATE TABLE seen(id TEXT PRIMARY KEY) WITHOUT ROWID"})
      exec(sql);
    insert_ = prepare("INSERT OR IGNORE INTO seen(id) VALUES(?1)");
    plain_insert_ = prepare("INSERT INTO seen(id) VALUES(?1)");
    select_ = prepare("SELECT 1 FROM seen WHERE id = ?1");
  }
  ~RawSqlite() {
    for (sqlite3_stmt* st : {insert_, plain_insert_, select_}) sqlite3_finalize(st);
    sqlite3_close_v2(db_);
    remove_database(path_);
  }
  RawSqlite(const RawSqlite&) = delete;
  RawSqlite& operator=(const RawSqlite&) = delete;

  void exec(const char* sql) {
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(sql);
  }
  // INSERT OR IGNORE: true iff the id was new.
  bool insert_or_ignore(const std::string& id) { return run(insert_, id) == SQLITE_DONE && sqlite3_changes(db_) == 1; }
  // SELECT: true iff the id is present.
  bool contains(const std::string& id) { return run(select_, id) == SQLITE_ROW; }
  void insert(const std::string& id) {
    if (run(plain_insert_, id) != SQLITE_DONE) fail("insert");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("raw sqlite: " + what + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory"));
  }
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr) != SQLITE_OK) fail(sql);
    return st;
  }
  int run(sqlite3_stmt* st, const std::string& id) {
    sqlite3_bind_text(st, 1, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
    const int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) fail("step");
    return rc;
  }

  std::string path_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
  sqlite3_stmt* plain_insert_ = nullptr;
  sqlite3_stmt* select_ = nullptr;
};

// The raw database's path: beside the store's file.
std::string raw_path(const BenchSetup& s) {
  auto uri = StoreUri::parse(s.store_uri);
  const std::string base = uri.ok() && !uri->body.empty() ? uri->body : "/tmp/idem-bench.db";
  return base + ".raw-bench";
}

// raw: autocommit INSERT OR IGNORE per id; raw_batch: the same, chunk ids per transaction.
BenchRow inserts(const std::string& path, std::size_t chunk, const BenchSetup& s) {
  auto db = std::make_shared<RawSqlite>(raw_path(s));
  BenchRow row{path, chunk, nullptr, db};
  row.step = [d = db.get(), chunk](std::span<const Msg> ms, const Msg*, BenchCounts& c) {
    if (chunk > 1) d->exec("BEGIN");
    for (const Msg& m : ms) ++(d->insert_or_ignore(m.id) ? c.processed : c.duplicates);
    if (chunk > 1) d->exec("COMMIT");
  };
  return row;
}

// naive: SELECT, handler, INSERT, each statement autocommit.
BenchRow naive(const BenchSetup& s) {
  auto db = std::make_shared<RawSqlite>(raw_path(s));
  BenchRow row{"naive", 1, nullptr, db};
  row.step = [d = db.get()](std::span<const Msg> ms, const Msg*, BenchCounts& c) {
    for (const Msg& m : ms) {
      if (d->contains(m.id)) {
        ++c.duplicates;
        continue;
      }
      noop_handler(m);
      d->insert(m.id);
      ++c.processed;
    }
  };
  return row;
}

}  // namespace

std::vector<RowFactory> sqlite_rows(const BenchSetup& s) {
  return {[s] { return inserts("raw", 1, s); }, [s] { return inserts("raw_batch", s.batch, s); },
          [s] { return naive(s); }};
}

}  // namespace idem::cli

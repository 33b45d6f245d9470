// The SQLite rows of idem_bench_runtime (see bench_runtime.cpp): the floors every
// broker's idem row is compared with, and the transactional consumer those rows run.
#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <string>

#include "idem/sqlite_store.hpp"
#include "runtime_rows.hpp"

namespace idem::bench {
namespace {

constexpr const char* kEffectsSql =
    "CREATE TABLE IF NOT EXISTS effects(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, at_ms INTEGER)";

double sqlite_floor(std::size_t n, const std::string& path) {
  BenchDb d(path);
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    const std::string id = "floor-" + std::to_string(i);
    sqlite3_exec(d.db, "BEGIN", nullptr, nullptr, nullptr);
    d.exec_id("INSERT INTO seen(id) VALUES(?1)", id);
    d.exec_id("INSERT INTO effects(id, at_ms) VALUES(?1, 0)", id);
    sqlite3_exec(d.db, "COMMIT", nullptr, nullptr, nullptr);
  }
  return rate(n, Clock::now() - t0);
}

// The least SQLite can do for a transactional batch: one transaction per `batch`
// messages, and per message a savepoint, the dedup lookup and row and the effect row,
// with statements prepared once.
double sqlite_batch_floor(std::size_t n, std::size_t batch, const std::string& path) {
  BatchWriter w(path);
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    if (i % batch == 0) w.begin();
    w.add("bfloor-" + std::to_string(i));
    if (i % batch == batch - 1 || i + 1 == n) w.commit();
  }
  return rate(n, Clock::now() - t0);
}

}  // namespace

BenchDb::BenchDb(const std::string& path) {
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", nullptr, nullptr, nullptr);
  sqlite3_exec(db, kEffectsSql, nullptr, nullptr, nullptr);
  sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS seen(id TEXT PRIMARY KEY) WITHOUT ROWID", nullptr, nullptr, nullptr);
}

BenchDb::~BenchDb() { sqlite3_close(db); }

void BenchDb::exec_id(const char* sql, const std::string& id) {
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, sql, -1, &st, nullptr);
  sqlite3_bind_text(st, 1, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
  sqlite3_step(st);
  sqlite3_finalize(st);
}

bool BenchDb::seen(const std::string& id) {
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT 1 FROM seen WHERE id = ?1", -1, &st, nullptr);
  sqlite3_bind_text(st, 1, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
  const bool found = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return found;
}

double idem_rate(MessageSource& source, std::size_t n, std::size_t batch, const std::string& db, bool close_timed) {
  { BenchDb effects(db); }  // the effects table
  sqlite::Options so;
  so.path = db;
  ConsumerOptions o;
  o.store = sqlite::open(so).value();
  o.transactional = true;
  o.latency_metrics = false;
  // The handler prepares its statement once, on the store's connection (the store runs
  // one connection; handlers run one at a time on it).
  auto stmt = std::make_shared<sqlite3_stmt*>(nullptr);
  auto c = Consumer<Msg>::create(o, extractors(), [stmt](const Msg& m, HandlerContext& ctx) {
    if (*stmt == nullptr) {
      sqlite3_prepare_v2(sqlite::connection(ctx), "INSERT INTO effects(id, at_ms) VALUES(?1, 0)", -1, stmt.get(),
                         nullptr);
    }
    sqlite3_stmt* st = *stmt;
    sqlite3_bind_text(st, 1, m.id.data(), static_cast<int>(m.id.size()), SQLITE_STATIC);
    const int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? HandlerResult::ok() : HandlerResult::fail("insert");
  });
  RuntimeOptions rto;
  rto.workers = 2;
  rto.batch = batch;
  rto.max_messages = n;
  auto rt = Runtime<Msg>::create(rto, source, *c, decode).value();
  const auto t0 = Clock::now();
  (void)rt->run();
  if (close_timed) source.close();
  const double r = rate(n, Clock::now() - t0);
  if (!close_timed) source.close();
  sqlite3_finalize(*stmt);  // before the store closes its connection
  return r;
}

BatchWriter::BatchWriter(const std::string& path) : d_(path) {
  sqlite3_prepare_v2(d_.db, "SELECT 1 FROM seen WHERE id = ?1", -1, &find_, nullptr);
  sqlite3_prepare_v2(d_.db, "INSERT INTO seen(id) VALUES(?1)", -1, &seen_, nullptr);
  sqlite3_prepare_v2(d_.db, "INSERT INTO effects(id, at_ms) VALUES(?1, 0)", -1, &effect_, nullptr);
}

BatchWriter::~BatchWriter() {
  for (sqlite3_stmt* st : {find_, seen_, effect_}) sqlite3_finalize(st);
}

void BatchWriter::begin() { sqlite3_exec(d_.db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr); }

void BatchWriter::add(std::string_view id) {
  auto run = [&](sqlite3_stmt* st) {
    sqlite3_bind_text(st, 1, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
    const bool found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_reset(st);
    return found;
  };
  sqlite3_exec(d_.db, "SAVEPOINT m", nullptr, nullptr, nullptr);
  if (!run(find_)) {
    run(effect_);
    run(seen_);
  }
  sqlite3_exec(d_.db, "RELEASE m", nullptr, nullptr, nullptr);
}

void BatchWriter::commit() { sqlite3_exec(d_.db, "COMMIT", nullptr, nullptr, nullptr); }

void sqlite_rows(std::size_t n, std::size_t batch, const std::string& dir, std::vector<Row>& rows) {
  const std::filesystem::path d(dir);
  rows.push_back({"sqlite_txn_floor", "SQLite alone: one transaction per message, dedup row + effect row",
                  sqlite_floor(n, (d / "floor.db").string())});
  rows.push_back({"sqlite_batch_floor",
                  "SQLite alone: one transaction per b messages, a savepoint, lookup, dedup row "
                  "and effect row per message",
                  sqlite_batch_floor(n, batch, (d / "bfloor.db").string())});
}

}  // namespace idem::bench

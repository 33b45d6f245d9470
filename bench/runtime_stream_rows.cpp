// The Redis Streams rows of idem_bench_runtime (see bench_runtime.cpp).
#include <hiredis/hiredis.h>
#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "idem/redis_stream_source.hpp"
#include "idem/sqlite_store.hpp"
#include "runtime_rows.hpp"
#include "support/redis_server.hpp"

namespace idem::bench {
namespace {

constexpr const char* kEffectsSql =
    "CREATE TABLE IF NOT EXISTS effects(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, at_ms INTEGER)";

struct Db {
  sqlite3* db = nullptr;
  explicit Db(const std::string& path) {
    sqlite3_open(path.c_str(), &db);
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", nullptr, nullptr, nullptr);
    sqlite3_exec(db, kEffectsSql, nullptr, nullptr, nullptr);
    sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS seen(id TEXT PRIMARY KEY) WITHOUT ROWID", nullptr, nullptr, nullptr);
  }
  ~Db() { sqlite3_close(db); }
  void exec_id(const char* sql, const std::string& id) {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, sql, -1, &st, nullptr);
    sqlite3_bind_text(st, 1, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
    sqlite3_step(st);
    sqlite3_finalize(st);
  }
  bool seen(const std::string& id) {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "SELECT 1 FROM seen WHERE id = ?1", -1, &st, nullptr);
    sqlite3_bind_text(st, 1, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
    const bool found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
  }
};

// XREADGROUP COUNT batch + one XACK per batch until n entries; `each` sees every id.
template <class Each>
double plain_loop(int port, const std::string& stream, std::size_t n, std::size_t batch, Each each) {
  redisContext* c = redisConnect("127.0.0.1", port);
  freeReplyObject(redisCommand(c, "XGROUP CREATE %s g 0 MKSTREAM", stream.c_str()));
  const std::string count = std::to_string(batch);
  std::vector<const char*> read{"XREADGROUP", "GROUP",        "g", "c", "COUNT", count.c_str(), "BLOCK", "1000",
                                "STREAMS",    stream.c_str(), ">"};
  std::size_t got = 0;
  const auto t0 = Clock::now();
  while (got < n) {
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(read.size()), read.data(), nullptr));
    if (r == nullptr || r->type != REDIS_REPLY_ARRAY) break;
    const redisReply* entries = r->element[0]->element[1];
    std::vector<const char*> argv{"XACK", stream.c_str(), "g"};
    for (std::size_t i = 0; i < entries->elements; ++i) {
      argv.push_back(entries->element[i]->element[0]->str);
      each(std::string(entries->element[i]->element[1]->element[1]->str));
    }
    freeReplyObject(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), nullptr));
    got += entries->elements;
    freeReplyObject(r);
  }
  const double r = rate(got, Clock::now() - t0);
  redisFree(c);
  return r;
}

double idem_loop(int port, const std::string& stream, std::size_t n, std::size_t batch, const std::string& db) {
  redis_streams::Options ro;
  ro.port = static_cast<std::uint16_t>(port);
  ro.stream = stream;
  ro.group = "g";
  auto src = redis_streams::open(ro).value();
  return idem_rate(*src, n, batch, db);
}

double sqlite_floor(std::size_t n, const std::string& path) {
  Db d(path);
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
  Db d(path);
  sqlite3_stmt *find = nullptr, *seen = nullptr, *effect = nullptr;
  sqlite3_prepare_v2(d.db, "SELECT 1 FROM seen WHERE id = ?1", -1, &find, nullptr);
  sqlite3_prepare_v2(d.db, "INSERT INTO seen(id) VALUES(?1)", -1, &seen, nullptr);
  sqlite3_prepare_v2(d.db, "INSERT INTO effects(id, at_ms) VALUES(?1, 0)", -1, &effect, nullptr);
  auto run = [](sqlite3_stmt* st, const std::string& id) {
    sqlite3_bind_text(st, 1, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
    sqlite3_step(st);
    sqlite3_reset(st);
  };
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    if (i % batch == 0) sqlite3_exec(d.db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    const std::string id = "bfloor-" + std::to_string(i);
    sqlite3_exec(d.db, "SAVEPOINT m", nullptr, nullptr, nullptr);
    run(find, id);
    run(effect, id);
    run(seen, id);
    sqlite3_exec(d.db, "RELEASE m", nullptr, nullptr, nullptr);
    if (i % batch == batch - 1 || i + 1 == n) sqlite3_exec(d.db, "COMMIT", nullptr, nullptr, nullptr);
  }
  const double r = rate(n, Clock::now() - t0);
  for (sqlite3_stmt* st : {find, seen, effect}) sqlite3_finalize(st);
  return r;
}

}  // namespace

double idem_rate(MessageSource& source, std::size_t n, std::size_t batch, const std::string& db, bool close_timed) {
  { Db effects(db); }  // the effects table
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

bool stream_rows(std::size_t n, std::size_t batch, std::vector<Row>& rows) {
  auto server = redis_test::RedisServer::start({});
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start redis-server: %s\n", server.status().to_string().c_str());
    return false;
  }
  const int port = (*server)->port();
  std::vector<OutgoingMessage> bodies;
  for (std::size_t i = 0; i < n; ++i) bodies.push_back({.body = "msg-" + std::to_string(i)});
  for (const char* stream : {"plain", "naive", "idem"}) {
    redis_streams::Options po;
    po.port = static_cast<std::uint16_t>(port);
    po.stream = stream;
    auto p = redis_streams::open_publisher(po);
    if (!p.ok() || !(*p)->publish(bodies).ok()) {
      std::fprintf(stderr, "cannot publish to %s\n", stream);
      return false;
    }
  }
  const auto dir = std::filesystem::temp_directory_path() / ("idem-bench-runtime-" + std::to_string(port));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  rows.push_back({"plain_stream", "XREADGROUP COUNT b + XACK per batch, no dedup",
                  plain_loop(port, "plain", n, batch, [](const std::string&) {})});
  Db naive((dir / "naive.db").string());
  rows.push_back({"naive_stream", "same loop; SQLite autocommit check, effect, insert per message",
                  plain_loop(port, "naive", n, batch, [&](const std::string& id) {
                    if (naive.seen(id)) return;
                    naive.exec_id("INSERT INTO effects(id, at_ms) VALUES(?1, 0)", id);
                    naive.exec_id("INSERT INTO seen(id) VALUES(?1)", id);
                  })});
  rows.push_back({"idem_stream", "runtime, Redis Streams source, SQLite transactional, 2 workers, batch b",
                  idem_loop(port, "idem", n, batch, (dir / "idem.db").string())});
  rows.push_back({"sqlite_txn_floor", "SQLite alone: one transaction per message, dedup row + effect row",
                  sqlite_floor(n, (dir / "floor.db").string())});
  rows.push_back({"sqlite_batch_floor",
                  "SQLite alone: one transaction per b messages, a savepoint, lookup, dedup row "
                  "and effect row per message",
                  sqlite_batch_floor(n, batch, (dir / "bfloor.db").string())});
  std::filesystem::remove_all(dir);
  return true;
}

}  // namespace idem::bench

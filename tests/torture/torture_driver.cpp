// The crash torture's driver: runs the workload (workload.hpp) through one consumer on
// a durable store, as a broker would deliver it, and is SIGKILLed at random moments by
// crash_torture_test.cpp, which starts it again until it exits 0.
//
//   torture_driver sqlite|rocksdb|redis|postgres DIR [REDIS_URI | POSTGRES_URI SCHEMA]
//
// The broker it stands in for: DIR/stats holds a cursor (the first message not yet
// acknowledged to the "broker"), moved on every kAckEvery decisions, so that a kill
// redelivers up to kAckEvery - 1 messages; a retry decision redelivers the message at
// once. Strict ordering and the product machine, first versions out of order and
// failing first attempts come from the workload. The effect of each handler call:
//   sqlite   a row of torture_effects, written in the dedup record's transaction
//   rocksdb  e/<key>/<n> → version in column family "effects", in the commit's WriteBatch
//   postgres a row of public.effects_<SCHEMA>, written in the dedup record's transaction
//            (the store keeps its tables in SCHEMA)
//   redis    a line "id key version" appended to DIR/effects.log before the commit:
//            Redis cannot hold the handler's writes in its commit, so this effect is
//            at least once (a kill between the effect and the commit repeats it)
// DIR/stats also counts, across runs, the starts, redeliveries and the decisions seen.
// With fd 3 open, the number of messages decided so far is written there after each.
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "idem/idem.hpp"
#include "idem/open_store.hpp"
#include "idem/redis_store.hpp"
#include "idem/rocksdb_store.hpp"
#ifdef IDEM_TORTURE_WITH_POSTGRES
#include <libpq-fe.h>

#include "idem/postgres_store.hpp"
#endif
#include "idem/sqlite_store.hpp"
#include "idem/statemachine.hpp"
#include "torture/stats.hpp"
#include "torture/workload.hpp"

namespace idem::torture {
namespace {

constexpr std::uint64_t kAckEvery = 8;

const char* const kEffectsSql =
    "CREATE TABLE IF NOT EXISTS torture_effects(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, key TEXT, "
    "version INTEGER, event TEXT)";

TransitionTable product_table() {
  using namespace idem::dsl;
  BuildResult r = Machine("product")
                      .initial("offline")
                      .final_states({"deleted"})
                      .rows({
                          state("offline") + event("online") = state("online"),
                          state("online") + event("offline") = state("offline"),
                          row({"online", "offline"}, "delete", "deleted"),
                      })
                      .build();
  return std::move(*r.table);
}

[[noreturn]] void die(int code, const std::string& why) {
  std::fprintf(stderr, "torture_driver: %s\n", why.c_str());
  std::_Exit(code);
}

// The handler's effect, by store.
class Effects {
 public:
  Effects(std::string kind, std::string dir, std::string table)
      : kind_(std::move(kind)), dir_(std::move(dir)), table_(std::move(table)) {}

  HandlerResult operator()(const test::EntityMsg& m, HandlerContext& ctx) {
    if (fails_first(m.id) && ctx.attempt() == 1) return HandlerResult::fail("fails on its first attempt");
    Status s = kind_ == "sqlite"     ? in_sqlite(m, ctx)
               : kind_ == "rocksdb"  ? in_rocksdb(m, ctx)
               : kind_ == "postgres" ? in_postgres(m, ctx)
                                     : in_log(m);
    if (!s.ok()) return HandlerResult::fail(s.to_string());
    return HandlerResult::ok(m.id);
  }

 private:
  Status in_sqlite(const test::EntityMsg& m, HandlerContext& ctx) {
    sqlite3* db = sqlite::connection(ctx);
    if (db == nullptr) return failed_precondition("no SQLite transaction");
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(db, "INSERT INTO torture_effects(id, key, version, event) VALUES(?1, ?2, ?3, ?4)", -1,
                                &st, nullptr);
    if (rc == SQLITE_OK) {
      sqlite3_bind_text(st, 1, m.id.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 2, m.key->c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(st, 3, static_cast<sqlite3_int64>(*m.version));
      sqlite3_bind_text(st, 4, m.event->c_str(), -1, SQLITE_TRANSIENT);
      rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? ok_status() : unavailable(sqlite3_errmsg(db));
  }

  // e/<key>/<n> → version, n counting the key's effects from 1 (n/<key> holds the count).
  Status in_rocksdb(const test::EntityMsg& m, HandlerContext& ctx) {
    rocksdb::Batch* b = rocksdb::batch(ctx);
    if (b == nullptr) return failed_precondition("no RocksDB batch");
    auto count = b->get("effects", "n/" + *m.key);
    if (!count.ok()) return count.status();
    const std::uint64_t n = count->has_value() ? std::stoull(**count) + 1 : 1;
    char slot[32];
    std::snprintf(slot, sizeof slot, "%08llu", static_cast<unsigned long long>(n));
    if (Status s = b->put("effects", "n/" + *m.key, std::to_string(n)); !s.ok()) return s;
    return b->put("effects", "e/" + *m.key + "/" + slot, std::to_string(*m.version));
  }

  Status in_postgres(const test::EntityMsg& m, HandlerContext& ctx) {
#ifdef IDEM_TORTURE_WITH_POSTGRES
    PGconn* conn = postgres::connection(ctx);
    if (conn == nullptr) return failed_precondition("no PostgreSQL transaction");
    const std::string version = std::to_string(*m.version);
    const char* values[] = {m.id.c_str(), m.key->c_str(), version.c_str(), m.event->c_str()};
    const std::string sql = "INSERT INTO public." + table_ + "(id, key, version, event) VALUES($1, $2, $3, $4)";
    PGresult* r = PQexecParams(conn, sql.c_str(), 4, nullptr, values, nullptr, nullptr, 0);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok ? ok_status() : unavailable(PQerrorMessage(conn));
#else
    (void)m, (void)ctx;
    return failed_precondition("built without PostgreSQL");
#endif
  }

  Status in_log(const test::EntityMsg& m) {
    if (log_fd_ < 0) log_fd_ = ::open((dir_ + "/effects.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const std::string line = m.id + " " + *m.key + " " + std::to_string(*m.version) + "\n";
    if (::write(log_fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return unavailable("effects.log");
    }
    return ok_status();
  }

  const std::string kind_, dir_, table_;
  int log_fd_ = -1;
};

#ifdef IDEM_TORTURE_WITH_POSTGRES
// Creates public.<table> for the effects, then opens the store in `schema`.
StatusOr<std::shared_ptr<Store>> open_postgres(const std::string& uri, const std::string& schema,
                                               const std::string& table) {
  PGconn* conn = PQconnectdb(uri.c_str());
  const std::string sql = "CREATE TABLE IF NOT EXISTS public." + table +
                          "(seq bigserial PRIMARY KEY, id text, key text, version bigint, event text)";
  PGresult* r = PQstatus(conn) == CONNECTION_OK ? PQexec(conn, sql.c_str()) : nullptr;
  const bool ok = r != nullptr && PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  PQfinish(conn);
  if (!ok) die(3, "cannot create " + table);
  return open_store(uri + "?schema=" + schema);
}
#endif

StatusOr<std::shared_ptr<Store>> open_for(const std::string& kind, const std::string& dir, const char* server_uri,
                                          const char* schema) {
  if (kind == "sqlite") {
    const std::string path = dir + "/idem.db";
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK || sqlite3_exec(db, kEffectsSql, 0, 0, 0) != SQLITE_OK) {
      die(3, "cannot create torture_effects");
    }
    sqlite3_close(db);
    return sqlite::open({.path = path});
  }
  if (kind == "rocksdb") return rocksdb::open({.path = dir + "/rocks", .user_column_families = {"effects"}});
  if (kind == "redis" && server_uri != nullptr) return open_store(server_uri);
#ifdef IDEM_TORTURE_WITH_POSTGRES
  if (kind == "postgres" && server_uri != nullptr && schema != nullptr) {
    return open_postgres(server_uri, schema, std::string("effects_") + schema);
  }
#endif
  (void)schema;
  return invalid_argument("usage: torture_driver sqlite|rocksdb|redis|postgres DIR [REDIS_URI | POSTGRES_URI SCHEMA]");
}

ConsumerOptions options_for(std::shared_ptr<Store> store, bool transactional) {
  ConsumerOptions o;
  o.store = std::move(store);
  o.transactional = transactional;
  o.owner = "torture";      // one logical consumer that restarts
  o.lease = Duration(300);  // what a kill leaves in Redis expires soon
  o.backoff = {Duration(1), 2.0, Duration(8)};
  o.store_retry_delay = Duration(5);
  o.max_retries = 50;
  o.ordering.mode = Ordering::kStrict;
  o.machine = machine_gate(product_table());
  o.on_buffered = [](const BufferedOutcome& b) {
    // A copy of a buffered message may be processed straight from the broker while its
    // entry waits out a failed drain; the entry then leaves as stale. Only a dead
    // letter is wrong here.
    if (b.decision.action == Action::kDeadLetter) {
      die(5, "a buffered message left as " + std::string(reason_name(b.decision.reason)) + ": " + b.id);
    }
  };
  return o;
}

class Driver {
 public:
  Driver(std::string dir, Consumer<test::EntityMsg>& consumer, Store& store)
      : stats_(dir + "/stats"), consumer_(consumer), store_(store), progress_(::fcntl(3, F_GETFD) != -1) {}

  void run(const std::vector<test::EntityMsg>& work) {
    Stats& s = stats_.get();
    s.starts++;
    s.redeliveries += s.high - s.cursor;
    s.high = s.cursor;
    stats_.save();
    consumer_.tick();  // resumes a drain the last run left
    for (std::uint64_t i = s.cursor; i < work.size(); ++i) {
      deliver(work[i]);
      s.high = i + 1;
      if (s.high % kAckEvery == 0 || s.high == work.size()) s.cursor = s.high;
      stats_.save();
      if (progress_) (void)!::write(3, &s.high, sizeof s.high);
    }
    drain_rest();
  }

 private:
  void deliver(const test::EntityMsg& m) {
    for (int attempt = 0;; ++attempt) {
      const Decision d = consumer_.process(m);
      stats_.get().count(d.reason);
      if (d.action == Action::kAck) return;
      if (d.action != Action::kRetry || attempt > 1000) {
        die(5, m.id + " decided " + std::string(reason_name(d.reason)) + " " + d.detail);
      }
      std::this_thread::sleep_for(std::min(d.delay, Duration(20)));
    }
  }

  // Ticks until the reorder buffer is empty (failed drains wait out their backoff).
  void drain_rest() {
    for (int i = 0; i < 2000; ++i) {
      consumer_.tick();
      auto summary = store_.entities()->buffer_summary(0);
      if (!summary.ok()) die(6, summary.status().to_string());
      if (summary->count == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    die(7, "the reorder buffer did not drain");
  }

  StatsFile stats_;
  Consumer<test::EntityMsg>& consumer_;
  Store& store_;
  const bool progress_;
};

int run(int argc, char** argv) {
  if (argc < 3) die(2, "usage: torture_driver sqlite|rocksdb|redis|postgres DIR [REDIS_URI | POSTGRES_URI SCHEMA]");
  const std::string kind = argv[1], dir = argv[2];
  const char* schema = argc > 4 ? argv[4] : nullptr;
  auto store = open_for(kind, dir, argc > 3 ? argv[3] : nullptr, schema);
  if (!store.ok()) die(3, store.status().to_string());
  auto consumer =
      Consumer<test::EntityMsg>::create(options_for(*store, kind != "redis"), test::entity_extractors(),
                                        Effects(kind, dir, std::string("effects_") + (schema ? schema : "")));
  if (!consumer.ok()) die(4, consumer.status().to_string());
  Driver(dir, *consumer, **store).run(make_workload(kSeed));
  return 0;
}

}  // namespace
}  // namespace idem::torture

int main(int argc, char** argv) { return idem::torture::run(argc, argv); }

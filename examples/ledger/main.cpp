// A ledger on any broker. Payments arrive as JSON,
//   {"id": "p-1", "account": "alice", "version": 1, "amount": 250}
// each account's in version order (a payment that arrives early waits in the durable
// reorder buffer), and each is applied once: its ledger row and the account's balance
// are written in the transaction of its dedup record, and a "credited" event goes out
// through the transactional outbox, after that commit and never without it. Kill it
// and start it again at will.
//
//   idem_example_ledger SOURCE_URI EVENTS_URI DB_PATH [IDLE_EXIT_MS]
//
// SOURCE_URI and EVENTS_URI name any adapter this build has (idem/open_source.hpp),
// e.g. 'redis-stream://127.0.0.1:6379/payments?group=ledger' and
// 'redis-stream://127.0.0.1:6379/credited'. It runs until it has been idle for
// IDLE_EXIT_MS (default 2000), then prints one line per account:
//   account alice balance 750 versions 1,2,3
#include <sqlite3.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "idem/idem.hpp"
#include "idem/json_format.hpp"
#include "idem/open_source.hpp"
#include "idem/open_store.hpp"
#include "idem/sqlite_store.hpp"

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "idem_example_ledger: %s\n", what.c_str());
  return 1;
}

// Runs one statement with text parameters; false on any error.
bool exec(sqlite3* db, const char* sql, std::initializer_list<std::string> params) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) return false;
  int i = 1;
  for (const std::string& p : params) sqlite3_bind_text(st, i++, p.c_str(), static_cast<int>(p.size()), SQLITE_TRANSIENT);
  const int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE;
}

// The handler: the payment's ledger row, the account's balance, and the event.
idem::HandlerResult apply(const idem::json::Message& m, idem::HandlerContext& ctx, const std::string& events) {
  sqlite3* db = idem::sqlite::connection(ctx);
  const std::int64_t amount = m.doc.at("amount").get<std::int64_t>();  // a throw fails the handler
  const std::string version = std::to_string(m.version), cents = std::to_string(amount);
  if (!exec(db, "INSERT INTO ledger(account, version, amount) VALUES(?1, ?2, ?3)", {m.key, version, cents}) ||
      !exec(db,
            "INSERT INTO balances(account, balance) VALUES(?1, ?2) "
            "ON CONFLICT(account) DO UPDATE SET balance = balance + excluded.balance",
            {m.key, cents}))
    return idem::HandlerResult::fail(sqlite3_errmsg(db));
  const nlohmann::json event = {{"account", m.key}, {"version", m.version}, {"amount", amount}, {"payment", m.id}};
  if (idem::Status s = ctx.publish(events, event.dump()); !s.ok()) return idem::HandlerResult::fail(s.to_string());
  return idem::HandlerResult::ok();
}

// The application's own tables, beside idem's in the same file.
bool create_tables(const std::string& path) {
  sqlite3* db = nullptr;
  const bool ok = sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
                  sqlite3_exec(db,
                               "PRAGMA journal_mode=WAL;"
                               "CREATE TABLE IF NOT EXISTS ledger(account TEXT, version INTEGER, amount INTEGER);"
                               "CREATE TABLE IF NOT EXISTS balances(account TEXT PRIMARY KEY, balance INTEGER);",
                               nullptr, nullptr, nullptr) == SQLITE_OK;
  sqlite3_close(db);
  return ok;
}

// One line per account: its balance and the versions applied, in the order applied.
// False when the file cannot be read (the store, while open, holds it exclusively).
bool print_balances(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_stmt* st = nullptr;
  const bool ok = sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
      sqlite3_prepare_v2(db,
                         "SELECT b.account, b.balance, (SELECT group_concat(version) FROM "
                         "(SELECT version FROM ledger l WHERE l.account = b.account ORDER BY rowid)) "
                         "FROM balances b ORDER BY b.account",
                         -1, &st, nullptr) == SQLITE_OK;
  if (ok) {
    while (sqlite3_step(st) == SQLITE_ROW)
      std::printf("account %s balance %lld versions %s\n", reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
                  static_cast<long long>(sqlite3_column_int64(st, 1)),
                  reinterpret_cast<const char*>(sqlite3_column_text(st, 2)));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return ok;
}

// Consumes until idle for idle_exit. The store (and its lock on the file) is released
// when this returns.
int serve(const std::string& source_uri, const std::string& events, const std::string& db, idem::Duration idle_exit) {
  auto format = idem::json::Format::create({.id = "/id", .key = "/account", .version = "/version"});
  if (!format.ok()) return fail(format.status().to_string());
  idem::ConsumerOptions opts;
  auto store = idem::open_store("sqlite:" + db);
  if (!store.ok()) return fail(store.status().to_string());
  opts.store = *store;
  opts.transactional = true;
  opts.ordering.mode = idem::Ordering::kStrict;
  // A payment that waited in the reorder buffer and was then dead-lettered (its retries
  // ran out, or the gap policy gave up on its predecessor) is handed over here; a real
  // ledger would park it for an operator.
  opts.on_buffered = [](const idem::BufferedOutcome& b) {
    if (b.decision.action == idem::Action::kDeadLetter)
      std::fprintf(stderr, "dead letter: payment %s (%s)\n", b.id.c_str(),
                   std::string(idem::reason_name(b.decision.reason)).c_str());
  };
  opts.outbox.publishers = idem::open_publisher;
  auto consumer = idem::Consumer<idem::json::Message>::create(
      opts, format->extractors(),
      [&events](const idem::json::Message& m, idem::HandlerContext& ctx) { return apply(m, ctx, events); });
  if (!consumer.ok()) return fail(consumer.status().to_string());

  auto source = idem::open_source(source_uri, {.lease = opts.lease});
  if (!source.ok()) return fail(source.status().to_string());  // never holds the URI's password
  idem::RuntimeOptions ro;
  ro.workers = 4;
  ro.idle_exit = idle_exit;
  auto rt = idem::Runtime<idem::json::Message>::create(ro, **source, *consumer, format->decoder());
  if (!rt.ok()) return fail(rt.status().to_string());
  const idem::Status stopped = (*rt)->run();
  (*source)->close();
  return stopped.ok() ? 0 : fail(stopped.to_string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) return fail("usage: idem_example_ledger SOURCE_URI EVENTS_URI DB_PATH [IDLE_EXIT_MS]");
  const std::string db = argv[3];
  const idem::Duration idle_exit(argc == 5 ? std::strtoll(argv[4], nullptr, 10) : 2000);
  if (idle_exit.count() <= 0) return fail("IDLE_EXIT_MS must be a positive number of milliseconds");
  if (!create_tables(db)) return fail("cannot create the tables in " + db);
  if (int rc = serve(argv[1], argv[2], db, idle_exit); rc != 0) return rc;
  return print_balances(db) ? 0 : fail("cannot read the balances in " + db);
}

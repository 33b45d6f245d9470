#include "books.hpp"

#include <sqlite3.h>

#include <memory>

namespace demo::books {
namespace {

struct CloseDb {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
struct Finalize {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Db = std::unique_ptr<sqlite3, CloseDb>;
using Stmt = std::unique_ptr<sqlite3_stmt, Finalize>;

idem::Status error(sqlite3* db, const std::string& what) {
  return idem::unavailable("ledger: " + what + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
}

idem::StatusOr<Db> open(const std::string& path) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open(path.c_str(), &raw);
  Db db(raw);
  if (rc != SQLITE_OK) return error(raw, "opening " + path);
  return db;
}

idem::StatusOr<Stmt> prepare(sqlite3* db, const char* sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &raw, nullptr) != SQLITE_OK) return error(db, sql);
  return Stmt(raw);
}

}  // namespace

idem::Status create(const std::string& path) {
  auto db = open(path);
  if (!db.ok()) return db.status();
  // order_id is deliberately not unique: the audit counts rows, so an effect applied
  // twice would show as two rows instead of failing the second insert.
  constexpr const char* kSql =
      "CREATE TABLE IF NOT EXISTS ledger (order_id TEXT NOT NULL, customer TEXT NOT NULL, "
      "amount_cents INTEGER NOT NULL)";
  if (sqlite3_exec(db->get(), kSql, nullptr, nullptr, nullptr) != SQLITE_OK) return error(db->get(), kSql);
  return idem::ok_status();
}

idem::Status record(sqlite3* db, const Order& o) {
  auto st = prepare(db, "INSERT INTO ledger (order_id, customer, amount_cents) VALUES (?1, ?2, ?3)");
  if (!st.ok()) return st.status();
  sqlite3_bind_text(st->get(), 1, o.id.data(), static_cast<int>(o.id.size()), SQLITE_TRANSIENT);
  sqlite3_bind_text(st->get(), 2, o.customer.data(), static_cast<int>(o.customer.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(st->get(), 3, o.amount_cents);
  if (sqlite3_step(st->get()) != SQLITE_DONE) return error(db, "inserting " + o.id);
  return idem::ok_status();
}

idem::StatusOr<int> rows_for(sqlite3* db, const std::string& order_id) {
  auto st = prepare(db, "SELECT COUNT(*) FROM ledger WHERE order_id = ?1");
  if (!st.ok()) return st.status();
  sqlite3_bind_text(st->get(), 1, order_id.data(), static_cast<int>(order_id.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(st->get()) != SQLITE_ROW) return error(db, "counting rows of " + order_id);
  return sqlite3_column_int(st->get(), 0);
}

idem::StatusOr<Ledger> read(const std::string& path) {
  auto db = open(path);
  if (!db.ok()) return db.status();
  auto st = prepare(db->get(), "SELECT order_id, amount_cents FROM ledger");
  if (!st.ok()) return st.status();
  Ledger l;
  int rc;
  while ((rc = sqlite3_step(st->get())) == SQLITE_ROW) {
    ++l.rows[reinterpret_cast<const char*>(sqlite3_column_text(st->get(), 0))];
    l.balance_cents += sqlite3_column_int64(st->get(), 1);
  }
  if (rc != SQLITE_DONE) return error(db->get(), "reading the ledger");
  return l;
}

}  // namespace demo::books

// The shop's own books: a `ledger` table in the same SQLite file as idem's dedup
// records. In transactional mode the handler writes its row through
// idem::sqlite::connection(ctx), inside the transaction that also commits the dedup
// record, so the row and the record land together or not at all.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "idem/status.hpp"
#include "order.hpp"

struct sqlite3;

namespace demo::books {

// Creates the ledger table in the SQLite file at `path` if it is missing.
// REQUIRES: no store holds the file open (the store locks it exclusively).
idem::Status create(const std::string& path);

// Inserts the order's ledger row on `db`, the connection of the open transaction.
idem::Status record(sqlite3* db, const Order& o);

// Returns how many ledger rows `db` holds for order_id.
idem::StatusOr<int> rows_for(sqlite3* db, const std::string& order_id);

struct Ledger {
  std::map<std::string, int> rows;  // order id → number of rows
  std::int64_t balance_cents = 0;   // sum of all amounts
};

// Reads the whole ledger from the file at `path`.
// REQUIRES: no store holds the file open.
idem::StatusOr<Ledger> read(const std::string& path);

}  // namespace demo::books

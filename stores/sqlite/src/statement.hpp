// Prepared statements and SQLite result codes, internal to idem::sqlite.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "idem/status.hpp"

namespace idem::sqlite::detail {

// Returns the Status for SQLite result code `rc` (an error) on `db`, naming `what`
// (the operation) and `path` (the file). BUSY/LOCKED → kUnavailable naming the lock;
// READONLY → kUnavailable saying read-only; NOTADB/CORRUPT → kDataLoss; FULL →
// kResourceExhausted; IOERR/CANTOPEN → kUnavailable; anything else → kInternal.
Status sqlite_status(int rc, sqlite3* db, std::string_view what, const std::string& path);

// In the message of sqlite_status() for SQLITE_BUSY and SQLITE_LOCKED.
inline constexpr char kBusyMarker[] = "locked by another process";

// One statement prepared once and reused. Not thread-safe: the store's mutex guards it.
class Statement {
 public:
  Statement() = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  // Prepares `sql` (persistent). Returns the SQLite result code.
  int prepare(sqlite3* db, std::string_view sql) {
    return sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt_,
                              nullptr);
  }
  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// One use of a prepared statement: binds, steps, and resets it (and clears its
// bindings) when destroyed. Bound text and blobs must outlive the use.
class Use {
 public:
  explicit Use(const Statement& s) : s_(s.get()) {}
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;
  ~Use() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }

  // Ids and owners are arbitrary bytes: always bound as BLOBs.
  Use& blob(int i, std::string_view v) {
    // A zero-length blob must still be a BLOB, not NULL: pass a non-null pointer.
    sqlite3_bind_blob(s_, i, v.empty() ? "" : v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    return *this;
  }
  Use& blob(int i, const std::optional<std::string_view>& v) {
    if (v) return blob(i, *v);
    sqlite3_bind_null(s_, i);
    return *this;
  }
  Use& i64(int i, std::int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  // A 64-bit fingerprint, stored as the INTEGER with the same bits; nullopt → NULL.
  Use& fingerprint(int i, const std::optional<std::uint64_t>& v) {
    if (v) sqlite3_bind_int64(s_, i, static_cast<std::int64_t>(*v));
    else sqlite3_bind_null(s_, i);
    return *this;
  }

  // Returns SQLITE_ROW, SQLITE_DONE or an error code.
  int step() { return sqlite3_step(s_); }

  bool is_null(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
  std::int64_t column_i64(int col) const { return sqlite3_column_int64(s_, col); }
  std::string column_blob(int col) const {
    const void* p = sqlite3_column_blob(s_, col);
    const int n = sqlite3_column_bytes(s_, col);
    return p ? std::string(static_cast<const char*>(p), static_cast<std::size_t>(n)) : std::string();
  }
  std::optional<std::uint64_t> column_fingerprint(int col) const {
    if (is_null(col)) return std::nullopt;
    return static_cast<std::uint64_t>(column_i64(col));
  }

 private:
  sqlite3_stmt* s_;
};

}  // namespace idem::sqlite::detail

// libpq helpers of the PostgreSQL store: a connection with its prepared statements,
// binary parameters (arrays included) and binary results.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "idem/status.hpp"

namespace idem::postgres::detail {

// Type oids of the parameters the store sends.
inline constexpr Oid kBool = 16, kBytea = 17, kInt8 = 20, kByteaArray = 1001, kInt8Array = 1016;

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// Parameters in binary format. Each value is copied.
class Params {
 public:
  Params& bytes(std::string_view v);
  Params& bytes(const std::string& v) { return bytes(std::string_view(v)); }
  Params& bytes(const std::optional<std::string_view>& v);
  Params& i64(std::int64_t v);
  Params& i64(const std::optional<std::int64_t>& v);
  Params& null(Oid type);
  // One-dimensional arrays (NULL elements for nullopt).
  Params& bytes_array(const std::vector<std::optional<std::string_view>>& v);
  Params& i64_array(const std::vector<std::optional<std::int64_t>>& v);

  int size() const { return static_cast<int>(types_.size()); }
  const Oid* types() const { return types_.data(); }
  // Pointers valid while this object lives and is not changed.
  std::vector<const char*> values() const;
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  Params& add(Oid type, std::optional<std::string> v);
  std::vector<Oid> types_;
  std::vector<std::optional<std::string>> values_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
};

// One statement: a name unique in the store, its SQL and nothing else; prepared on a
// connection at first use.
struct Sql {
  std::string name;
  std::string text;
};

// One connection of the pool.
class Conn {
 public:
  explicit Conn(PGconn* c) : c_(c) {}
  ~Conn() { PQfinish(c_); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  PGconn* get() const { return c_; }
  bool broken() const { return PQstatus(c_) != CONNECTION_OK; }
  // In a transaction block (BEGIN issued and not yet ended).
  bool in_transaction() const { return PQtransactionStatus(c_) != PQTRANS_IDLE; }

  // Runs `sql` (prepared on first use) with p; results in binary format. Returns the
  // result of a command or query, or the error (see status_of).
  StatusOr<Result> run(const Sql& sql, const Params& p);
  // Runs SQL text without parameters (BEGIN, COMMIT, SAVEPOINT…).
  Status exec(const char* sql);

 private:
  PGconn* c_;
  std::unordered_set<std::string> prepared_;
};

// The network timeouts of every connection, so that a connection cut by a partition
// fails within seconds instead of after the kernel's TCP retries (about 15 minutes):
// `connection` with connect_timeout=10, keepalives=1, keepalives_idle=5,
// keepalives_interval=2, keepalives_count=3 and tcp_user_timeout=10000 (ms) added
// where it sets none of them.
std::vector<std::pair<std::string, std::string>> with_network_timeouts(
    std::vector<std::pair<std::string, std::string>> connection);

// The server's side of the same timeouts, for one session (SET statements): the server
// notices a client that vanished in the middle of a transaction within seconds and
// rolls it back, freeing the claims it holds. Ignored over a unix socket.
inline constexpr const char* kServerNetworkTimeouts =
    "SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3; "
    "SET tcp_user_timeout = 10000";

// The Status of a failed libpq call: kUnavailable when the connection is lost or the
// server asks to retry (class 08, 57P, 40001, 40P01, 53), kInternal otherwise. `what`
// says what was being done. Never holds a password (libpq does not echo it).
Status status_of(PGconn* c, const PGresult* r, std::string_view what);

// Binary result readers. REQUIRES: the column has the type named.
bool is_null(const PGresult* r, int row, int col);
std::int64_t get_i64(const PGresult* r, int row, int col);   // int8; 0 if NULL
std::int32_t get_i32(const PGresult* r, int row, int col);   // int4; 0 if NULL
std::int16_t get_i16(const PGresult* r, int row, int col);   // int2; 0 if NULL
bool get_bool(const PGresult* r, int row, int col);          // false if NULL
std::string get_bytes(const PGresult* r, int row, int col);  // bytea / text; "" if NULL
std::optional<std::string> get_opt_bytes(const PGresult* r, int row, int col);
// The number of rows a command changed (INSERT/UPDATE/DELETE without RETURNING).
std::uint64_t changed(const PGresult* r);

}  // namespace idem::postgres::detail

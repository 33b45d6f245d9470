#include "pg.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace idem::postgres::detail {
namespace {

void put_u32(std::string& out, std::uint32_t v) {
  v = htonl(v);
  out.append(reinterpret_cast<const char*>(&v), 4);
}

std::string be64(std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(v);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((u >> (56 - 8 * i)) & 0xff);
  return out;
}

// The binary array format: ndim, has-null flag, element type, then per dimension its
// size and lower bound, then per element its length (-1 for NULL) and bytes.
std::string array_header(std::size_t n, bool has_null, Oid element) {
  std::string out;
  put_u32(out, 1);
  put_u32(out, has_null ? 1 : 0);
  put_u32(out, element);
  put_u32(out, static_cast<std::uint32_t>(n));
  put_u32(out, 1);
  return out;
}

bool retryable(std::string_view state) {
  return state.starts_with("08") || state.starts_with("57P") || state == "40001" || state == "40P01" ||
         state.starts_with("53");
}

}  // namespace

Params& Params::add(Oid type, std::optional<std::string> v) {
  types_.push_back(type);
  lengths_.push_back(v ? static_cast<int>(v->size()) : 0);
  formats_.push_back(1);
  values_.push_back(std::move(v));
  return *this;
}

Params& Params::bytes(std::string_view v) { return add(kBytea, std::string(v)); }
Params& Params::bytes(const std::optional<std::string_view>& v) { return v ? bytes(*v) : add(kBytea, std::nullopt); }
Params& Params::i64(std::int64_t v) { return add(kInt8, be64(v)); }
Params& Params::i64(const std::optional<std::int64_t>& v) { return v ? i64(*v) : add(kInt8, std::nullopt); }
Params& Params::null(Oid type) { return add(type, std::nullopt); }

Params& Params::bytes_array(const std::vector<std::optional<std::string_view>>& v) {
  bool has_null = false;
  std::size_t size = 20;
  for (const auto& e : v) {
    has_null |= !e;
    size += 4 + (e ? e->size() : 0);
  }
  std::string out = array_header(v.size(), has_null, kBytea);
  out.reserve(size);
  for (const auto& e : v) {
    if (!e) {
      put_u32(out, 0xffffffffu);
      continue;
    }
    put_u32(out, static_cast<std::uint32_t>(e->size()));
    out.append(*e);
  }
  return add(kByteaArray, std::move(out));
}

Params& Params::i64_array(const std::vector<std::optional<std::int64_t>>& v) {
  bool has_null = false;
  for (const auto& e : v) has_null |= !e;
  std::string out = array_header(v.size(), has_null, kInt8);
  out.reserve(20 + 12 * v.size());
  for (const auto& e : v) {
    if (!e) {
      put_u32(out, 0xffffffffu);
      continue;
    }
    put_u32(out, 8);
    out += be64(*e);
  }
  return add(kInt8Array, std::move(out));
}

std::vector<const char*> Params::values() const {
  std::vector<const char*> out;
  out.reserve(values_.size());
  for (const auto& v : values_) out.push_back(v ? v->data() : nullptr);
  return out;
}

StatusOr<Result> Conn::run(const Sql& sql, const Params& p) {
  if (!prepared_.contains(sql.name)) {
    Result r(PQprepare(c_, sql.name.c_str(), sql.text.c_str(), p.size(), p.types()));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) return status_of(c_, r.get(), "preparing " + sql.name);
    prepared_.insert(sql.name);
  }
  const auto values = p.values();
  Result r(PQexecPrepared(c_, sql.name.c_str(), p.size(), values.data(), p.lengths(), p.formats(), 1));
  const auto st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return status_of(c_, r.get(), sql.name);
  return r;
}

Status Conn::exec(const char* sql) {
  Result r(PQexec(c_, sql));
  const auto st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return status_of(c_, r.get(), sql);
  return ok_status();
}

Status status_of(PGconn* c, const PGresult* r, std::string_view what) {
  std::string msg = r ? PQresultErrorMessage(r) : "";
  if (msg.empty() && c) msg = PQerrorMessage(c);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const std::string text = "postgres: " + std::string(what) + ": " + msg;
  if (c == nullptr || PQstatus(c) != CONNECTION_OK || state == nullptr || retryable(state)) return unavailable(text);
  return internal_error(text + " (SQLSTATE " + state + ")");
}

bool is_null(const PGresult* r, int row, int col) { return PQgetisnull(r, row, col) != 0; }

namespace {
std::uint64_t read_be(const PGresult* r, int row, int col, int n) {
  if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != n) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col));
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

std::int64_t get_i64(const PGresult* r, int row, int col) { return static_cast<std::int64_t>(read_be(r, row, col, 8)); }
std::int32_t get_i32(const PGresult* r, int row, int col) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(read_be(r, row, col, 4)));
}
std::int16_t get_i16(const PGresult* r, int row, int col) {
  return static_cast<std::int16_t>(static_cast<std::uint16_t>(read_be(r, row, col, 2)));
}
bool get_bool(const PGresult* r, int row, int col) { return read_be(r, row, col, 1) != 0; }

std::string get_bytes(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return {};
  return std::string(PQgetvalue(r, row, col), static_cast<std::size_t>(PQgetlength(r, row, col)));
}

std::optional<std::string> get_opt_bytes(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return std::nullopt;
  return get_bytes(r, row, col);
}

std::uint64_t changed(const PGresult* r) {
  const char* n = PQcmdTuples(const_cast<PGresult*>(r));
  return n && *n ? std::strtoull(n, nullptr, 10) : 0;
}

std::vector<std::pair<std::string, std::string>> with_network_timeouts(
    std::vector<std::pair<std::string, std::string>> connection) {
  static const std::pair<const char*, const char*> kDefaults[] = {
      {"connect_timeout", "10"}, {"keepalives", "1"},       {"keepalives_idle", "5"},
      {"keepalives_interval", "2"}, {"keepalives_count", "3"}, {"tcp_user_timeout", "10000"}};
  for (const auto& d : kDefaults) {
    const std::string_view key = d.first;
    const bool set = std::any_of(connection.begin(), connection.end(), [&](const auto& kv) { return kv.first == key; });
    if (!set) connection.emplace_back(d.first, d.second);
  }
  return connection;
}

}  // namespace idem::postgres::detail

// Opening the SQLite store: options, URI, connection set-up and schema check.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "idem/sqlite_store.hpp"
#include "schema.hpp"
#include "sqlite_store_impl.hpp"
#include "statement.hpp"

namespace idem::sqlite {
namespace {

// Runs a PRAGMA and returns its first column as text ("" if it returns no row).
StatusOr<std::string> pragma(sqlite3* db, const std::string& path, const std::string& sql) {
  detail::Statement s;
  if (int rc = s.prepare(db, sql); rc != SQLITE_OK) return detail::sqlite_status(rc, db, "opening", path);
  detail::Use u(s);
  const int rc = u.step();
  if (rc == SQLITE_DONE) return std::string();
  if (rc != SQLITE_ROW) return detail::sqlite_status(rc, db, "opening", path);
  const unsigned char* text = sqlite3_column_text(s.get(), 0);
  return std::string(text ? reinterpret_cast<const char*>(text) : "");
}

// Says why `path` cannot be written, if a plain permission check tells.
std::string read_only_reason(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    if (::access(path.c_str(), W_OK) != 0 && (errno == EACCES || errno == EROFS))
      return "the file " + path + " is read-only";
  }
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (::access(dir.c_str(), W_OK) != 0 && (errno == EACCES || errno == EROFS))
    return "the directory " + dir.string() + " is read-only (idem needs to create " + path + "-wal there)";
  return {};
}

Status validate(const Options& o) {
  if (o.path.empty()) return invalid_argument("sqlite: Options::path must not be empty");
  if (o.path == ":memory:" || o.path.starts_with("file:"))
    return invalid_argument("sqlite: Options::path must be a file path, got \"" + o.path +
                            "\" (use memory: for an in-process store)");
  if (o.busy_timeout.count() < 0) return invalid_argument("sqlite: busy_timeout must be >= 0 ms");
  if (o.busy_timeout.count() > INT32_MAX) return invalid_argument("sqlite: busy_timeout is too large");
  if (o.cache_mib <= 0) return invalid_argument("sqlite: cache_mib must be > 0");
  if (o.cache_mib > INT64_MAX / 1024) return invalid_argument("sqlite: cache_mib is too large");
  if (o.wal_autocheckpoint_pages <= 0 || o.wal_autocheckpoint_pages > INT32_MAX)
    return invalid_argument("sqlite: wal_autocheckpoint_pages must be between 1 and " + std::to_string(INT32_MAX));
  return ok_status();
}

// Turns an error of the set-up into one that names the cause a user can act on.
Status explain(Status s, const Options& o) {
  if (s.ok()) return s;
  if (const std::string why = read_only_reason(o.path); !why.empty())
    return unavailable("sqlite: cannot open " + o.path + " for writing: " + why + " (" + s.message() + ")");
  return s;
}

StatusOr<std::shared_ptr<Store>> open_connection(const Options& o) {
  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(o.path.c_str(), &raw, flags, nullptr);
  detail::Connection conn(raw);  // closes on every early return
  if (rc != SQLITE_OK) return explain(detail::sqlite_status(rc, raw, "opening", o.path), o);
  sqlite3_extended_result_codes(raw, 1);
  if (sqlite3_db_readonly(raw, "main") == 1) {
    std::string why = read_only_reason(o.path);
    return unavailable("sqlite: " + o.path + " opened read-only: " + (why.empty() ? "no write permission" : why) +
                       "; idem needs to write to it");
  }
  sqlite3_busy_timeout(raw, static_cast<int>(o.busy_timeout.count()));
  if (o.leases == LeaseMode::kLocal) {
    if (auto r = pragma(raw, o.path, "PRAGMA locking_mode=EXCLUSIVE"); !r.ok()) return explain(r.status(), o);
  }
  auto mode = pragma(raw, o.path, "PRAGMA journal_mode=WAL");
  if (!mode.ok()) return explain(mode.status(), o);
  if (*mode != "wal")
    return unavailable("sqlite: " + o.path + " cannot be switched to WAL mode (journal_mode is " + *mode + ")");
  const char* sync = o.synchronous == Synchronous::kFull ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL";
  if (auto r = pragma(raw, o.path, sync); !r.ok()) return explain(r.status(), o);
  if (auto r = pragma(raw, o.path, "PRAGMA cache_size=-" + std::to_string(o.cache_mib * 1024)); !r.ok())
    return explain(r.status(), o);
  if (auto r = pragma(raw, o.path, "PRAGMA wal_autocheckpoint=" + std::to_string(o.wal_autocheckpoint_pages)); !r.ok())
    return explain(r.status(), o);
  // Also takes (and, with leases=local, keeps) the write lock.
  if (Status s = detail::ensure_schema(raw, o.path); !s.ok()) return explain(std::move(s), o);
  conn.db = nullptr;  // the store owns it from here
  auto store = std::make_shared<detail::SqliteStore>(raw, o);
  if (Status s = store->prepare(); !s.ok()) return s;
  return std::shared_ptr<Store>(std::move(store));
}

}  // namespace

StatusOr<std::shared_ptr<Store>> open(const Options& options) {
  if (Status s = validate(options); !s.ok()) return s;
  // SQLite answers SQLITE_BUSY at once, without its busy handler, where waiting could
  // deadlock: switching to WAL while another process sets the file up is one such
  // case. Two processes started together on one file then both retry the set-up for
  // up to busy_timeout, as the busy handler would have waited.
  const auto give_up = std::chrono::steady_clock::now() + options.busy_timeout;
  for (auto pause = std::chrono::milliseconds(10);; pause = std::min(2 * pause, std::chrono::milliseconds(200))) {
    auto store = open_connection(options);
    const bool busy = !store.ok() && store.status().message().find(detail::kBusyMarker) != std::string::npos;
    if (!busy || std::chrono::steady_clock::now() + pause > give_up) return store;
    std::this_thread::sleep_for(pause);
  }
}

StatusOr<Options> parse_uri(const StoreUri& uri) {
  if (Status s = uri.check_params({"leases", "busy_timeout_ms", "synchronous", "cache_mib"}); !s.ok()) return s;
  if (uri.body.empty()) return invalid_argument("sqlite: needs a path, e.g. sqlite:/var/lib/app/idem.db");
  Options o;
  o.path = uri.body;
  if (auto v = uri.param("leases")) {
    if (*v == "local") o.leases = LeaseMode::kLocal;
    else if (*v == "shared") o.leases = LeaseMode::kShared;
    else return invalid_argument("sqlite: leases must be local or shared, got \"" + *v + "\"");
  }
  if (auto v = uri.param("synchronous")) {
    if (*v == "normal") o.synchronous = Synchronous::kNormal;
    else if (*v == "full") o.synchronous = Synchronous::kFull;
    else return invalid_argument("sqlite: synchronous must be normal or full, got \"" + *v + "\"");
  }
  auto busy = uri.param_uint("busy_timeout_ms", static_cast<std::uint64_t>(o.busy_timeout.count()));
  if (!busy.ok()) return busy.status();
  if (*busy > static_cast<std::uint64_t>(INT32_MAX)) return invalid_argument("sqlite: busy_timeout_ms is too large");
  o.busy_timeout = Duration(static_cast<std::int64_t>(*busy));
  auto cache = uri.param_uint("cache_mib", static_cast<std::uint64_t>(o.cache_mib));
  if (!cache.ok()) return cache.status();
  if (*cache == 0 || *cache > static_cast<std::uint64_t>(INT64_MAX / 1024))
    return invalid_argument("sqlite: cache_mib must be between 1 and " + std::to_string(INT64_MAX / 1024));
  o.cache_mib = static_cast<std::int64_t>(*cache);
  return o;
}

StatusOr<std::shared_ptr<Store>> open(const StoreUri& uri) {
  auto o = parse_uri(uri);
  if (!o.ok()) return o.status();
  return open(*o);
}

}  // namespace idem::sqlite

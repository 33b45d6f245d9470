// Opening the PostgreSQL store: options, URI, schema creation and version check.
#include <string>
#include <utility>

#include "postgres_store_impl.hpp"

namespace idem::postgres {
namespace {

Status validate(const Options& o) {
  if (o.schema.empty()) return invalid_argument("postgres: the schema name must not be empty");
  if (o.schema.size() > 63)
    return invalid_argument("postgres: the schema name is " + std::to_string(o.schema.size()) +
                            " bytes long; PostgreSQL allows at most 63");
  if (o.schema.find('\0') != std::string::npos) return invalid_argument("postgres: the schema name holds a NUL byte");
  if (o.pool_size == 0) return invalid_argument("postgres: pool_size must be > 0");
  for (const auto& [k, v] : o.connection)
    if (k.empty()) return invalid_argument("postgres: an empty connection keyword");
  return ok_status();
}

void set(std::vector<std::pair<std::string, std::string>>& kv, const std::string& key, std::string value) {
  for (auto& [k, v] : kv) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv.emplace_back(key, std::move(value));
}

// Splits "host[:port]" ("[v6]:port" too).
Status split_host(std::string_view hp, std::string& host, std::string& port) {
  if (hp.starts_with('[')) {
    const auto close = hp.find(']');
    if (close == std::string_view::npos) return invalid_argument("postgres: unclosed '[' in the host");
    host = std::string(hp.substr(1, close - 1));
    hp.remove_prefix(close + 1);
    if (hp.empty()) return ok_status();
    if (!hp.starts_with(':')) return invalid_argument("postgres: unexpected text after the host");
    port = std::string(hp.substr(1));
    return ok_status();
  }
  const auto colon = hp.rfind(':');
  host = std::string(hp.substr(0, colon));
  if (colon != std::string_view::npos) port = std::string(hp.substr(colon + 1));
  return ok_status();
}

}  // namespace

std::string quote_identifier(std::string_view name) {
  std::string out = "\"";
  for (char ch : name) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

StatusOr<Options> parse_uri(const StoreUri& uri) {
  if (uri.scheme != "postgres" && uri.scheme != "postgresql")
    return invalid_argument("postgres: not a postgres:// URI");
  std::string_view body = uri.body;
  if (!body.starts_with("//"))
    return invalid_argument("postgres: the URI must be postgres://USER[:PASS]@HOST[:PORT]/DB");
  body.remove_prefix(2);
  Options o;
  auto& kv = o.connection;
  // The user part ends at the last '@' (a password may hold '@' once decoded).
  if (auto u = take_userinfo(&body)) {
    if (!u->user.empty()) set(kv, "user", std::move(u->user));
    if (u->password) set(kv, "password", std::move(*u->password));
  }
  const auto slash = body.find('/');
  std::string host, port;
  if (Status s = split_host(body.substr(0, slash), host, port); !s.ok()) return s;
  if (!host.empty()) set(kv, "host", host);
  if (!port.empty()) {
    if (!parse_port(port).ok()) return invalid_argument("postgres: the port is not a number in 1..65535");
    set(kv, "port", port);
  }
  if (slash != std::string_view::npos && slash + 1 < body.size())
    set(kv, "dbname", std::string(body.substr(slash + 1)));
  for (const auto& [name, value] : uri.params) {
    if (name == "schema") {
      o.schema = value;
    } else if (name == "pool") {
      auto n = uri.param_uint("pool", o.pool_size);
      if (!n.ok()) return n.status();
      if (*n == 0 || *n > 1024) return invalid_argument("postgres: pool must be between 1 and 1024");
      o.pool_size = static_cast<std::size_t>(*n);
    } else if (name == "dbname" || name == "password" || name == "passfile" || name == "service") {
      // dbname could smuggle a whole connection string past the checks above.
      if (name == "dbname" && value.find('=') != std::string::npos)
        return invalid_argument("postgres: dbname must be a plain database name");
      set(kv, name, value);
    } else {
      set(kv, name, value);
    }
  }
  if (Status s = validate(o); !s.ok()) return s;
  return o;
}

StatusOr<std::shared_ptr<Store>> open(const Options& options) {
  if (Status s = validate(options); !s.ok()) return s;
  auto store = std::make_shared<detail::PgStore>(options);
  if (Status s = store->init(); !s.ok()) return s;
  return std::shared_ptr<Store>(std::move(store));
}

StatusOr<std::shared_ptr<Store>> open(const StoreUri& uri) {
  auto o = parse_uri(uri);
  if (!o.ok()) return o.status();
  return open(*o);
}

}  // namespace idem::postgres

namespace idem::postgres::detail {

Status PgStore::init() {
  auto c = acquire();
  if (!c.ok()) return c.status();
  Conn& conn = **c;
  if (Status s = conn.exec("BEGIN"); !s.ok()) return s;
  Status s = create_schema(conn);
  if (s.ok()) s = conn.exec("COMMIT");
  if (!s.ok() && !conn.broken()) (void)conn.exec("ROLLBACK");
  return s;
}

namespace {

// How full an insert leaves a page of idem_records, in percent. A batch commit
// updates every row a batch claim wrote, all at once: each page must hold each row's
// completed version beside its lease version, so that the update stays on the page
// (a HOT update: no new primary-key entry, about half the WAL). At 70, about half of
// a batch's commits left the page.
constexpr int kRecordsFillfactor = 45;

std::string records_fillfactor(const std::string& q) {
  return "ALTER TABLE " + q + ".idem_records SET (fillfactor = " + std::to_string(kRecordsFillfactor) + ");";
}

// The tables schema version 2 adds: the transactional outbox, in commit order (seq).
// expires_ms is NULL while an entry is unsent; the partial indexes hold the unsent
// entries only, so they stay small.
std::string outbox_tables(const std::string& q) {
  return "CREATE TABLE " + q +
         ".idem_outbox(seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, incoming bytea NOT NULL,"
         " position bigint NOT NULL, id bytea NOT NULL, destination bytea NOT NULL, body bytea NOT NULL,"
         " headers bytea NOT NULL, created_ms bigint NOT NULL, expires_ms bigint);"
         "CREATE INDEX idem_outbox_unsent ON " +
         q +
         ".idem_outbox(incoming, position) WHERE expires_ms IS NULL;"
         "CREATE INDEX idem_outbox_unsent_seq ON " +
         q + ".idem_outbox(seq) WHERE expires_ms IS NULL;";
}

}  // namespace

// REQUIRES: c in a transaction. Concurrent opens wait on an advisory lock, so only one
// creates the tables.
Status PgStore::create_schema(Conn& c) {
  const std::string q = quote_identifier(options_.schema);
  Params lock;
  lock.bytes(options_.schema);
  if (auto r =
          c.run(Sql{"idem_schema_lock", "SELECT pg_advisory_xact_lock(7283, hashtext(encode($1, 'escape')))"}, lock);
      !r.ok())
    return r.status();
  const std::string create = "CREATE SCHEMA IF NOT EXISTS " + q +
                             ";"
                             "CREATE TABLE IF NOT EXISTS " +
                             q + ".idem_meta(key text PRIMARY KEY, value bigint NOT NULL);";
  if (Status s = c.exec(create.c_str()); !s.ok()) return s;
  const std::string read = "SELECT value FROM " + q + ".idem_meta WHERE key = 'schema_version'";
  Result r(PQexecParams(c.get(), read.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 1));
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) return status_of(c.get(), r.get(), "reading the schema version");
  if (PQntuples(r.get()) == 1) {
    const std::int64_t version = get_i64(r.get(), 0, 0);
    if (version > kSchemaVersion)
      return failed_precondition("postgres: schema " + q + " was written by idem postgres schema version " +
                                 std::to_string(version) + ", newer than version " + std::to_string(kSchemaVersion) +
                                 " that this build reads; upgrade idem to open it");
    if (version < 1)
      return data_loss("postgres: schema " + q + " has an invalid schema version " + std::to_string(version));
    if (version == kSchemaVersion) return ok_status();
    // Upgraded in place, under the lock taken above: version 1 has no outbox; version 2
    // fills the pages of idem_records to 70% (rows written from now on get the room).
    const std::string upgrade = (version < 2 ? outbox_tables(q) : std::string()) + records_fillfactor(q) + "UPDATE " +
                                q + ".idem_meta SET value = " + std::to_string(kSchemaVersion) +
                                " WHERE key = 'schema_version';";
    if (Status s = c.exec(upgrade.c_str()); !s.ok()) return s;
    return ok_status();
  }
  const std::string tables =
      "CREATE TABLE " + q +
      ".idem_records(id bytea PRIMARY KEY, state smallint NOT NULL, owner bytea,"
      " lease_until_ms bigint, fingerprint bigint, result bytea, retries integer NOT NULL DEFAULT 0,"
      " expires_ms bigint NOT NULL) WITH (fillfactor = " +
      std::to_string(kRecordsFillfactor) +
      ");"
      "CREATE TABLE " +
      q +
      ".idem_entities(key bytea PRIMARY KEY, revision bigint NOT NULL,"
      " version bigint NOT NULL, state bytea NOT NULL);"
      "CREATE TABLE " +
      q +
      ".idem_buffer(key bytea NOT NULL, version bigint NOT NULL, id bytea NOT NULL,"
      " message bytea NOT NULL, buffered_ns bigint NOT NULL, PRIMARY KEY (key, version));"
      "CREATE TABLE " +
      q +
      ".idem_buffer_totals(one integer PRIMARY KEY CHECK (one = 1),"
      " count bigint NOT NULL, bytes bigint NOT NULL);"
      "INSERT INTO " +
      q + ".idem_buffer_totals VALUES (1, 0, 0);" + outbox_tables(q) + "INSERT INTO " + q +
      ".idem_meta VALUES ('schema_version', " + std::to_string(kSchemaVersion) + ");";
  if (Status s = c.exec(tables.c_str()); !s.ok())
    return data_loss("postgres: schema " + q + " has idem tables but no schema version: " + s.message());
  return ok_status();
}

}  // namespace idem::postgres::detail

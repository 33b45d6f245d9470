#include "consume_handler.hpp"

#include <sqlite3.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "builtin_handler.hpp"
#include "idem/sqlite_store.hpp"
#ifdef IDEM_TOOL_WITH_POSTGRES
#include <libpq-fe.h>

#include "idem/postgres_store.hpp"
#endif

namespace idem::cli {
namespace {

// Binds an optional text to parameter i (NULL when absent).
void bind_text(sqlite3_stmt* st, int i, const std::optional<std::string>& v) {
  if (v) {
    sqlite3_bind_text(st, i, v->data(), static_cast<int>(v->size()), SQLITE_TRANSIENT);
  } else {
    sqlite3_bind_null(st, i);
  }
}

std::int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// Whether a decision with `r` always follows a handler run that succeeded (and so left
// its effect in pending_) but whose commit did not land. Any other decision leaves
// pending_ alone: its delivery may have added nothing while another copy of the same
// id runs (a first attempt that failed is decided after its redelivered copy ran; a
// claim that met a busy store is store_unavailable, and a delivery held unstarted when
// its partition moved is unacknowledged, beside a copy that committed). A run whose
// commit failed with store_unavailable keeps its entry until the id's next processed
// decision here replaces and prints it.
bool ran_but_not_committed(Reason r) { return r == Reason::kLeaseLost || r == Reason::kConcurrentUpdate; }

}  // namespace

Status create_effects_table(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    rc = sqlite3_exec(db, kEffectsTableSql, nullptr, nullptr, nullptr);
  }
  Status s = rc == SQLITE_OK ? ok_status()
                             : unavailable("cannot create idem_effects in \"" + path + "\": " + sqlite3_errmsg(db));
  sqlite3_close(db);
  return s;
}

HandlerResult ConsumeHandler::operator()(const TraceLine& m, HandlerContext& ctx) {
  if (m.fail && ctx.attempt() == 1) return HandlerResult::fail("the message says \"fail\": true (first attempt)");
  if (where_ == EffectsIn::kSqlite) {
    if (Status s = insert_effect(m, ctx); !s.ok()) return HandlerResult::fail(s.to_string());
  } else if (where_ == EffectsIn::kPostgres) {
    if (Status s = insert_postgres_effect(m, ctx); !s.ok()) return HandlerResult::fail(s.to_string());
  }
  for (const PublishRequest& p : m.publish) {
    if (Status s = ctx.publish(p.to, p.payload); !s.ok()) return HandlerResult::fail(s.to_string());
  }
  Effect e = effect_of(m, ctx);
  if (m.id) {
    std::lock_guard lock(mu_);
    pending_[*m.id] = std::move(e);
  }
  if (ctx.guarantee() == Guarantee::kManual) ctx.ack();
  return HandlerResult::ok();
}

Status ConsumeHandler::insert_effect(const TraceLine& m, HandlerContext& ctx) {
  sqlite3* db = sqlite::connection(ctx);
  if (db == nullptr) return failed_precondition("no SQLite transaction to write idem_effects in");
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(db,
                              "INSERT INTO idem_effects(id, key, version, event, payload, at_ms) "
                              "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
                              -1, &st, nullptr);
  if (rc == SQLITE_OK) {
    bind_text(st, 1, m.id);
    bind_text(st, 2, m.key);
    if (m.version) {
      sqlite3_bind_int64(st, 3, static_cast<sqlite3_int64>(*m.version));
    } else {
      sqlite3_bind_null(st, 3);
    }
    bind_text(st, 4, m.event);
    bind_text(st, 5, m.payload);
    sqlite3_bind_int64(st, 6, now_ms());
    rc = sqlite3_step(st);
  }
  Status s = rc == SQLITE_DONE ? ok_status() : unavailable(std::string("idem_effects insert: ") + sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return s;
}

#ifdef IDEM_TOOL_WITH_POSTGRES
Status create_postgres_effects_table(const std::string& uri, std::string* table) {
  auto u = StoreUri::parse(uri);
  if (!u.ok()) return u.status();
  auto o = postgres::parse_uri(*u);
  if (!o.ok()) return o.status();
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : o->connection) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* c = PQconnectdbParams(keys.data(), values.data(), 0);
  PQsetNoticeProcessor(
      c, [](void*, const char*) {}, nullptr);
  const std::string schema = postgres::quote_identifier(o->schema);
  *table = schema + ".idem_effects";
  const std::string sql = "CREATE SCHEMA IF NOT EXISTS " + schema + "; CREATE TABLE IF NOT EXISTS " + *table +
                          "(seq bigserial PRIMARY KEY, id text, key text, version bigint, event text, payload text,"
                          " at_ms bigint NOT NULL)";
  Status s = ok_status();
  if (PQstatus(c) != CONNECTION_OK) {
    s = unavailable(std::string("cannot create idem_effects: ") + PQerrorMessage(c));
  } else {
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
      s = unavailable(std::string("cannot create idem_effects: ") + PQresultErrorMessage(r));
    PQclear(r);
  }
  PQfinish(c);
  return s;
}

Status ConsumeHandler::insert_postgres_effect(const TraceLine& m, HandlerContext& ctx) {
  PGconn* c = postgres::connection(ctx);
  if (c == nullptr) return failed_precondition("no PostgreSQL transaction to write idem_effects in");
  const std::string sql =
      "INSERT INTO " + postgres_table_ + "(id, key, version, event, payload, at_ms) VALUES ($1, $2, $3, $4, $5, $6)";
  const std::string version = m.version ? std::to_string(*m.version) : std::string();
  const std::string at = std::to_string(now_ms());
  auto text = [](const std::optional<std::string>& v) { return v ? v->c_str() : nullptr; };
  const char* params[6] = {text(m.id),    text(m.key),     m.version ? version.c_str() : nullptr,
                           text(m.event), text(m.payload), at.c_str()};
  PGresult* r = PQexecParams(c, sql.c_str(), 6, nullptr, params, nullptr, nullptr, 0);
  Status s = PQresultStatus(r) == PGRES_COMMAND_OK
                 ? ok_status()
                 : unavailable(std::string("idem_effects insert: ") + PQresultErrorMessage(r));
  PQclear(r);
  return s;
}
#else
Status create_postgres_effects_table(const std::string&, std::string*) {
  return failed_precondition("this build has no PostgreSQL store");
}
Status ConsumeHandler::insert_postgres_effect(const TraceLine&, HandlerContext&) {
  return failed_precondition("this build has no PostgreSQL store");
}
#endif

void ConsumeHandler::committed(const std::optional<std::string>& id) {
  if (!id) return;
  std::lock_guard lock(mu_);
  auto it = pending_.find(*id);
  if (it == pending_.end()) return;
  ReplayWriter(out_).effect(it->second);
  pending_.erase(it);
}

void ConsumeHandler::decided(const std::string& broker_id, const std::optional<std::string>& id, const Decision& d) {
  if (d.action == Action::kAck && d.reason == Reason::kProcessed) {
    committed(id);
  } else if (id && ran_but_not_committed(d.reason)) {
    std::lock_guard lock(mu_);
    pending_.erase(*id);  // that run's commit did not land
  }
  const std::string line = decision_line(broker_id, id, d);
  std::lock_guard lock(mu_);
  out_ << line << '\n';
}

void ConsumeHandler::buffered(const BufferedOutcome& b) {
  if (b.decision.reason == Reason::kProcessed) return committed(b.id);
  if (b.decision.action != Action::kDeadLetter) return;
  const std::string line = buffered_line(b, b.message);
  std::lock_guard lock(mu_);
  out_ << line << '\n';
}

std::string buffered_line(const BufferedOutcome& b, const std::optional<std::string>& body) {
  nlohmann::ordered_json j;
  j["type"] = "buffered";
  j["id"] = b.id;
  j["key"] = b.key;
  j["version"] = b.version;
  j["action"] = action_name(b.decision.action);
  j["reason"] = reason_name(b.decision.reason);
  if (!b.decision.detail.empty()) j["detail"] = b.decision.detail;
  if (body) j["body"] = *body;
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string decision_line(const std::string& broker_id, const std::optional<std::string>& id, const Decision& d) {
  nlohmann::ordered_json j;
  j["type"] = "decision";
  j["delivery"] = broker_id;
  if (id) j["id"] = *id;
  j["action"] = action_name(d.action);
  j["reason"] = reason_name(d.reason);
  if (d.action == Action::kRetry) j["delay_ms"] = d.delay.count();
  if (!d.detail.empty()) j["detail"] = d.detail;
  if (d.result) j["result"] = *d.result;
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace idem::cli

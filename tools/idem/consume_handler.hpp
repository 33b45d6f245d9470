// The handler `idem consume` runs for every message (tools/idem/README.md): it fails
// a message with "fail": true on its first attempt (the durable attempt number, so
// wherever that attempt runs), records each effect, and in transactional mode on
// SQLite or PostgreSQL inserts one row per effect into idem_effects in the dedup
// record's transaction, and publishes what the message's "publish" field lists through
// the outbox (ctx.publish; sent after the commit). Effects are printed only once
// committed. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>

#include "idem/decision.hpp"
#include "idem/handler.hpp"
#include "idem/ordering.hpp"
#include "idem/status.hpp"
#include "replay_output.hpp"
#include "trace_line.hpp"

namespace idem::cli {

// The table of effects: one row per committed effect, in commit order.
inline constexpr const char* kEffectsTableSql =
    "CREATE TABLE IF NOT EXISTS idem_effects(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, key TEXT, "
    "version INTEGER, event TEXT, payload TEXT, at_ms INTEGER NOT NULL)";

// Creates idem_effects in the SQLite database at `path` if absent.
Status create_effects_table(const std::string& path);

// Where the handler writes idem_effects, in the dedup record's transaction.
enum class EffectsIn {
  kNowhere,
  kSqlite,    // through idem::sqlite::connection(ctx)
  kPostgres,  // through idem::postgres::connection(ctx), in the store's schema
};

// Creates idem_effects in the schema of the postgres:// store `uri` if absent
// (schema included) and sets *table to its qualified, quoted name.
Status create_postgres_effects_table(const std::string& uri, std::string* table);

// The decision line of one delivery: {"type":"decision","delivery":BROKER_ID,"id":…,
// "action":…,"reason":…,"delay_ms":… (retries),"detail":…,"result":… (the stored
// result, given to a duplicate too)}.
std::string decision_line(const std::string& broker_id, const std::optional<std::string>& id, const Decision& d);

// The line of a message that left the reorder buffer other than processed:
// {"type":"buffered","id":…,"key":…,"version":…,"action":…,"reason":…,"detail":…,
// "body":… (when dead-lettered: it was acked when buffered, so this line is the
// operator's record of it)}.
std::string buffered_line(const BufferedOutcome& b, const std::optional<std::string>& body);

class ConsumeHandler {
 public:
  // postgres_table: the qualified name of idem_effects when `where` is kPostgres.
  ConsumeHandler(EffectsIn where, std::ostream& out, std::string postgres_table = {})
      : where_(where), postgres_table_(std::move(postgres_table)), out_(out) {}

  HandlerResult operator()(const TraceLine& m, HandlerContext& ctx);

  // The delivery (or buffered message) `id` was committed as processed: print its effect.
  void committed(const std::optional<std::string>& id);
  // Prints the decision line of one delivery, {"type":"decision","delivery":…,"id":…,…},
  // after its effect line when it was processed.
  void decided(const std::string& broker_id, const std::optional<std::string>& id, const Decision& d);
  // A buffered message's outcome (ConsumerOptions::on_buffered): its effect when
  // processed, its buffered_line() when dead-lettered.
  void buffered(const BufferedOutcome& b);

 private:
  Status insert_effect(const TraceLine& m, HandlerContext& ctx);
  Status insert_postgres_effect(const TraceLine& m, HandlerContext& ctx);

  const EffectsIn where_;
  const std::string postgres_table_;
  std::mutex mu_;
  std::ostream& out_;
  std::map<std::string, Effect> pending_;  // ran, not known to be committed yet
};

}  // namespace idem::cli

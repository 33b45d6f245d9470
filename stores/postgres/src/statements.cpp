// The SQL of the PostgreSQL store. '@' stands for the quoted schema name.
#include <string>

#include "postgres_store_impl.hpp"

namespace idem::postgres::detail {
namespace {

// What a claim writes over an existing row: a new lease, keeping a live retry count
// (and its expiry). Granted only if the row is not done and unexpired and its lease
// (if any) has expired; $N is now.
std::string claim_update(const char* now) {
  const std::string n = now;
  return " ON CONFLICT (id) DO UPDATE SET state = 1, owner = excluded.owner,"
         " lease_until_ms = excluded.lease_until_ms, fingerprint = excluded.fingerprint, result = NULL,"
         " retries = CASE WHEN r.state < 2 AND r.expires_ms > " +
         n +
         " THEN r.retries ELSE 0 END,"
         " expires_ms = CASE WHEN r.state < 2 AND r.expires_ms > " +
         n +
         " AND r.retries > 0 THEN r.expires_ms ELSE excluded.lease_until_ms END"
         " WHERE NOT (r.state >= 2 AND r.expires_ms > " +
         n + ") AND NOT (r.state = 1 AND r.lease_until_ms > " + n + ")";
}

// What a commit writes over an existing row, unless the row is done and unexpired or
// another owner (excluded.owner is the committing one) holds a live lease.
std::string commit_update(const char* now) {
  const std::string n = now;
  return " ON CONFLICT (id) DO UPDATE SET state = excluded.state, owner = excluded.owner, lease_until_ms = NULL,"
         " fingerprint = excluded.fingerprint, result = excluded.result, retries = 0,"
         " expires_ms = excluded.expires_ms"
         " WHERE NOT (r.state >= 2 AND r.expires_ms > " +
         n + ") AND NOT (r.state = 1 AND r.lease_until_ms > " + n + " AND r.owner IS DISTINCT FROM excluded.owner)";
}

constexpr const char* kRecordColumns = "(id, state, owner, lease_until_ms, fingerprint, result, retries, expires_ms)";

// Whether a row is expired at $1 (an abandoned lease included; a live lease is not).
constexpr const char* kDead = "(expires_ms <= $1 AND NOT (state = 1 AND lease_until_ms > $1))";

Sql make(const std::string& schema, const char* name, std::string text) {
  std::string out;
  out.reserve(text.size() + 64);
  for (char ch : text) {
    if (ch == '@') {
      out += schema;
    } else {
      out += ch;
    }
  }
  return Sql{std::string("idem_") + name, std::move(out)};
}

// The last column of a claim's answer: whether the record that refused (closed by
// the caller with its id and "))") has unsent outbox entries (ClaimResult::outbox_unsent),
// through the partial index of the unsent rows; looked up only when parameter $7 (the
// request's check_outbox) is 1.
constexpr const char* kUnsentOf =
    " ($7::int8 = 1 AND EXISTS (SELECT 1 FROM @.idem_outbox o WHERE o.expires_ms IS NULL AND o.incoming = ";

// The record statements: claims, commits, release, extend and the purge scan.
void add_record_statements(Statements& t, const std::string& s) {
  // Both claim forms answer the same columns: ord, granted, retries, then the row that
  // refused (state, owner, lease_until_ms, fingerprint, result, expires_ms), then the
  // entity record of a granted claim (revision, version, state), then kUnsentOf.
  // The *_async forms also turn synchronous_commit off for the statement's own
  // transaction (set_config(…, true)): a lease is visible at once but not flushed
  // before the answer. Used only outside a transaction of the caller's.
  // The WHERE on its value keeps the planner from dropping the unreferenced call.
  const std::string async = " CROSS JOIN (SELECT set_config('synchronous_commit', 'off', true) AS v) cfg";
  const std::string async_where = " WHERE cfg.v IS NOT NULL";
  for (const bool a : {false, true}) {
    (a ? t.claim_async : t.claim) =
        make(s, a ? "claim_async" : "claim",
             std::string("WITH ins AS (INSERT INTO @.idem_records AS r ") + kRecordColumns +
                 " VALUES ($1, 1, $2, $3, $4, NULL, 0, $3)" + claim_update("$5") +
                 " RETURNING r.retries)"
                 " SELECT 1::int8, true, ins.retries, NULL::int2, NULL::bytea, NULL::int8, NULL::int8, NULL::bytea,"
                 " NULL::int8, e.revision, e.version, e.state, false FROM ins" +
                 (a ? async : "") + " LEFT JOIN @.idem_entities e ON e.key = $6" + (a ? async_where : "") +
                 " UNION ALL"
                 " SELECT 1::int8, false, 0, r.state, r.owner, r.lease_until_ms, r.fingerprint, r.result,"
                 " r.expires_ms, NULL, NULL, NULL," +
                 kUnsentOf +
                 "r.id)) FROM @.idem_records r"
                 " WHERE r.id = $1 AND NOT EXISTS (SELECT 1 FROM ins)");
    (a ? t.claim_batch_async : t.claim_batch) = make(
        s, a ? "claim_batch_async" : "claim_batch",
        std::string("WITH q AS (SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::int8[], $4::int8[], $5::bytea[])"
                    " WITH ORDINALITY AS q(id, owner, until_ms, fp, ek, ord)),"
                    " ins AS (INSERT INTO @.idem_records AS r ") +
            kRecordColumns + " SELECT id, 1, owner, until_ms, fp, NULL, 0, until_ms FROM q ORDER BY id" +
            claim_update("$6") +
            " RETURNING r.id, r.retries)"
            " SELECT q.ord, ins.id IS NOT NULL, ins.retries, cur.state, cur.owner, cur.lease_until_ms,"
            " cur.fingerprint, cur.result, cur.expires_ms, e.revision, e.version, e.state," +
            kUnsentOf + "cur.id)) FROM q" + (a ? async : "") +
            " LEFT JOIN ins ON ins.id = q.id"
            // LATERAL: one primary-key probe per request, never a scan of the table.
            " LEFT JOIN LATERAL (SELECT * FROM @.idem_records c WHERE c.id = q.id AND ins.id IS NULL) cur ON true"
            " LEFT JOIN LATERAL (SELECT * FROM @.idem_entities x WHERE x.key = q.ek AND ins.id IS NOT NULL) e"
            " ON true" +
            (a ? async_where : "") + " ORDER BY q.ord");
  }
  // The lean forms, for batches without entity keys: they answer only the granted ids
  // (id, retries); the caller asks again, one by one, for the others (a duplicate, a
  // held lease). The caller sorts the requests by id, so that concurrent batches lock
  // rows in one order.
  for (const bool a : {false, true}) {
    (a ? t.claim_lean_async : t.claim_lean) =
        make(s, a ? "claim_lean_async" : "claim_lean",
             std::string("WITH ins AS (INSERT INTO @.idem_records AS r ") + kRecordColumns +
                 " SELECT id, 1, owner, until_ms, fp, NULL, 0, until_ms"
                 " FROM unnest($1::bytea[], $2::bytea[], $3::int8[], $4::int8[]) AS q(id, owner, until_ms, fp)" +
                 claim_update("$5") + " RETURNING r.id, r.retries) SELECT ins.id, ins.retries FROM ins" +
                 (a ? async + async_where : ""));
  }
  t.commit = make(s, "commit",
                  std::string("INSERT INTO @.idem_records AS r ") + kRecordColumns +
                      " VALUES ($1, $2, $3, NULL, $4, $5, 0, $6)" + commit_update("$7"));
  // A batch commit updates the rows that exist (the claims wrote them) with a plain
  // UPDATE, which costs less than ON CONFLICT's speculative insertion and tuple lock,
  // and answers the ids it wrote; the caller commits the others one by one (an id
  // without a row, or a refusal to explain). READ COMMITTED re-checks the owner
  // condition on the latest row version. The caller sorts the requests by id.
  t.commit_batch = make(s, "commit_batch",
                        "UPDATE @.idem_records AS r SET state = q.state, owner = q.owner, lease_until_ms = NULL,"
                        " fingerprint = q.fp, result = q.result, retries = 0, expires_ms = q.expires"
                        " FROM unnest($1::bytea[], $2::int8[], $3::bytea[], $4::int8[], $5::bytea[], $6::int8[])"
                        " AS q(id, state, owner, fp, result, expires)"
                        // = ANY($1): the generic plan finds the rows by the primary key
                        // rather than by a hash join over the whole table.
                        " WHERE r.id = ANY($1::bytea[]) AND r.id = q.id AND NOT (r.state >= 2 AND r.expires_ms > $7)"
                        " AND NOT (r.state = 1 AND r.lease_until_ms > $7 AND r.owner IS DISTINCT FROM q.owner)"
                        " RETURNING r.id");
  // The same, for a batch whose requests differ only in their ids (one outcome, owner,
  // fingerprint, result and expiry): no join, one primary-key probe per id.
  t.commit_batch_same = make(s, "commit_batch_same",
                             "UPDATE @.idem_records AS r SET state = $2, owner = $3, lease_until_ms = NULL,"
                             " fingerprint = $4, result = $5, retries = 0, expires_ms = $6"
                             " WHERE r.id = ANY($1::bytea[]) AND NOT (r.state >= 2 AND r.expires_ms > $7)"
                             " AND NOT (r.state = 1 AND r.lease_until_ms > $7 AND r.owner IS DISTINCT FROM $3)"
                             " RETURNING r.id");
  const std::string row =
      "SELECT state, owner, lease_until_ms, fingerprint, result, retries, expires_ms FROM @.idem_records WHERE id = $1";
  t.read_row = make(s, "read_row", row);
  t.read_row_locked = make(s, "read_row_locked", row + " FOR UPDATE");
  t.upsert_pending = make(s, "upsert_pending",
                          std::string("INSERT INTO @.idem_records AS r ") + kRecordColumns +
                              " VALUES ($1, 0, NULL, NULL, $2, NULL, $3, $4)"
                              " ON CONFLICT (id) DO UPDATE SET state = 0, owner = NULL, lease_until_ms = NULL,"
                              " fingerprint = excluded.fingerprint, result = NULL, retries = excluded.retries,"
                              " expires_ms = excluded.expires_ms");
  t.delete_row = make(s, "delete_row", "DELETE FROM @.idem_records WHERE id = $1");
  t.extend = make(s, "extend",
                  "UPDATE @.idem_records SET lease_until_ms = $3,"
                  " expires_ms = CASE WHEN retries > 0 THEN expires_ms ELSE $3 END"
                  " WHERE id = $1 AND state = 1 AND owner = $2 AND lease_until_ms > $4");
  // The purge scan: up to $3 rows in id order from the first row (purge_from) or after
  // the cursor $4 (purge_after); deletes the first $2 of them expired at $1. Answers
  // the rows deleted, the rows scanned, the expired ones found (up to $2), the last
  // expired one found and the last row scanned.
  const std::string purge_tail = std::string(" ORDER BY id LIMIT $3),") +
                                 " dead AS (SELECT id FROM scan WHERE dead ORDER BY id LIMIT $2),"
                                 " del AS (DELETE FROM @.idem_records WHERE id IN (SELECT id FROM dead) AND " +
                                 kDead +
                                 " RETURNING 1)"
                                 " SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM scan),"
                                 " (SELECT count(*) FROM dead), (SELECT id FROM dead ORDER BY id DESC LIMIT 1), "
                                 "(SELECT id FROM scan ORDER BY id DESC LIMIT 1)";
  t.purge_from = make(s, "purge_from",
                      std::string("WITH scan AS (SELECT id, ") + kDead + " AS dead FROM @.idem_records" + purge_tail);
  t.purge_after = make(
      s, "purge_after",
      std::string("WITH scan AS (SELECT id, ") + kDead + " AS dead FROM @.idem_records WHERE id > $4" + purge_tail);
}

}  // namespace

Sql make_sql(const std::string& schema, const char* name, std::string text) {
  return make(schema, name, std::move(text));
}

Statements::Statements(const std::string& s) {
  add_record_statements(*this, s);
  add_outbox_statements(*this, s);
  read_entity = make(s, "read_entity", "SELECT revision, version, state FROM @.idem_entities WHERE key = $1");
  insert_entity = make(s, "insert_entity",
                       "INSERT INTO @.idem_entities(key, revision, version, state)"
                       " VALUES ($1, 1, COALESCE($2, 0), COALESCE($3, ''::bytea)) ON CONFLICT (key) DO NOTHING");
  update_entity = make(s, "update_entity",
                       "UPDATE @.idem_entities SET revision = revision + 1, version = COALESCE($2, version),"
                       " state = COALESCE($3, state) WHERE key = $1 AND revision = $4");
  unbuffer = make(s, "unbuffer",
                  "WITH d AS (DELETE FROM @.idem_buffer WHERE key = $1 AND version = $2"
                  " RETURNING octet_length(key) + octet_length(id) + octet_length(message) AS n)"
                  " UPDATE @.idem_buffer_totals SET count = count - (SELECT count(*) FROM d),"
                  " bytes = bytes - (SELECT COALESCE(sum(n), 0) FROM d) WHERE one = 1 AND EXISTS (SELECT 1 FROM d)");
  buffer_lock_totals =
      make(s, "buffer_lock_totals", "SELECT count, bytes FROM @.idem_buffer_totals WHERE one = 1 FOR UPDATE");
  buffer_check = make(s, "buffer_check",
                      "SELECT (SELECT id FROM @.idem_buffer WHERE key = $1 AND version = $2),"
                      " (SELECT count(*) FROM (SELECT 1 FROM @.idem_buffer WHERE key = $1 LIMIT $3) k)");
  buffer_insert = make(s, "buffer_insert",
                       "WITH ins AS (INSERT INTO @.idem_buffer(key, version, id, message, buffered_ns)"
                       " VALUES ($1, $2, $3, $4, $5) RETURNING 1)"
                       " UPDATE @.idem_buffer_totals SET count = count + 1, bytes = bytes + $6 WHERE one = 1"
                       " AND EXISTS (SELECT 1 FROM ins)");
  buffer_read = make(s, "buffer_read",
                     "SELECT version, id, message, buffered_ns FROM @.idem_buffer WHERE key = $1"
                     " ORDER BY version LIMIT $2");
  buffer_totals = make(s, "buffer_totals", "SELECT count, bytes FROM @.idem_buffer_totals WHERE one = 1");
  buffer_keys = make(s, "buffer_keys",
                     "SELECT key, count(*), min(version), min(buffered_ns) FROM @.idem_buffer GROUP BY key"
                     " ORDER BY 4, 1 LIMIT $1");
  server_time = make(s, "server_time", "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8");
  count_records = make(s, "count_records",
                       "SELECT count(*) FILTER (WHERE state = 1 AND lease_until_ms > $1),"
                       " count(*) FILTER (WHERE state = 2 AND expires_ms > $1),"
                       " count(*) FILTER (WHERE state = 3 AND expires_ms > $1),"
                       " count(*) FILTER (WHERE state < 2 AND NOT (state = 1 AND lease_until_ms > $1)"
                       "   AND expires_ms > $1 AND retries > 0),"
                       " count(*) FILTER (WHERE NOT ((state = 1 AND lease_until_ms > $1) OR (expires_ms > $1"
                       "   AND (state >= 2 OR retries > 0))))"
                       " FROM @.idem_records");
  remove_record =
      make(s, "remove_record",
           "DELETE FROM @.idem_records WHERE id = $1"
           " RETURNING (state = 1 AND lease_until_ms > $2) OR (expires_ms > $2 AND (state >= 2 OR retries > 0))");
  remove_entity_record = make(s, "remove_entity_record", "DELETE FROM @.idem_entities WHERE key = $1");
  remove_entity_buffer = make(s, "remove_entity_buffer",
                              "WITH d AS (DELETE FROM @.idem_buffer WHERE key = $1"
                              " RETURNING octet_length(key) + octet_length(id) + octet_length(message) AS n)"
                              " UPDATE @.idem_buffer_totals SET count = count - (SELECT count(*) FROM d),"
                              " bytes = bytes - (SELECT COALESCE(sum(n), 0) FROM d) WHERE one = 1"
                              " RETURNING (SELECT count(*) FROM d)");
}

}  // namespace idem::postgres::detail

// The transactional outbox of the SQLite store (idem_outbox; schema.hpp): the entries
// a commit writes, outbox_pending, outbox_mark_sent (which removes them), and whether
// an incoming id has unsent entries (its claim's ClaimResult::outbox_unsent).
#include <limits>
#include <string>

#include "sqlite_store_impl.hpp"

namespace idem::sqlite::detail {
namespace {

// idem_outbox holds the unsent entries only (schema.hpp): a commit inserts them, and
// marking them sent deletes them, so the table stays as small as the backlog and, in
// the steady state, both land on the same page.
constexpr std::string_view kOutboxInsert =
    "INSERT OR REPLACE INTO idem_outbox(incoming, position, id, destination, body, headers, created_ms)"
    " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)";
constexpr std::string_view kOutboxColumns =
    "SELECT incoming, position, id, destination, body, headers, created_ms FROM idem_outbox";
constexpr std::string_view kOutboxPendingAll = " WHERE created_ms <= ?1 ORDER BY incoming, position LIMIT ?2";
constexpr std::string_view kOutboxPendingOf = " WHERE incoming = ?1 AND created_ms <= ?3 ORDER BY position LIMIT ?2";
constexpr std::string_view kOutboxMarkSent = "DELETE FROM idem_outbox WHERE incoming = ?1 AND position = ?2";
constexpr std::string_view kOutboxHasUnsent = "SELECT 1 FROM idem_outbox WHERE incoming = ?1 LIMIT 1";

std::int64_t clamp_i64(std::size_t n) {
  return n > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())
             ? std::numeric_limits<std::int64_t>::max()
             : static_cast<std::int64_t>(n);
}

}  // namespace

std::vector<std::pair<Statement*, std::string_view>> SqliteStore::outbox_statements() {
  static const std::string pending_all = std::string(kOutboxColumns) + std::string(kOutboxPendingAll);
  static const std::string pending_of = std::string(kOutboxColumns) + std::string(kOutboxPendingOf);
  return {{&outbox_insert_, kOutboxInsert},
          {&outbox_pending_all_, pending_all},
          {&outbox_pending_of_, pending_of},
          {&outbox_mark_, kOutboxMarkSent},
          {&outbox_has_unsent_, kOutboxHasUnsent}};
}

Status SqliteStore::write_outbox(const CommitRequest& q) {
  for (const OutboxEntry& e : q.outbox) {
    const std::string headers = encode_headers(e.message.headers);
    Use u(outbox_insert_);
    using sv = std::string_view;
    u.blob(1, sv(e.incoming_id)).i64(2, e.position).blob(3, sv(e.message.id)).blob(4, sv(e.destination));
    u.blob(5, sv(e.message.body)).blob(6, sv(headers)).i64(7, to_unix_ms(e.created_at));
    if (int rc = u.step(); rc != SQLITE_DONE) return error(rc, "writing the outbox of");
  }
  return ok_status();
}

StatusOr<std::vector<OutboxEntry>> SqliteStore::outbox_pending(const OutboxQuery& q) {
  if (q.max == 0) return invalid_argument("outbox_pending: max must be > 0");
  std::lock_guard lock(mu_);
  Use u(q.incoming_id ? outbox_pending_of_ : outbox_pending_all_);
  if (q.incoming_id) {
    u.blob(1, *q.incoming_id).i64(2, clamp_i64(q.max)).i64(3, to_unix_ms(q.created_up_to));
  } else {
    u.i64(1, to_unix_ms(q.created_up_to)).i64(2, clamp_i64(q.max));
  }
  std::vector<OutboxEntry> out;
  int rc;
  while ((rc = u.step()) == SQLITE_ROW) {
    OutboxEntry e;
    e.incoming_id = u.column_blob(0);
    e.position = static_cast<std::uint32_t>(u.column_i64(1));
    e.message.id = u.column_blob(2);
    e.destination = u.column_blob(3);
    e.message.body = u.column_blob(4);
    auto headers = decode_headers(u.column_blob(5));
    if (!headers) return data_loss("sqlite: " + options_.path + ": an outbox entry has malformed headers");
    e.message.headers = std::move(*headers);
    e.created_at = from_unix_ms(u.column_i64(6));
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return error(rc, "reading the outbox of");
  return out;
}

StatusOr<bool> SqliteStore::has_unsent(std::string_view incoming_id) {
  Use u(outbox_has_unsent_);
  u.blob(1, incoming_id);
  const int rc = u.step();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return error(rc, "reading the outbox of");
  return rc == SQLITE_ROW;
}

Status SqliteStore::outbox_mark_sent(std::span<const OutboxEntry> sent, TimePoint /*now*/, Duration ttl) {
  if (ttl.count() <= 0) return invalid_argument("outbox_mark_sent: ttl must be > 0");
  if (sent.empty()) return ok_status();
  std::lock_guard lock(mu_);
  WriteScope w(*this);
  if (Status s = w.start(); !s.ok()) return s;
  for (const OutboxEntry& e : sent) {
    Use u(outbox_mark_);
    u.blob(1, std::string_view(e.incoming_id)).i64(2, e.position);
    if (int rc = u.step(); rc != SQLITE_DONE) return error(rc, "marking outbox entries sent in");
  }
  if (Status s = fault("outbox.mark_sent.before_commit"); !s.ok()) return s;
  return w.finish();
}

}  // namespace idem::sqlite::detail

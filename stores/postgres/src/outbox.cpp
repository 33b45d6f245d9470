// The transactional outbox of the PostgreSQL store (idem_outbox; open.cpp): the
// entries a commit writes, outbox_pending, outbox_mark_sent, and the purge of sent
// entries.
#include <limits>
#include <string>
#include <vector>

#include "postgres_store_impl.hpp"

namespace idem::postgres::detail {
namespace {

std::int64_t clamp_i64(std::size_t n) {
  return n > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())
             ? std::numeric_limits<std::int64_t>::max()
             : static_cast<std::int64_t>(n);
}

}  // namespace

void add_outbox_statements(Statements& t, const std::string& s) {
  // One statement for every entry of a commit (or of a batch), in their order: seq
  // follows the order of the rows.
  t.outbox_insert = make_sql(s, "outbox_insert",
                             "INSERT INTO @.idem_outbox(incoming, position, id, destination, body, headers, created_ms)"
                             " SELECT incoming, position, id, destination, body, headers, created_ms"
                             " FROM unnest($1::bytea[], $2::int8[], $3::bytea[], $4::bytea[], $5::bytea[],"
                             " $6::bytea[], $7::int8[]) WITH ORDINALITY"
                             " AS q(incoming, position, id, destination, body, headers, created_ms, ord) ORDER BY ord");
  const std::string columns =
      "SELECT incoming, position, id, destination, body, headers, created_ms FROM @.idem_outbox";
  t.outbox_pending_all = make_sql(s, "outbox_pending_all",
                                  columns + " WHERE expires_ms IS NULL AND created_ms <= $1 ORDER BY seq LIMIT $2");
  t.outbox_pending_of =
      make_sql(s, "outbox_pending_of",
               columns + " WHERE incoming = $3 AND expires_ms IS NULL AND created_ms <= $1 ORDER BY position LIMIT $2");
  t.outbox_mark_sent = make_sql(s, "outbox_mark_sent",
                                "UPDATE @.idem_outbox o SET expires_ms = $3"
                                " FROM unnest($1::bytea[], $2::int8[]) AS q(incoming, position)"
                                " WHERE o.incoming = q.incoming AND o.position = q.position AND o.expires_ms IS NULL");
  // Sent entries expired at $1, at most $2, among the $3 oldest rows (by seq): sent
  // entries expire about in commit order, and the scan stays bounded.
  t.outbox_purge = make_sql(s, "outbox_purge",
                            "DELETE FROM @.idem_outbox WHERE seq IN (SELECT seq FROM @.idem_outbox"
                            " WHERE seq < (SELECT min(seq) FROM @.idem_outbox) + $3 AND expires_ms <= $1"
                            " ORDER BY seq LIMIT $2)");
}

Status PgStore::write_outbox_in(Conn& c, const std::vector<const OutboxEntry*>& entries) {
  if (entries.empty()) return ok_status();
  std::vector<std::string> headers;
  headers.reserve(entries.size());
  std::vector<std::optional<std::string_view>> incoming, id, destination, body, header_bytes;
  std::vector<std::optional<std::int64_t>> position, created;
  for (const OutboxEntry* e : entries) {
    headers.push_back(encode_headers(e->message.headers));
    incoming.emplace_back(e->incoming_id);
    position.emplace_back(static_cast<std::int64_t>(e->position));
    id.emplace_back(e->message.id);
    destination.emplace_back(e->destination);
    body.emplace_back(e->message.body);
    created.emplace_back(to_unix_ms(e->created_at));
  }
  for (const std::string& h : headers) header_bytes.emplace_back(h);
  Params p;
  p.bytes_array(incoming).i64_array(position).bytes_array(id).bytes_array(destination).bytes_array(body);
  p.bytes_array(header_bytes).i64_array(created);
  auto r = c.run(sql_.outbox_insert, p);
  return r.ok() ? ok_status() : r.status();
}

StatusOr<std::vector<OutboxEntry>> PgStore::outbox_pending(const OutboxQuery& q) {
  if (q.max == 0) return invalid_argument("outbox_pending: max must be > 0");
  auto c = acquire();
  if (!c.ok()) return c.status();
  Params p;
  p.i64(to_unix_ms(q.created_up_to)).i64(clamp_i64(q.max));
  if (q.incoming_id) p.bytes(*q.incoming_id);
  auto r = (*c)->run(q.incoming_id ? sql_.outbox_pending_of : sql_.outbox_pending_all, p);
  if (!r.ok()) return r.status();
  const PGresult* res = r->get();
  std::vector<OutboxEntry> out;
  out.reserve(static_cast<std::size_t>(PQntuples(res)));
  for (int row = 0; row < PQntuples(res); ++row) {
    OutboxEntry e;
    e.incoming_id = get_bytes(res, row, 0);
    e.position = static_cast<std::uint32_t>(get_i64(res, row, 1));
    e.message.id = get_bytes(res, row, 2);
    e.destination = get_bytes(res, row, 3);
    e.message.body = get_bytes(res, row, 4);
    auto headers = decode_headers(get_bytes(res, row, 5));
    if (!headers) return data_loss("postgres: schema " + options_.schema + ": an outbox entry has malformed headers");
    e.message.headers = std::move(*headers);
    e.created_at = from_unix_ms(get_i64(res, row, 6));
    out.push_back(std::move(e));
  }
  return out;
}

Status PgStore::outbox_mark_sent(std::span<const OutboxEntry> sent, TimePoint now, Duration ttl) {
  if (ttl.count() <= 0) return invalid_argument("outbox_mark_sent: ttl must be > 0");
  if (sent.empty()) return ok_status();
  std::vector<std::optional<std::string_view>> incoming;
  std::vector<std::optional<std::int64_t>> position;
  for (const OutboxEntry& e : sent) {
    incoming.emplace_back(e.incoming_id);
    position.emplace_back(static_cast<std::int64_t>(e.position));
  }
  Params p;
  p.bytes_array(incoming).i64_array(position).i64(to_unix_ms(now) + ttl.count());
  auto mark = [&](Conn& c) -> Status {
    auto r = c.run(sql_.outbox_mark_sent, p);
    if (!r.ok()) return r.status();
    return fault("outbox.mark_sent.before_commit");
  };
  if (options_.fault_hook) return in_transaction(mark);
  auto c = acquire();  // one statement: atomic by itself
  if (!c.ok()) return c.status();
  return mark(**c);
}

StatusOr<std::size_t> PgStore::purge_outbox(Conn& c, std::int64_t now_ms, std::size_t max) {
  if (max == 0) return std::size_t{0};
  constexpr std::size_t kScanFactor = 4, kScanMin = 64;  // rows read per removal at most, as purge_expired
  Params p;
  p.i64(now_ms).i64(clamp_i64(max)).i64(clamp_i64(max > SIZE_MAX / 8 ? SIZE_MAX / 2 : kScanFactor * max + kScanMin));
  auto r = c.run(sql_.outbox_purge, p);
  if (!r.ok()) return r.status();
  return static_cast<std::size_t>(changed(r->get()));
}

}  // namespace idem::postgres::detail

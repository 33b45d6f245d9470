// Entity records and the reorder buffer of the PostgreSQL store.
#include <algorithm>
#include <string>
#include <vector>

#include "postgres_store_impl.hpp"

namespace idem::postgres::detail {
namespace {

std::int64_t to_ns(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
TimePoint from_ns(std::int64_t ns) {
  return TimePoint(std::chrono::duration_cast<TimePoint::duration>(std::chrono::nanoseconds(ns)));
}
std::int64_t clamp(std::size_t n) { return static_cast<std::int64_t>(std::min<std::size_t>(n, INT64_MAX)); }

std::optional<std::int64_t> opt_u64(const std::optional<std::uint64_t>& v) {
  return v ? std::optional<std::int64_t>(static_cast<std::int64_t>(*v)) : std::nullopt;
}

}  // namespace

StatusOr<EntityRecord> PgStore::read_entity(std::string_view key) {
  if (Status s = check_entity_key(key, "read_entity"); !s.ok()) return s;
  auto c = acquire();
  if (!c.ok()) return c.status();
  Params p;
  p.bytes(key);
  auto r = (*c)->run(sql_.read_entity, p);
  if (!r.ok()) return r.status();
  EntityRecord e;
  if (PQntuples(r->get()) == 1) {
    e.revision = static_cast<std::uint64_t>(get_i64(r->get(), 0, 0));
    e.version = static_cast<std::uint64_t>(get_i64(r->get(), 0, 1));
    e.state = get_bytes(r->get(), 0, 2);
  }
  return e;
}

Status PgStore::write_entity_in(Conn& c, const EntityWrite& w) {
  Params p;
  p.bytes(w.key).i64(opt_u64(w.version)).bytes(w.state);
  if (w.expect_revision == 0) {
    auto r = c.run(sql_.insert_entity, p);
    if (!r.ok()) return r.status();
    if (changed(r->get()) != 1) return aborted("entity write: the revision of this key moved (it has a record now)");
  } else {
    p.i64(static_cast<std::int64_t>(w.expect_revision));
    auto r = c.run(sql_.update_entity, p);
    if (!r.ok()) return r.status();
    if (changed(r->get()) != 1)
      return aborted("entity write: the revision of this key is no longer " + std::to_string(w.expect_revision));
  }
  if (w.unbuffer) return unbuffer_in(c, w.key, *w.unbuffer);
  return ok_status();
}

Status PgStore::unbuffer_in(Conn& c, std::string_view key, std::uint64_t version) {
  Params p;
  p.bytes(key).i64(encode_version(version));
  auto r = c.run(sql_.unbuffer, p);
  return r.ok() ? ok_status() : r.status();
}

Status PgStore::write_entity(const EntityWrite& w) {
  if (Status s = check_entity_write(w, "write_entity"); !s.ok()) return s;
  return in_transaction([&](Conn& c) { return write_entity_in(c, w); });
}

Status PgStore::buffer_put(const BufferPut& put) {
  if (Status s = check_buffer_put(put); !s.ok()) return s;
  // The totals row is locked first: puts are serialised, so the limits hold.
  return in_transaction([&](Conn& c) -> Status {
    auto t = c.run(sql_.buffer_lock_totals, Params());
    if (!t.ok()) return t.status();
    if (PQntuples(t->get()) != 1) return data_loss("postgres: idem_buffer_totals has no totals row");
    const auto count = static_cast<std::uint64_t>(get_i64(t->get(), 0, 0));
    const auto bytes = static_cast<std::uint64_t>(get_i64(t->get(), 0, 1));
    Params p;
    p.bytes(put.key).i64(encode_version(put.version)).i64(clamp(put.limits.per_key));
    auto r = c.run(sql_.buffer_check, p);
    if (!r.ok()) return r.status();
    if (!is_null(r->get(), 0, 0)) {
      if (get_bytes(r->get(), 0, 0) == put.id) return ok_status();
      return failed_precondition("buffer_put: version " + std::to_string(put.version) +
                                 " of this key is already buffered with another message id");
    }
    if (static_cast<std::uint64_t>(get_i64(r->get(), 0, 1)) >= put.limits.per_key)
      return resource_exhausted("reorder buffer limit per_key=" + std::to_string(put.limits.per_key) +
                                " reached for this key");
    const std::size_t entry = put.key.size() + put.id.size() + put.message.size();
    if (count >= put.limits.total)
      return resource_exhausted("reorder buffer limit total=" + std::to_string(put.limits.total) +
                                " reached (entries in the whole buffer)");
    if (entry > put.limits.total_bytes || bytes > put.limits.total_bytes - entry)
      return resource_exhausted("reorder buffer limit total_bytes=" + std::to_string(put.limits.total_bytes) +
                                " would be exceeded (the buffer holds " + std::to_string(bytes) +
                                " bytes, this entry " + std::to_string(entry) + ")");
    Params ins;
    ins.bytes(put.key).i64(encode_version(put.version)).bytes(put.id).bytes(put.message).i64(to_ns(put.now));
    ins.i64(clamp(entry));
    auto w = c.run(sql_.buffer_insert, ins);
    return w.ok() ? ok_status() : w.status();
  });
}

StatusOr<std::vector<BufferEntry>> PgStore::buffer_read(std::string_view key, std::size_t max) {
  if (Status s = check_entity_key(key, "buffer_read"); !s.ok()) return s;
  std::vector<BufferEntry> out;
  if (max == 0) return out;
  auto c = acquire();
  if (!c.ok()) return c.status();
  Params p;
  p.bytes(key).i64(clamp(max));
  auto r = (*c)->run(sql_.buffer_read, p);
  if (!r.ok()) return r.status();
  for (int row = 0; row < PQntuples(r->get()); ++row) {
    BufferEntry e;
    e.key = std::string(key);
    e.version = decode_version(get_i64(r->get(), row, 0));
    e.id = get_bytes(r->get(), row, 1);
    e.message = get_bytes(r->get(), row, 2);
    e.buffered_at = from_ns(get_i64(r->get(), row, 3));
    out.push_back(std::move(e));
  }
  return out;
}

Status PgStore::buffer_remove(std::string_view key, std::uint64_t version) {
  if (Status s = check_entity_key(key, "buffer_remove"); !s.ok()) return s;
  auto c = acquire();
  if (!c.ok()) return c.status();
  return unbuffer_in(**c, key, version);
}

StatusOr<BufferSummary> PgStore::buffer_summary(std::size_t max_keys) {
  BufferSummary out;
  Status s = in_transaction([&](Conn& c) -> Status {
    auto t = c.run(sql_.buffer_totals, Params());
    if (!t.ok()) return t.status();
    if (PQntuples(t->get()) != 1) return data_loss("postgres: idem_buffer_totals has no totals row");
    out.count = static_cast<std::size_t>(get_i64(t->get(), 0, 0));
    out.bytes = static_cast<std::size_t>(get_i64(t->get(), 0, 1));
    if (max_keys == 0 || out.count == 0) return ok_status();
    Params p;
    p.i64(clamp(max_keys));
    auto r = c.run(sql_.buffer_keys, p);
    if (!r.ok()) return r.status();
    for (int row = 0; row < PQntuples(r->get()); ++row) {
      BufferedKey k;
      k.key = get_bytes(r->get(), row, 0);
      k.count = static_cast<std::size_t>(get_i64(r->get(), row, 1));
      k.lowest_version = decode_version(get_i64(r->get(), row, 2));
      k.oldest_at = from_ns(get_i64(r->get(), row, 3));
      out.keys.push_back(std::move(k));
    }
    return ok_status();
  });
  if (!s.ok()) return s;
  return out;
}

StatusOr<bool> PgStore::remove_entity(std::string_view key) {
  if (Status s = check_entity_key(key, "remove_entity"); !s.ok()) return s;
  bool had = false;
  Status s = in_transaction([&](Conn& c) -> Status {
    Params p;
    p.bytes(key);
    auto e = c.run(sql_.remove_entity_record, p);
    if (!e.ok()) return e.status();
    auto b = c.run(sql_.remove_entity_buffer, p);
    if (!b.ok()) return b.status();
    had = changed(e->get()) > 0 || (PQntuples(b->get()) == 1 && get_i64(b->get(), 0, 0) > 0);
    return ok_status();
  });
  if (!s.ok()) return s;
  return had;
}

}  // namespace idem::postgres::detail

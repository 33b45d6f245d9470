// The transactional outbox of the RocksDB store (outbox.hpp):
//   idem_outbox       the unsent entries; key: the incoming id's length (uint32
//                     big-endian), the incoming id, the position (uint32 big-endian),
//                     so one incoming id's entries are adjacent, in position order;
//                     value: created_ms (int64 LE), then the outgoing id, the
//                     destination, the body and encode_headers' bytes, each as a
//                     uint32 LE length and the bytes.
//   idem_outbox_sent  the sent entries, same key; value: an idem_done header (record.hpp)
//                     whose expiry the compaction filter reads.
// A commit puts its entries into idem_outbox in its WriteBatch; outbox_mark_sent moves
// them to idem_outbox_sent in one WriteBatch.
#include <memory>

#include "little_endian.hpp"
#include "rocksdb_store_impl.hpp"

namespace idem::rocksdb::detail {
namespace {

void put_be32(std::string& out, std::uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint32_t get_be32(std::string_view in, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

std::string incoming_prefix(std::string_view incoming) {
  std::string k;
  k.reserve(incoming.size() + 8);
  put_be32(k, static_cast<std::uint32_t>(incoming.size()));
  k.append(incoming);
  return k;
}

std::string outbox_key(std::string_view incoming, std::uint32_t position) {
  std::string k = incoming_prefix(incoming);
  put_be32(k, position);
  return k;
}

void put_bytes(std::string& out, std::string_view b) {
  put_le<std::uint32_t>(out, static_cast<std::uint32_t>(b.size()));
  out.append(b);
}

bool get_bytes(std::string_view& in, std::string& out) {
  if (in.size() < 4) return false;
  const auto n = get_le<std::uint32_t>(in, 0);
  in.remove_prefix(4);
  if (in.size() < n) return false;
  out.assign(in.data(), n);
  in.remove_prefix(n);
  return true;
}

std::string encode_entry(const OutboxEntry& e) {
  std::string v;
  put_le<std::int64_t>(v, to_unix_ms(e.created_at));
  put_bytes(v, e.message.id);
  put_bytes(v, e.destination);
  put_bytes(v, e.message.body);
  put_bytes(v, encode_headers(e.message.headers));
  return v;
}

// Decodes the entry at (key, value); false if either is not of this format.
bool decode_entry(std::string_view key, std::string_view value, OutboxEntry& e) {
  if (key.size() < 8 || get_be32(key, 0) != key.size() - 8 || value.size() < 8) return false;
  e.incoming_id.assign(key.substr(4, key.size() - 8));
  e.position = get_be32(key, key.size() - 4);
  e.created_at = from_unix_ms(get_le<std::int64_t>(value, 0));
  value.remove_prefix(8);
  std::string headers;
  if (!get_bytes(value, e.message.id) || !get_bytes(value, e.destination) || !get_bytes(value, e.message.body) ||
      !get_bytes(value, headers) || !value.empty())
    return false;
  auto h = decode_headers(headers);
  if (!h) return false;
  e.message.headers = std::move(*h);
  return true;
}

::rocksdb::Slice slice(const std::string& s) { return {s.data(), s.size()}; }

}  // namespace

Status RocksStore::stage_outbox(const CommitRequest& q, ::rocksdb::WriteBatch& batch) {
  for (const OutboxEntry& e : q.outbox) {
    auto s = batch.Put(outbox_cf_, slice(outbox_key(e.incoming_id, e.position)), slice(encode_entry(e)));
    if (!s.ok()) return to_status(s, "stage the outbox");
  }
  return ok_status();
}

StatusOr<std::vector<OutboxEntry>> RocksStore::outbox_pending(const OutboxQuery& q) {
  if (q.max == 0) return invalid_argument("outbox_pending: max must be > 0");
  const std::string prefix = q.incoming_id ? incoming_prefix(*q.incoming_id) : std::string();
  const std::int64_t up_to = to_unix_ms(q.created_up_to);
  std::unique_ptr<::rocksdb::Iterator> it(db_->NewIterator(::rocksdb::ReadOptions(), outbox_cf_));
  std::vector<OutboxEntry> out;
  for (it->Seek(slice(prefix)); it->Valid() && out.size() < q.max; it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    if (!key.starts_with(prefix)) break;
    OutboxEntry e;
    if (!decode_entry(key, std::string_view(it->value().data(), it->value().size()), e))
      return data_loss("rocksdb: " + options.path + ": an idem_outbox entry of an unknown format");
    if (q.incoming_id && key.size() != prefix.size() + 4) continue;  // a longer id sharing the prefix
    if (to_unix_ms(e.created_at) > up_to) continue;
    out.push_back(std::move(e));
  }
  if (!it->status().ok()) return to_status(it->status(), "read the outbox");
  return out;
}

Status RocksStore::note_unsent(const ClaimRequest& q, ClaimResult& c) {
  if (!q.check_outbox || c.status != ClaimStatus::kCompleted) return ok_status();
  const std::string prefix = incoming_prefix(q.id);
  std::unique_ptr<::rocksdb::Iterator> it(db_->NewIterator(::rocksdb::ReadOptions(), outbox_cf_));
  it->Seek(slice(prefix));
  if (!it->status().ok()) return to_status(it->status(), "read the outbox");
  const std::string_view key = it->Valid() ? std::string_view(it->key().data(), it->key().size()) : "";
  c.outbox_unsent = key.starts_with(prefix) && key.size() == prefix.size() + 4;
  return ok_status();
}

Status RocksStore::outbox_mark_sent(std::span<const OutboxEntry> sent, TimePoint now, Duration ttl) {
  if (ttl.count() <= 0) return invalid_argument("outbox_mark_sent: ttl must be > 0");
  if (sent.empty()) return ok_status();
  const std::int64_t now_ms = to_unix_ms(now);
  observe(now_ms);
  const std::string marker = encode_done(RecordKind::kCompleted, now_ms + ttl.count(), std::nullopt, std::nullopt);
  ::rocksdb::WriteBatch batch;
  for (const OutboxEntry& e : sent) {
    const std::string key = outbox_key(e.incoming_id, e.position);
    auto d = batch.Delete(outbox_cf_, slice(key));
    if (d.ok()) d = batch.Put(outbox_sent_cf_, slice(key), slice(marker));
    if (!d.ok()) return to_status(d, "mark outbox entries sent");
  }
  if (options.fault_hook) {
    if (Status f = options.fault_hook(kMarkSentPoint); !f.ok()) return f;
  }
  return to_status(db_->Write(write_options, &batch), "mark outbox entries sent");
}

}  // namespace idem::rocksdb::detail

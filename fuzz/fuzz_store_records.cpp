// Fuzz target: bytes read back from the stores. The first input byte picks the
// decoder, the rest is what the store read:
//   0-4  RocksDB values and keys (stores/rocksdb/src/record.hpp, entity_record.hpp):
//        a dedup record, a retry count, an entity record, a reorder-buffer key and
//        value. Each decodes or is refused; what decodes encodes back to the same
//        bytes, so a corrupted value can never decode into another decision.
//   5-6  a Bloom snapshot (Generations::restore), as read (5) or with a valid checksum
//        appended by the harness (6), to reach the structure behind the checksum.
//   7    a Redis script answer (a reply tree built from the bytes) through the
//        decoders of claim, commit and error replies.
//   8    a reorder-buffer entry's frame as every store hands it back to the consumer
//        (src/buffer_frame.hpp): it unframes or is refused, and frames back the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "buffer_frame.hpp"
#include "entity_record.hpp"
#include "fuzz_support.hpp"
#include "generations.hpp"
#include "idem/fingerprint.hpp"
#include "record.hpp"
#include "redis_store_impl.hpp"

namespace {

namespace rd = idem::rocksdb::detail;

void rocksdb_value(unsigned mode, std::string_view in) {
  switch (mode) {
    case 0: {
      const auto r = rd::decode_done(in);
      if (!r) return;
      IDEM_FUZZ_CHECK(rd::expiry_of(in) == r->expires_ms);
      const auto result = r->result ? std::optional<std::string_view>(*r->result) : std::nullopt;
      IDEM_FUZZ_CHECK(rd::encode_done(r->kind, r->expires_ms, r->fingerprint, result) == in);
      return;
    }
    case 1: {
      const auto r = rd::decode_retries(in);
      if (r) IDEM_FUZZ_CHECK(rd::encode_retries(*r) == in);
      return;
    }
    case 2: {
      const auto r = rd::decode_entity(in);
      if (r) IDEM_FUZZ_CHECK(rd::encode_entity(*r) == in);
      return;
    }
    case 3: {
      const auto k = rd::decode_buffer_key(in);
      if (!k) return;
      IDEM_FUZZ_CHECK(rd::buffer_key(k->key, k->version) == in);
      IDEM_FUZZ_CHECK(in.substr(0, rd::buffer_prefix(k->key).size()) == rd::buffer_prefix(k->key));
      return;
    }
    default: {
      const auto v = rd::decode_buffer_value(in);
      if (v) IDEM_FUZZ_CHECK(rd::encode_buffer_value(v->buffered_at_ms, v->id, v->message) == in);
      return;
    }
  }
}

void bloom_snapshot(std::string bytes, bool fix_checksum) {
  idem::bloom::Options o;
  o.capacity = 64;
  o.fp = 0.01;
  o.window = idem::Duration(1000);
  o.generations = 2;
  if (fix_checksum) {
    const std::uint64_t sum = idem::fingerprint(bytes);
    bytes.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  }
  idem::bloom::detail::Generations g(o, idem::bloom::detail::DropRule::kWindow);
  const idem::Status s = g.restore(bytes);
  if (!s.ok()) {
    IDEM_FUZZ_CHECK(!s.message().empty());
    return;
  }
  // A restored set answers, takes ids and serialises to a snapshot it restores.
  (void)g.maybe_contains("id", 500);
  g.add("id", 500, 1500);
  idem::bloom::detail::Generations again(o, idem::bloom::detail::DropRule::kWindow);
  IDEM_FUZZ_CHECK(again.restore(g.serialize()).ok());
}

namespace rs = idem::redis::detail;

// A reply tree from bytes: a type byte, then the value; arrays hold up to 8 elements.
rs::Reply reply_from(std::string_view& in, int depth) {
  rs::Reply r;
  if (in.empty()) return r;
  const unsigned char t = static_cast<unsigned char>(in[0]);
  in.remove_prefix(1);
  auto take = [&in](std::size_t n) {
    const std::string_view s = in.substr(0, n);
    in.remove_prefix(s.size());
    return s;
  };
  switch (t % 6) {
    case 0:
      return r;
    case 1:
      r.type = rs::Reply::Type::kInteger;
      r.integer = static_cast<std::int8_t>(in.empty() ? 0 : take(1)[0]);
      return r;
    case 5: {
      r.type = rs::Reply::Type::kArray;
      const std::size_t n = depth > 3 || in.empty() ? 0 : static_cast<unsigned char>(take(1)[0]) % 9;
      for (std::size_t i = 0; i < n; ++i) r.elements.push_back(reply_from(in, depth + 1));
      return r;
    }
    default: {
      r.type = t % 6 == 2 ? rs::Reply::Type::kString : t % 6 == 3 ? rs::Reply::Type::kStatus : rs::Reply::Type::kError;
      const std::size_t n = in.empty() ? 0 : static_cast<unsigned char>(take(1)[0]) % 32;
      r.str = std::string(take(n));
      return r;
    }
  }
}

void redis_answer(std::string_view in) {
  const rs::Reply r = reply_from(in, 0);
  const std::string key = "idem:{k}";
  auto a = rs::script_answer(r, key);
  if (!a.ok()) {
    IDEM_FUZZ_CHECK(!a.status().message().empty());
    return;
  }
  auto claim = rs::decode_claim(**a, key);
  if (!claim.ok()) IDEM_FUZZ_CHECK(!claim.status().message().empty());
  idem::redis::Options o;
  (void)rs::decode_commit(**a, o, key);
  (void)rs::error_status(r.str, key);
}

void buffer_frame(std::string_view in) {
  const auto f = idem::detail::unframe_buffered(in);
  if (f) IDEM_FUZZ_CHECK(idem::detail::frame_buffered(f->event, f->message) == in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned mode = data[0] % 9;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (mode <= 4)
    rocksdb_value(mode, in);
  else if (mode <= 6)
    bloom_snapshot(std::string(in), mode == 6);
  else if (mode == 7)
    redis_answer(in);
  else
    buffer_frame(in);
  return 0;
}

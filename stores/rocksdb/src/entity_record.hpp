// The byte formats of idem_entities and idem_buffer (docs/stores.md).
//
// idem_entities: key = the entity key (raw bytes); value =
//   [0]      format (kEntityFormat)
//   [1..8]   revision, uint64 little-endian
//   [9..16]  applied version, uint64 little-endian
//   [17..]   state bytes, to the end of the value (empty: none recorded)
// idem_buffer: key = [0..3] length of the entity key, uint32 big-endian; the entity
// key; version, uint64 big-endian — so that the entries of one key share a prefix and
// a scan of it returns them by ascending version. Value =
//   [0]      format (kEntityFormat)
//   [1..8]   buffered_at, ms since the Unix epoch, int64 little-endian
//   [9..12]  length of the message id, uint32 little-endian
//   [13..]   the message id, then the message bytes to the end of the value
// Neither carries an expiry: the compaction filter never sees them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "idem/entity.hpp"

namespace idem::rocksdb::detail {

inline constexpr unsigned char kEntityFormat = 1;

std::string encode_entity(const EntityRecord& r);
// Encodes r into out, replacing its contents (reuses its capacity).
void encode_entity(const EntityRecord& r, std::string& out);
// Returns nullopt for a value that is not of this format.
std::optional<EntityRecord> decode_entity(std::string_view value);

// The prefix every buffer key of `key` starts with.
std::string buffer_prefix(std::string_view key);
// The buffer key of (key, version).
std::string buffer_key(std::string_view key, std::uint64_t version);
// The smallest string greater than every string that starts with `prefix`.
// REQUIRES: prefix is a buffer_prefix (its first byte is below 0xff).
std::string prefix_successor(std::string_view prefix);

// A buffer key taken apart. Returns nullopt for a key that is not of this format.
struct BufferKeyParts {
  std::string_view key;
  std::uint64_t version = 0;
};
std::optional<BufferKeyParts> decode_buffer_key(std::string_view k);

std::string encode_buffer_value(std::int64_t buffered_at_ms, std::string_view id, std::string_view message);
// A buffer value taken apart (views into `value`). Returns nullopt for a value that is
// not of this format.
struct BufferValueParts {
  std::int64_t buffered_at_ms = 0;
  std::string_view id;
  std::string_view message;
};
std::optional<BufferValueParts> decode_buffer_value(std::string_view value);

// BufferEntry::bytes() of the entry stored under buffer key `k` with value `v`:
// key + id + message sizes. REQUIRES: both decode.
inline std::size_t entry_bytes(const BufferKeyParts& k, const BufferValueParts& v) {
  return k.key.size() + v.id.size() + v.message.size();
}

}  // namespace idem::rocksdb::detail

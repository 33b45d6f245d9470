#include "entity_record.hpp"

#include <type_traits>

#include "little_endian.hpp"

namespace idem::rocksdb::detail {
namespace {

constexpr std::size_t kEntityHeader = 17;
constexpr std::size_t kLengthBytes = 4;
constexpr std::size_t kVersionBytes = 8;
constexpr std::size_t kBufferValueHeader = 13;

template <class T>
void put_be(std::string& out, T v) {
  for (std::size_t i = sizeof(T); i-- > 0;) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

template <class T>
T get_be(std::string_view in, std::size_t at) {
  T u = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) u = static_cast<T>((u << 8) | static_cast<unsigned char>(in[at + i]));
  return u;
}

}  // namespace

void encode_entity(const EntityRecord& r, std::string& out) {
  out.clear();
  out.reserve(kEntityHeader + r.state.size());
  out.push_back(static_cast<char>(kEntityFormat));
  put_le<std::uint64_t>(out, r.revision);
  put_le<std::uint64_t>(out, r.version);
  out.append(r.state);
}

std::string encode_entity(const EntityRecord& r) {
  std::string out;
  encode_entity(r, out);
  return out;
}

std::optional<EntityRecord> decode_entity(std::string_view v) {
  if (v.size() < kEntityHeader || static_cast<unsigned char>(v[0]) != kEntityFormat) return std::nullopt;
  EntityRecord r;
  r.revision = get_le<std::uint64_t>(v, 1);
  r.version = get_le<std::uint64_t>(v, 9);
  r.state = std::string(v.substr(kEntityHeader));
  return r;
}

std::string buffer_prefix(std::string_view key) {
  std::string out;
  out.reserve(kLengthBytes + key.size() + kVersionBytes);
  put_be<std::uint32_t>(out, static_cast<std::uint32_t>(key.size()));
  out.append(key);
  return out;
}

std::string buffer_key(std::string_view key, std::uint64_t version) {
  std::string out = buffer_prefix(key);
  put_be<std::uint64_t>(out, version);
  return out;
}

std::string prefix_successor(std::string_view prefix) {
  std::string out(prefix);
  while (!out.empty() && static_cast<unsigned char>(out.back()) == 0xff) out.pop_back();
  if (!out.empty()) out.back() = static_cast<char>(static_cast<unsigned char>(out.back()) + 1);
  return out;
}

std::optional<BufferKeyParts> decode_buffer_key(std::string_view k) {
  if (k.size() < kLengthBytes + kVersionBytes) return std::nullopt;
  const std::uint32_t n = get_be<std::uint32_t>(k, 0);
  if (k.size() != kLengthBytes + n + kVersionBytes) return std::nullopt;
  return BufferKeyParts{k.substr(kLengthBytes, n), get_be<std::uint64_t>(k, kLengthBytes + n)};
}

std::string encode_buffer_value(std::int64_t buffered_at_ms, std::string_view id, std::string_view message) {
  std::string out;
  out.reserve(kBufferValueHeader + id.size() + message.size());
  out.push_back(static_cast<char>(kEntityFormat));
  put_le<std::int64_t>(out, buffered_at_ms);
  put_le<std::uint32_t>(out, static_cast<std::uint32_t>(id.size()));
  out.append(id);
  out.append(message);
  return out;
}

std::optional<BufferValueParts> decode_buffer_value(std::string_view v) {
  if (v.size() < kBufferValueHeader || static_cast<unsigned char>(v[0]) != kEntityFormat) return std::nullopt;
  const std::uint32_t n = get_le<std::uint32_t>(v, 9);
  if (v.size() - kBufferValueHeader < n) return std::nullopt;
  return BufferValueParts{get_le<std::int64_t>(v, 1), v.substr(kBufferValueHeader, n),
                          v.substr(kBufferValueHeader + n)};
}

}  // namespace idem::rocksdb::detail

#include "message_id.hpp"

#include <array>

namespace idem::pulsar::detail {
namespace {

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// -1 for a byte outside the alphabet.
constexpr std::array<int, 256> decode_table() {
  std::array<int, 256> t{};
  t.fill(-1);
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int>(i);
  return t;
}
constexpr auto kDecode = decode_table();

// Reads a protobuf varint at *p; false past `end` or beyond 10 bytes.
bool read_varint(const unsigned char*& p, const unsigned char* end, std::uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 70 && p < end; shift += 7) {
    const unsigned char b = *p++;
    *v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// Skips a field of wire type `wire` (the id's fields are varints; others are skipped).
bool skip_field(int wire, const unsigned char*& p, const unsigned char* end) {
  std::uint64_t n = 0;
  switch (wire) {
    case 0: return read_varint(p, end, &n);
    case 1: n = 8; break;
    case 5: n = 4; break;
    case 2:
      if (!read_varint(p, end, &n)) return false;
      break;
    default: return false;
  }
  if (n > static_cast<std::uint64_t>(end - p)) return false;
  p += n;
  return true;
}

}  // namespace

std::optional<MessageId> parse_message_id(std::string_view base64) {
  auto bytes = base64_decode(base64);
  if (!bytes || bytes->empty()) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(bytes->data());
  const auto* end = p + bytes->size();
  MessageId id;
  bool has_ledger = false, has_entry = false;
  while (p < end) {
    std::uint64_t tag = 0, v = 0;
    if (!read_varint(p, end, &tag)) return std::nullopt;
    const int field = static_cast<int>(tag >> 3), wire = static_cast<int>(tag & 7);
    if (field < 1 || field > 4 || wire != 0) {
      if (!skip_field(wire, p, end)) return std::nullopt;
      continue;
    }
    if (!read_varint(p, end, &v)) return std::nullopt;
    switch (field) {
      case 1: id.ledger = v, has_ledger = true; break;
      case 2: id.entry = v, has_entry = true; break;
      case 3: id.partition = static_cast<std::int32_t>(v); break;
      case 4: id.batch_index = static_cast<std::int32_t>(v); break;
    }
  }
  if (!has_ledger || !has_entry) return std::nullopt;
  return id;
}

std::uint64_t position(const MessageId& id) {
  const std::uint64_t batch = id.batch_index < 0 ? 0 : static_cast<std::uint64_t>(id.batch_index);
  if (id.ledger >= (1ULL << 24) || id.entry >= (1ULL << 28) || batch >= (1ULL << 12)) return 0;
  return id.ledger << 40 | id.entry << 12 | batch;
}

std::string to_string(const MessageId& id) {
  std::string s = std::to_string(id.ledger) + ":" + std::to_string(id.entry);
  if (id.batch_index >= 0) s += ":" + std::to_string(id.batch_index);
  return s;
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = static_cast<unsigned char>(bytes[i]) << 16 | static_cast<unsigned char>(bytes[i + 1]) << 8 |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(v >> shift) & 63];
  }
  if (const std::size_t left = bytes.size() - i; left > 0) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (left == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  std::string out;
  out.reserve(text.size() * 3 / 4);
  unsigned acc = 0;
  int bits = 0;
  for (char c : text) {
    const int v = kDecode[static_cast<unsigned char>(c)];
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if (bits >= 6) return std::nullopt;  // one character left over: not base64
  return out;
}

}  // namespace idem::pulsar::detail

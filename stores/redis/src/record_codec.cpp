#include "record_codec.hpp"

namespace idem::redis::detail {
namespace {

void put_str(std::string& out, std::string_view s) {
  const std::size_t n = s.size();
  if (n < 32) {
    out += static_cast<char>(0xa0 | n);
  } else if (n < 0x100) {
    out += static_cast<char>(0xd9);
    out += static_cast<char>(n);
  } else if (n < 0x10000) {
    out += static_cast<char>(0xda);
    out += static_cast<char>(n >> 8);
    out += static_cast<char>(n & 0xff);
  } else {
    out += static_cast<char>(0xdb);
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
  }
  out += s;
}

void put_int(std::string& out, std::int64_t v) {
  if (v >= 0 && v < 128) {
    out += static_cast<char>(v);
    return;
  }
  out += static_cast<char>(0xd3);
  const auto u = static_cast<std::uint64_t>(v);
  for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>((u >> shift) & 0xff);
}

}  // namespace

std::string encode_fresh_lease(std::string_view owner, std::int64_t lease_until_ms,
                               const std::optional<std::uint64_t>& fingerprint) {
  std::string out;
  out.reserve(owner.size() + 48);
  append_fresh_lease(out, owner, lease_until_ms, fingerprint);
  return out;
}

void append_fresh_lease(std::string& out, std::string_view owner, std::int64_t lease_until_ms,
                        const std::optional<std::uint64_t>& fingerprint) {
  out += static_cast<char>(0x97);  // fixarray of 7
  put_str(out, "i");
  put_str(out, owner);
  put_int(out, lease_until_ms);
  put_int(out, 0);
  put_int(out, 0);
  if (fingerprint) {
    put_str(out, std::to_string(*fingerprint));
  } else {
    out += static_cast<char>(0xc2);  // false
  }
  out += static_cast<char>(0xc2);
}

std::string encode_done(char state, std::int64_t expires_ms, const std::optional<std::uint64_t>& fingerprint,
                        const std::optional<std::string_view>& result) {
  std::string out;
  out.reserve(40 + (result ? result->size() : 0));
  append_done(out, state, expires_ms, fingerprint, result);
  return out;
}

void append_done(std::string& out, char state, std::int64_t expires_ms, const std::optional<std::uint64_t>& fingerprint,
                 const std::optional<std::string_view>& result) {
  out += static_cast<char>(0x97);
  put_str(out, std::string_view(&state, 1));
  put_str(out, "");
  put_int(out, 0);
  put_int(out, expires_ms);
  put_int(out, 0);
  if (fingerprint) {
    put_str(out, std::to_string(*fingerprint));
  } else {
    out += static_cast<char>(0xc2);
  }
  if (result) {
    put_str(out, *result);
  } else {
    out += static_cast<char>(0xc2);
  }
}

std::string encode_buffer_entry(std::string_view id, std::string_view message, std::int64_t at_ms) {
  std::string out;
  out.reserve(id.size() + message.size() + 24);
  out += static_cast<char>(0x93);  // fixarray of 3
  put_str(out, id);
  put_str(out, message);
  put_int(out, at_ms);
  return out;
}

std::string lease_prefix(std::string_view owner) {
  std::string out;
  out += static_cast<char>(0x97);
  put_str(out, "i");
  put_str(out, owner);
  return out;
}

}  // namespace idem::redis::detail

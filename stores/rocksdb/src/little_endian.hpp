// Fixed-width little-endian integers in the values of idem::rocksdb's column families.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

namespace idem::rocksdb::detail {

// Appends v's sizeof(T) bytes, least significant first.
template <class T>
void put_le(std::string& out, T v) {
  auto u = static_cast<std::make_unsigned_t<T>>(v);
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

// The T stored by put_le at in[at]. REQUIRES: at + sizeof(T) <= in.size().
template <class T>
T get_le(std::string_view in, std::size_t at) {
  std::make_unsigned_t<T> u = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    u |= static_cast<std::make_unsigned_t<T>>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return static_cast<T>(u);
}

}  // namespace idem::rocksdb::detail

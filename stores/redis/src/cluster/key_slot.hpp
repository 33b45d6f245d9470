// Redis Cluster key → slot: CRC16 (XMODEM) of the key's hash tag, modulo 16384.
#pragma once

#include <cstdint>
#include <string_view>

namespace idem::redis::detail {

inline constexpr int kSlotCount = 16384;

// CRC16-CCITT (XMODEM), the checksum Redis Cluster uses.
std::uint16_t crc16(std::string_view bytes);

// The slot of a key: if the key has a '{' followed later by a '}' with at least one
// byte between them, only the bytes between the first '{' and the first '}' after it
// are hashed; otherwise the whole key.
int key_slot(std::string_view key);

}  // namespace idem::redis::detail

#include "support/nkeys.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <cstdint>
#include <vector>

namespace idem::nats_test {
namespace {

constexpr std::uint8_t kUserPrefix = 20 << 3;  // 'U' once encoded
constexpr std::uint8_t kSeedPrefix = 18 << 3;  // 'S' once encoded

// CRC-16/XMODEM (polynomial 0x1021, from 0), as NKeys checksum their bytes.
std::uint16_t crc16(const std::vector<std::uint8_t>& bytes) {
  std::uint16_t crc = 0;
  for (std::uint8_t b : bytes) {
    crc ^= static_cast<std::uint16_t>(b) << 8;
    for (int i = 0; i < 8; ++i) crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021) : crc << 1;
  }
  return crc;
}

// RFC 4648 base32, without padding.
std::string base32(const std::vector<std::uint8_t>& bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (std::uint8_t b : bytes) {
    buffer = (buffer << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += kAlphabet[(buffer >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += kAlphabet[(buffer << (5 - bits)) & 31];
  return out;
}

// prefix + key + CRC-16 (little-endian), in base32.
std::string encode(std::vector<std::uint8_t> bytes) {
  const std::uint16_t crc = crc16(bytes);
  bytes.push_back(static_cast<std::uint8_t>(crc & 0xff));
  bytes.push_back(static_cast<std::uint8_t>(crc >> 8));
  return base32(bytes);
}

}  // namespace

StatusOr<UserNKey> make_user_nkey() {
  std::array<std::uint8_t, 32> seed{};
  if (RAND_bytes(seed.data(), static_cast<int>(seed.size())) != 1) return internal_error("no random bytes");
  EVP_PKEY* key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size());
  if (key == nullptr) return internal_error("no Ed25519 key");
  std::array<std::uint8_t, 32> pub{};
  std::size_t len = pub.size();
  const bool ok = EVP_PKEY_get_raw_public_key(key, pub.data(), &len) == 1 && len == pub.size();
  EVP_PKEY_free(key);
  if (!ok) return internal_error("no Ed25519 public key");
  std::vector<std::uint8_t> p = {kUserPrefix};
  p.insert(p.end(), pub.begin(), pub.end());
  std::vector<std::uint8_t> s = {static_cast<std::uint8_t>(kSeedPrefix | (kUserPrefix >> 5)),
                                 static_cast<std::uint8_t>((kUserPrefix & 31) << 3)};
  s.insert(s.end(), seed.begin(), seed.end());
  return UserNKey{encode(std::move(p)), encode(std::move(s))};
}

}  // namespace idem::nats_test

#include "support/nkeys.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <cstdint>
#include <ctime>
#include <string_view>
#include <vector>

namespace idem::nats_test {
namespace {

constexpr std::uint8_t kSeedPrefix = 18 << 3;  // 'S' once encoded

// The prefix byte of a role's public key: its letter once encoded.
std::uint8_t prefix_of(char role) {
  switch (role) {
    case 'O': return 14 << 3;
    case 'A': return 0;
    default: return 20 << 3;  // 'U'
  }
}

// CRC-16/XMODEM (polynomial 0x1021, from 0), as NKeys checksum their bytes.
std::uint16_t crc16(const std::vector<std::uint8_t>& bytes) {
  std::uint16_t crc = 0;
  for (std::uint8_t b : bytes) {
    crc ^= static_cast<std::uint16_t>(b) << 8;
    for (int i = 0; i < 8; ++i) crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021) : crc << 1;
  }
  return crc;
}

// bytes in `width`-bit groups, each as a character of `alphabet` (RFC 4648 base32 or
// base64url), without padding.
std::string pack(std::string_view bytes, const char* alphabet, int width) {
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char b : bytes) {
    buffer = (buffer << 8) | b;
    bits += 8;
    while (bits >= width) {
      out += alphabet[(buffer >> (bits - width)) & ((1u << width) - 1)];
      bits -= width;
    }
  }
  if (bits > 0) out += alphabet[(buffer << (width - bits)) & ((1u << width) - 1)];
  return out;
}

std::string base32(const std::vector<std::uint8_t>& bytes) {
  return pack(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
              "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 5);
}

// prefix + key + CRC-16 (little-endian), in base32.
std::string encode(std::vector<std::uint8_t> bytes) {
  const std::uint16_t crc = crc16(bytes);
  bytes.push_back(static_cast<std::uint8_t>(crc & 0xff));
  bytes.push_back(static_cast<std::uint8_t>(crc >> 8));
  return base32(bytes);
}

// base64url without padding (JWT's encoding).
std::string base64url(std::string_view bytes) {
  return pack(bytes, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", 6);
}

// A JWT of `claims` ({"jti", "iat", "iss", "name", "sub", "nats": …}) signed by issuer.
StatusOr<std::string> jwt(const UserNKey& issuer, const std::string& subject, const std::string& name,
                          const std::string& nats) {
  static int serial = 0;
  const std::string claims = R"({"jti":"IDEMTEST)" + std::to_string(++serial) + R"(","iat":)" +
                             std::to_string(std::time(nullptr)) + R"(,"iss":")" + issuer.public_key +
                             R"(","name":")" + name + R"(","sub":")" + subject + R"(","nats":)" + nats + "}";
  const std::string signing = base64url(R"({"typ":"JWT","alg":"ed25519-nkey"})") + "." + base64url(claims);
  const auto* raw = reinterpret_cast<const unsigned char*>(issuer.raw_seed.data());
  EVP_PKEY* key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, raw, issuer.raw_seed.size());
  if (key == nullptr) return internal_error("no Ed25519 key");
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  std::array<unsigned char, 64> sig{};
  std::size_t len = sig.size();
  const bool ok = md != nullptr && EVP_DigestSignInit(md, nullptr, nullptr, nullptr, key) == 1 &&
                  EVP_DigestSign(md, sig.data(), &len, reinterpret_cast<const unsigned char*>(signing.data()),
                                 signing.size()) == 1;
  EVP_MD_CTX_free(md);
  EVP_PKEY_free(key);
  if (!ok) return internal_error("cannot sign");
  return signing + "." + base64url(std::string_view(reinterpret_cast<const char*>(sig.data()), len));
}

}  // namespace

StatusOr<UserNKey> make_nkey(char role) {
  const std::uint8_t prefix = prefix_of(role);
  std::array<std::uint8_t, 32> seed{};
  if (RAND_bytes(seed.data(), static_cast<int>(seed.size())) != 1) return internal_error("no random bytes");
  EVP_PKEY* key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size());
  if (key == nullptr) return internal_error("no Ed25519 key");
  std::array<std::uint8_t, 32> pub{};
  std::size_t len = pub.size();
  const bool ok = EVP_PKEY_get_raw_public_key(key, pub.data(), &len) == 1 && len == pub.size();
  EVP_PKEY_free(key);
  if (!ok) return internal_error("no Ed25519 public key");
  std::vector<std::uint8_t> p = {prefix};
  p.insert(p.end(), pub.begin(), pub.end());
  std::vector<std::uint8_t> s = {static_cast<std::uint8_t>(kSeedPrefix | (prefix >> 5)),
                                 static_cast<std::uint8_t>((prefix & 31) << 3)};
  s.insert(s.end(), seed.begin(), seed.end());
  return UserNKey{encode(std::move(p)), encode(std::move(s)), std::string(seed.begin(), seed.end())};
}

StatusOr<OperatorSetup> make_operator_setup() {
  auto op = make_nkey('O');
  auto system = make_nkey('A');
  auto account = make_nkey('A');
  auto user = make_nkey('U');
  if (!op.ok() || !system.ok() || !account.ok() || !user.ok()) return internal_error("cannot make the keys");
  auto op_jwt = jwt(*op, op->public_key, "idem-test-operator", R"({"type":"operator","version":2})");
  auto system_jwt = jwt(*op, system->public_key, "SYS",
                        R"({"limits":{"subs":-1,"data":-1,"payload":-1,"imports":-1,"exports":-1,"wildcards":true,)"
                        R"("conn":-1,"leaf":-1},"default_permissions":{"pub":{},"sub":{}},)"
                        R"("type":"account","version":2})");
  auto account_jwt =
      jwt(*op, account->public_key, "idem-test-account",
          R"({"limits":{"subs":-1,"data":-1,"payload":-1,"imports":-1,"exports":-1,"wildcards":true,"conn":-1,)"
          R"("leaf":-1,"mem_storage":-1,"disk_storage":-1,"streams":-1,"consumer":-1},)"
          R"("default_permissions":{"pub":{},"sub":{}},"type":"account","version":2})");
  auto user_jwt = jwt(*account, user->public_key, "idem-test-user",
                      R"({"pub":{},"sub":{},"subs":-1,"data":-1,"payload":-1,"type":"user","version":2})");
  for (const auto* j : {&op_jwt, &system_jwt, &account_jwt, &user_jwt})
    if (!j->ok()) return j->status();
  OperatorSetup s;
  s.operator_jwt = *op_jwt;
  s.system_public_key = system->public_key;
  s.system_jwt = *system_jwt;
  s.account_public_key = account->public_key;
  s.account_jwt = *account_jwt;
  s.user_creds = "-----BEGIN NATS USER JWT-----\n" + *user_jwt +
                 "\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n" + user->seed +
                 "\n------END USER NKEY SEED------\n";
  return s;
}

}  // namespace idem::nats_test

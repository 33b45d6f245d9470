// Test support: NATS NKeys made here with OpenSSL's Ed25519, in the encoding
// nats-server and nats.c read (a prefix byte naming the key's role, the key, a CRC-16
// in little-endian order, all in base32 without padding): a user's public key ("U…",
// what the server's configuration lists) and its seed ("SU…", what the client signs
// the server's nonce with).
#pragma once

#include <string>

#include "idem/status.hpp"

namespace idem::nats_test {

struct UserNKey {
  std::string public_key;  // "U…", 56 characters
  std::string seed;        // "SU…", 58 characters: a secret
};

// A new random user key pair. kInternal if OpenSSL cannot make one.
StatusOr<UserNKey> make_user_nkey();

}  // namespace idem::nats_test

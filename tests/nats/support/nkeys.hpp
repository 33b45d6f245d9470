// Test support: NATS NKeys made here with OpenSSL's Ed25519, in the encoding
// nats-server and nats.c read (a prefix byte naming the key's role, the key, a CRC-16
// in little-endian order, all in base32 without padding): a user's public key ("U…",
// what the server's configuration lists) and its seed ("SU…", what the client signs
// the server's nonce with). And the JWTs of operator mode (an operator signs an
// account, the account signs a user; header, claims and Ed25519 signature in
// base64url), for a credentials file: the user's JWT and seed.
#pragma once

#include <string>

#include "idem/status.hpp"

namespace idem::nats_test {

struct UserNKey {
  std::string public_key;  // "U…", 56 characters
  std::string seed;        // "SU…", 58 characters: a secret
  std::string raw_seed;    // the 32 bytes the seed encodes
};

// A new random key pair of a user ('U'), an account ('A') or an operator ('O').
// kInternal if OpenSSL cannot make one.
StatusOr<UserNKey> make_nkey(char role);
inline StatusOr<UserNKey> make_user_nkey() { return make_nkey('U'); }

// Operator mode: the operator's JWT (for the server's `operator:`), its system
// account and one account (public keys and JWTs, for `resolver_preload`; JetStream
// allowed in the account) and a credentials file's text for one user of the account.
struct OperatorSetup {
  std::string operator_jwt;
  std::string system_public_key, system_jwt;
  std::string account_public_key, account_jwt;
  std::string user_creds;
};
StatusOr<OperatorSetup> make_operator_setup();

}  // namespace idem::nats_test

// The answer codes of the Lua scripts (scripts.cpp, entity_scripts.cpp): the first
// element of every script's answer array. The Lua text returns these numbers, each
// with a comment naming its enumerator here; a change on one side is a change on both.
#pragma once

#include <cstdint>

namespace idem::redis::detail {

// Every script: {-1, message}, an error reply of the server or a value that is not an
// idem record (the message starts with the server's error word, or IDEMCORRUPT).
inline constexpr std::int64_t kScriptError = -1;

// claim, claim_many (per key), claim_entity.
enum class ClaimCode : std::int64_t {
  kGranted = 0,    // {0, retries} (claim_entity: {0, retries, revision, version, state})
  kCompleted = 1,  // {1, dead_lettered, has_result, result}
  kLeased = 2,     // {2, owner, lease_left_ms}: another live lease holds the id
  kConflict = 3,   // {3}: the fingerprint differs from the stored one
};

// commit, commit_many (per key, as one character: see kCommitManyCodes), commit_entity,
// write_entity.
enum class CommitCode : std::int64_t {
  kCommitted = 0,         // {0} (entity scripts: maybe followed by a removal to account)
  kAlreadyCompleted = 1,  // {1}
  kLeasedByOther = 2,     // {2, owner}
  kRevisionMismatch = 4,  // {4}: commit_entity, write_entity; nothing was written
};

// commit_many's per-key answer characters, in CommitCode order: '0' kCommitted,
// '1' kAlreadyCompleted, '2' kLeasedByOther; 'e' is kScriptError.
inline constexpr char kCommitManyError = 'e';

// extend.
enum class ExtendCode : std::int64_t {
  kExtended = 0,  // {0}
  kNotHeld = 1,   // {1}: no lease of this owner
  kExpired = 2,   // {2}: this owner's lease expired
};

// inspect.
enum class InspectCode : std::int64_t {
  kAbsent = 0,  // {0}: no key
  kFound = 1,   // {1, s, o, l, e, n, f|nil, r|nil}
};

// buffer_put, buffer_account; release, buffer_read, buffer_remove and buffer_key_info
// answer kOk or kScriptError only.
enum class BufferCode : std::int64_t {
  kOk = 0,            // buffer_put: {0, 1} stored | {0, 0} the same entry is there
  kVersionTaken = 5,  // {5}: (key, version) holds another message id
  kLimit = 6,         // {6, limit name}: nothing changed
  kAbsent = 7,        // {7}: buffer_put in 'check' mode found no entry
};

}  // namespace idem::redis::detail

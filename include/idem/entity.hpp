// Per-entity records of the store contract (docs/design.md §4–§6): what ordering and state
// machines keep per entity key, and the durable reorder buffer of early versions.
//
// An entity record holds the applied version and the state-machine state of one key.
// It changes only through an EntityWrite, which is a compare-and-set on the record's
// revision: two consumers that read the same revision cannot both write. Entity
// records have no TTL; purge_expired() never removes them.
//
// The reorder buffer holds, per key, messages whose version arrived before its
// predecessors (strict ordering). An entry is keyed by (key, version) and carries the
// message id and the encoded message, so that the consumer can run the handler on it
// later, possibly in another process after a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/clock.hpp"

namespace idem {

struct EntityRecord {
  std::uint64_t revision = 0;  // 0: the key has no record; every write adds 1
  std::uint64_t version = 0;   // the applied version; 0: none applied yet
  std::string state;           // the state-machine state; empty: none recorded
};

// A change of one entity record, applied iff the record's revision still equals
// expect_revision (0: the key must have no record). On success the revision becomes
// expect_revision + 1 and the given fields are replaced; fields left nullopt keep
// their value. If `unbuffer` is set, the buffer entry (key, *unbuffer) is removed in
// the same atomic step (no-op if absent).
struct EntityWrite {
  std::string_view key;                   // REQUIRES: non-empty
  std::uint64_t expect_revision = 0;      // the revision the writer read
  std::optional<std::uint64_t> version;   // the new applied version
  std::optional<std::string_view> state;  // the new state; REQUIRES: non-empty if set
  std::optional<std::uint64_t> unbuffer;  // buffer entry to remove with this write
};

// One message held in the reorder buffer.
struct BufferEntry {
  std::string key;
  std::uint64_t version = 0;
  std::string id;       // the message id
  std::string message;  // the encoded message (the consumer's codec)
  TimePoint buffered_at;

  // The bytes this entry counts against BufferLimits::total_bytes.
  std::size_t bytes() const { return key.size() + id.size() + message.size(); }
};

// Bounds of the reorder buffer, enforced by buffer_put.
struct BufferLimits {
  std::size_t per_key = 1000;                   // entries per key; default 1000
  std::size_t total = 100'000;                  // entries in the store; default 100k
  std::size_t total_bytes = 64u * 1024 * 1024;  // bytes (BufferEntry::bytes); 64 MiB
};

// Adds an entry to the buffer of `key`.
struct BufferPut {
  std::string_view key;      // REQUIRES: non-empty
  std::uint64_t version = 0; // REQUIRES: > 0
  std::string_view id;       // REQUIRES: non-empty
  std::string_view message;
  TimePoint now;             // becomes buffered_at
  BufferLimits limits;
};

// One key that has buffered entries.
struct BufferedKey {
  std::string key;
  std::size_t count = 0;             // entries of this key
  std::uint64_t lowest_version = 0;  // the smallest buffered version
  TimePoint oldest_at;               // the earliest buffered_at among them
};

struct BufferSummary {
  std::size_t count = 0;          // entries in the whole buffer
  std::size_t bytes = 0;          // their BufferEntry::bytes() summed
  std::vector<BufferedKey> keys;  // up to the requested number, oldest_at ascending
};

}  // namespace idem

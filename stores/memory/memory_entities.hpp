// Entity records and the reorder buffer of memory: (entity.hpp), striped by key.
//
// Lock order: a MemoryStore id shard, then one key stripe, then the buffer totals.
// A commit with an entity write holds its id shard and the key's stripe together, so
// the dedup record and the entity write land in one step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "idem/entity.hpp"
#include "idem/status.hpp"

namespace idem::memory_detail {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

class Entities {
 public:
  // REQUIRES: stripes > 0.
  explicit Entities(std::size_t stripes);

  // --- the Store methods (each takes its own locks) --------------------------------
  EntityRecord read(std::string_view key);
  Status write(const EntityWrite& write);  // REQUIRES: check_entity_write(write) is OK
  Status put(const BufferPut& put);
  std::vector<BufferEntry> read_buffer(std::string_view key, std::size_t max);
  void remove(std::string_view key, std::uint64_t version);
  BufferSummary summary(std::size_t max_keys);
  // Removes key's record and all its buffered entries. Returns true iff there were any.
  bool erase(std::string_view key);

  // --- for a commit that holds an id shard -------------------------------------------
  // Returns the held lock of key's stripe.
  std::unique_lock<std::mutex> lock(std::string_view key);
  // Returns kAborted iff write.expect_revision is not the stored revision.
  // REQUIRES: lock(write.key) held.
  Status check_locked(const EntityWrite& write);
  // Applies a write that passed check_locked, with its unbuffer.
  // REQUIRES: lock(write.key) held, check_locked(write) OK under that same hold.
  void apply_locked(const EntityWrite& write);
  // REQUIRES: lock(key) held.
  EntityRecord read_locked(std::string_view key);

 private:
  struct Stored {
    std::string id;
    std::string message;
    TimePoint buffered_at;
  };
  using KeyBuffer = std::map<std::uint64_t, Stored>;  // by version
  struct Stripe {
    std::mutex mu;
    std::unordered_map<std::string, EntityRecord, StringHash, std::equal_to<>> records;
    std::unordered_map<std::string, KeyBuffer, StringHash, std::equal_to<>> buffers;
  };

  Stripe& stripe(std::string_view key) { return *stripes_[std::hash<std::string_view>{}(key) % stripes_.size()]; }
  // REQUIRES: s.mu held.
  void remove_locked(Stripe& s, std::string_view key, std::uint64_t version);

  std::vector<std::unique_ptr<Stripe>> stripes_;
  std::mutex totals_mu_;   // after a stripe's mutex, never before
  std::size_t count_ = 0;  // entries in all stripes
  std::size_t bytes_ = 0;  // their BufferEntry::bytes() summed
};

}  // namespace idem::memory_detail

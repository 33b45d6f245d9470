// memory: — an in-process store for tests and single-process use. Not durable.
// Bounded by a record count (oldest records are evicted first, and an evicted id is
// forgotten) and by TTL. Thread-safe; sharded by id hash so threads rarely contend.
// Keeps entity records and the reorder buffer (capabilities().entities): entity
// records are neither evicted nor expired, so they grow with the number of distinct
// entity keys; the buffer is bounded by each buffer_put's BufferLimits.
#pragma once

#include <cstddef>
#include <memory>

#include "idem/store.hpp"

namespace idem {

struct MemoryStoreOptions {
  std::size_t max_records = 1'000'000;  // records kept before eviction; default 1M
  std::size_t shards = 16;              // lock stripes (ids, and entity keys); default 16; REQUIRES: > 0
};

// Returns a new memory store, or kInvalidArgument for zero limits.
StatusOr<std::shared_ptr<Store>> open_memory_store(MemoryStoreOptions options = {});

}  // namespace idem

// memory: — an in-process store for tests and single-process use (idem::memory).
// Not durable. Bounded by a record count (oldest records are evicted first, and an
// evicted id is forgotten) and by TTL. Thread-safe; sharded by id hash so threads
// rarely contend. Keeps entity records and the reorder buffer
// (Store::entities()): entity records are neither evicted nor expired, so they
// grow with the number of distinct entity keys; the buffer is bounded by each
// buffer_put's BufferLimits.
#pragma once

#include <cstddef>
#include <memory>

#include "idem/backend/store_uri.hpp"
#include "idem/store.hpp"

namespace idem::memory {

struct Options {
  // Records kept before the oldest is evicted. REQUIRES: > 0. Default 1,000,000.
  // Each shard reserves an index for its share at open: 16 bytes of address space per
  // record, at most 2 MiB per shard, resident only as its pages are touched.
  std::size_t max_records = 1'000'000;
  // Lock stripes (of ids, and of entity keys). REQUIRES: > 0. Default 16; more than
  // max_records are reduced to max_records.
  std::size_t shards = 16;
};

// Returns a new, empty store. Errors: kInvalidArgument naming the option that is zero.
// Nothing else can fail.
StatusOr<std::shared_ptr<Store>> open(const Options& options = {});

// From a URI: memory:?max_records=N&shards=N (no path). Returns kInvalidArgument for a
// path, an unknown parameter or a value that is not a number, and open()'s errors.
StatusOr<std::shared_ptr<Store>> open(const StoreUri& uri);

}  // namespace idem::memory

// bloom+rocksdb:PATH — a Bloom front filter (idem::bloom, role 2) over a RocksDB store
// (idem::rocksdb), wired for every saving the pair allows:
//   - a claim the filter answers "certainly absent" takes the lease without a read
//     (rocksdb::claim_known_absent, claim_known_absent_batch);
//   - the filter warms at open from every record of the database
//     (rocksdb::for_each_record), so it vouches for absence from the start;
//   - a commit notes its id in the filter inside the RocksDB transaction
//     (rocksdb::begin_observed), so transactional mode keeps rocksdb::batch(ctx).
// Answers are the RocksDB store's; the filter only saves reads (bloom_store.hpp).
// Part of idem::stores, in a build with both the bloom and the rocksdb backend.
// Thread-safe.
#pragma once

#include <memory>

#include "idem/bloom_store.hpp"
#include "idem/rocksdb_store.hpp"

namespace idem::bloom_rocksdb {

struct Options {
  // The database, as rocksdb::open takes it (REQUIRES: durable.path non-empty).
  rocksdb::Options durable{};
  // The filter. REQUIRES: as bloom::Options, and snapshot_path empty. Default
  // bloom::front_options(): window 7 days, fp 0.01, capacity 1,000,000, 4 generations.
  bloom::Options filter = bloom::front_options();
};

// Opens the RocksDB store (rocksdb::open), then puts the filter in front of it and
// warms the filter with a scan of every record. Errors: rocksdb::open's (the database
// is then not opened); kInvalidArgument naming a filter option that cannot be met
// (bloom::open's option errors, or a snapshot_path); the scan's kUnavailable or
// kDataLoss. On an error nothing stays open.
StatusOr<std::shared_ptr<bloom::FrontStore>> open(const Options& options);

// Puts the filter in front of `durable`, a store from rocksdb::open (the front shares
// ownership of it). Errors: kInvalidArgument for a null store or filter options as
// open(); the warming scan's errors.
StatusOr<std::shared_ptr<bloom::FrontStore>> open_front(std::shared_ptr<rocksdb::RocksDbStore> durable,
                                                       const bloom::Options& filter);

}  // namespace idem::bloom_rocksdb

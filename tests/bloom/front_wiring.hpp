// Test wiring of a Bloom front filter over a RocksDB store, the way open_store()
// wires bloom+rocksdb:, but with rocksdb::Options (e.g. a fault hook) in hand.
#pragma once

#include "idem/bloom_store.hpp"
#include "idem/rocksdb_store.hpp"

namespace idem::testing {

inline bloom::DurableHooks rocksdb_hooks(Store* raw) {
  bloom::DurableHooks h;
  h.claim_absent = [raw](const ClaimRequest& q) { return rocksdb::claim_known_absent(*raw, q); };
  h.claim_absent_batch = [raw](std::span<const ClaimRequest> qs) {
    return rocksdb::claim_known_absent_batch(*raw, qs);
  };
  h.for_each_record = [raw](const std::function<void(std::string_view, TimePoint)>& visit) {
    return rocksdb::for_each_record(*raw, visit);
  };
  h.begin_observed = [raw](TimePoint now, std::function<void(const CommitRequest&)> before) {
    return rocksdb::begin_observed(*raw, now, std::move(before));
  };
  return h;
}

inline StatusOr<std::shared_ptr<Store>> open_bloom_rocksdb(const rocksdb::Options& ro, const bloom::Options& bo) {
  auto durable = rocksdb::open(ro);
  if (!durable.ok()) return durable.status();
  Store* raw = durable->get();
  return bloom::open_front(*durable, bo, rocksdb_hooks(raw));
}

}  // namespace idem::testing

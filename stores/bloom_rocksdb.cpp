// bloom+rocksdb: the Bloom front filter over a RocksDB store (bloom_rocksdb.hpp).
#include "idem/bloom_rocksdb.hpp"

#include <functional>
#include <span>
#include <string_view>
#include <utility>

namespace idem::bloom_rocksdb {

StatusOr<std::shared_ptr<bloom::FrontStore>> open_front(std::shared_ptr<rocksdb::RocksDbStore> durable,
                                                       const bloom::Options& filter) {
  if (!durable) return invalid_argument("bloom_rocksdb: open_front: the durable store is null");
  // The hooks capture the raw store: the front owns `durable`, so it outlives them.
  rocksdb::RocksDbStore* raw = durable.get();
  bloom::DurableHooks hooks;
  hooks.claim_absent = [raw](const ClaimRequest& q) { return raw->claim_known_absent(q); };
  hooks.claim_absent_batch = [raw](std::span<const ClaimRequest> qs) { return raw->claim_known_absent_batch(qs); };
  hooks.for_each_record = [raw](const std::function<void(std::string_view, TimePoint)>& visit) {
    return raw->for_each_record(visit);
  };
  hooks.begin_observed = [raw](TimePoint now, std::function<void(const CommitRequest&)> before) {
    return raw->begin_observed(now, std::move(before));
  };
  return bloom::open_front(std::move(durable), filter, std::move(hooks));
}

StatusOr<std::shared_ptr<bloom::FrontStore>> open(const Options& options) {
  auto durable = rocksdb::open(options.durable);
  if (!durable.ok()) return durable.status();
  return open_front(std::move(durable).value(), options.filter);
}

}  // namespace idem::bloom_rocksdb

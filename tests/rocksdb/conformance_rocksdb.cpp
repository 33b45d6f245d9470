// The store conformance suite against rocksdb:, with the default options; with one
// lock stripe (every id contends on one mutex), a tiny memtable (records are flushed
// to SST files and read back from them) and no entity cache (entity records are read
// from the database every time); and with an entity cache of one record per stripe
// (evicted all the time).
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "conformance/store_conformance.hpp"
#include "idem/rocksdb_store.hpp"

namespace idem::conformance {
namespace {

namespace fs = std::filesystem;

class RocksLocation final : public StoreLocation {
 public:
  explicit RocksLocation(rocksdb::Options base) : base_(std::move(base)) {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("idem-conformance-rocksdb-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)));
    fs::remove_all(dir_);
  }
  ~RocksLocation() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  StatusOr<std::shared_ptr<Store>> open(FaultHook hook) override {
    rocksdb::Options o = base_;
    o.path = dir_.string();
    o.fault_hook = std::move(hook);
    return rocksdb::open(o);
  }

 private:
  rocksdb::Options base_;
  fs::path dir_;
};

StoreFactory rocksdb_factory(std::string name, rocksdb::Options base, bool variant = false) {
  StoreFactory f;
  f.name = std::move(name);
  f.variant = variant;
  f.capabilities.durable = true;
  f.capabilities.shared = false;  // RocksDB's LOCK file admits one handle at a time
  f.capabilities.probabilistic = false;
  f.capabilities.fault_hook = true;  // "rocksdb.commit.write", before the one WriteBatch
  f.capabilities.entities = true;    // idem_entities and idem_buffer
  f.new_location = [base] { return std::make_unique<RocksLocation>(base); };
  return f;
}

rocksdb::Options one_stripe_small_memtable() {
  rocksdb::Options o;
  o.lease_stripes = 1;
  o.write_buffer_mib = 1;
  o.block_cache_mib = 1;
  o.entity_cache = 0;
  return o;
}

rocksdb::Options tiny_entity_cache() {
  rocksdb::Options o;
  o.lease_stripes = 4;
  o.entity_cache = 4;
  return o;
}

INSTANTIATE_TEST_SUITE_P(RocksDB, StoreConformance,
                         ::testing::Values(rocksdb_factory("defaults", {}),
                                           rocksdb_factory("one_stripe", one_stripe_small_memtable(), true),
                                           rocksdb_factory("tiny_entity_cache", tiny_entity_cache(), true)),
                         factory_name);

}  // namespace
}  // namespace idem::conformance

// The store conformance suite against a Bloom front filter over RocksDB
// (bloom+rocksdb:). The front filter is not probabilistic: a positive always reads
// the durable store, so it must pass every test exactly like rocksdb: alone. A small
// filter (so false positives are frequent) and a default one.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "conformance/store_conformance.hpp"
#include "idem/bloom_rocksdb.hpp"

namespace idem::conformance {
namespace {

namespace fs = std::filesystem;

class FrontLocation final : public StoreLocation {
 public:
  explicit FrontLocation(bloom::Options filter) : filter_(filter) {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("idem-conformance-bloom-rocksdb-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(dir_);
  }
  ~FrontLocation() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  StatusOr<std::shared_ptr<Store>> open(FaultHook hook) override {
    rocksdb::Options o;
    o.path = dir_.string();
    o.fault_hook = std::move(hook);
    return bloom_rocksdb::open({.durable = o, .filter = filter_});
  }

 private:
  bloom::Options filter_;
  fs::path dir_;
};

StoreFactory front_factory(std::string name, bloom::Options filter, bool variant = false) {
  StoreFactory f;
  f.name = std::move(name);
  f.variant = variant;
  f.capabilities.durable = true;
  f.capabilities.shared = false;
  f.capabilities.probabilistic = false;  // positives are confirmed by the durable store
  f.capabilities.entities = true;        // rocksdb's, through the filter
  f.capabilities.fault_hook = true;      // rocksdb's, inside the durable commit
  f.new_location = [filter] { return std::make_unique<FrontLocation>(filter); };
  return f;
}

INSTANTIATE_TEST_SUITE_P(BloomRocksDB, StoreConformance,
                         ::testing::Values(front_factory("default_filter", {.capacity = 100'000, .fp = 0.001}, true),
                                           // 1000 ids per filter at 30%: many false positives
                                           front_factory("leaky_filter",
                                                         {.capacity = 1000, .fp = 0.3, .generations = 1})),
                         factory_name);

}  // namespace
}  // namespace idem::conformance

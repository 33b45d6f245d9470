// The store conformance suite against a Bloom front filter over SQLite
// (bloom+sqlite:). SQLite offers the filter no claim-without-read, so the filter
// never vouches and every answer is SQLite's: it must pass exactly like sqlite:.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "conformance/store_conformance.hpp"
#include "idem/bloom_store.hpp"
#include "idem/sqlite_store.hpp"

namespace idem::conformance {
namespace {

namespace fs = std::filesystem;

class FrontSqliteLocation final : public StoreLocation {
 public:
  FrontSqliteLocation() {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("idem-conformance-bloom-sqlite-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~FrontSqliteLocation() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  StatusOr<std::shared_ptr<Store>> open(FaultHook hook) override {
    sqlite::Options o;
    o.path = (dir_ / "idem.db").string();
    o.fault_hook = std::move(hook);
    auto durable = sqlite::open(o);
    if (!durable.ok()) return durable.status();
    return bloom::open_front(*durable, {.capacity = 10'000, .fp = 0.01}, {});
  }

 private:
  fs::path dir_;
};

StoreFactory front_sqlite_factory() {
  StoreFactory f;
  f.name = "bloom_sqlite";
  f.capabilities.durable = true;
  f.capabilities.shared = false;
  f.capabilities.probabilistic = false;
  f.capabilities.entities = true;  // sqlite's, through the filter
  f.capabilities.fault_hook = true;  // sqlite's, inside the durable commit
  f.new_location = [] { return std::make_unique<FrontSqliteLocation>(); };
  return f;
}

INSTANTIATE_TEST_SUITE_P(BloomSqlite, StoreConformance, ::testing::Values(front_sqlite_factory()), factory_name);

}  // namespace
}  // namespace idem::conformance

// The store conformance suite against sqlite:, with leases kept in the process
// (LeaseMode::kLocal) and in the file (LeaseMode::kShared).
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "conformance/store_conformance.hpp"
#include "idem/sqlite_store.hpp"

namespace idem::conformance {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test holding one database file; removed with the location.
class SqliteLocation final : public StoreLocation {
 public:
  explicit SqliteLocation(sqlite::LeaseMode mode) : mode_(mode) {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("idem-conformance-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~SqliteLocation() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  StatusOr<std::shared_ptr<Store>> open(FaultHook hook) override {
    sqlite::Options o;
    o.path = (dir_ / "idem.db").string();
    o.leases = mode_;
    o.busy_timeout = Duration(2000);
    o.fault_hook = std::move(hook);
    return sqlite::open(o);
  }

 private:
  sqlite::LeaseMode mode_;
  fs::path dir_;
};

StoreFactory sqlite_factory(std::string name, sqlite::LeaseMode mode) {
  StoreFactory f;
  f.name = std::move(name);
  f.capabilities.durable = true;
  f.capabilities.shared = mode == sqlite::LeaseMode::kShared;
  f.capabilities.probabilistic = false;
  f.capabilities.fault_hook = true;
  f.capabilities.entities = true;
  f.new_location = [mode] { return std::make_unique<SqliteLocation>(mode); };
  return f;
}

INSTANTIATE_TEST_SUITE_P(Sqlite, StoreConformance,
                         ::testing::Values(sqlite_factory("local_leases", sqlite::LeaseMode::kLocal),
                                           sqlite_factory("shared_leases", sqlite::LeaseMode::kShared)),
                         factory_name);

}  // namespace
}  // namespace idem::conformance

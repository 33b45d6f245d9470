// The store conformance suite against memory:.
#include "conformance/store_conformance.hpp"
#include "idem/memory_store.hpp"

namespace idem::conformance {
namespace {

// Memory keeps nothing between handles: each open() is a new, empty store.
class MemoryLocation final : public StoreLocation {
 public:
  explicit MemoryLocation(memory::Options o) : options_(o) {}
  StatusOr<std::shared_ptr<Store>> open(FaultHook) override { return memory::open(options_); }

 private:
  memory::Options options_;
};

StoreFactory memory_factory(std::string name, memory::Options o) {
  StoreFactory f;
  f.name = std::move(name);
  f.capabilities.durable = false;
  f.capabilities.shared = false;
  f.capabilities.probabilistic = false;
  f.capabilities.entities = true;
  f.capabilities.fault_hook = false;
  f.capabilities.no_fault_hook_reason =
      "memory: a commit (with its entity write) runs under its id shard's and entity key's mutexes with no "
      "intermediate step that can fail, so it has no fault points";
  f.new_location = [o] { return std::make_unique<MemoryLocation>(o); };
  return f;
}

INSTANTIATE_TEST_SUITE_P(Memory, StoreConformance,
                         ::testing::Values(memory_factory("sharded", {}),
                                           memory_factory("one_shard", {.max_records = 1'000'000, .shards = 1})),
                         factory_name);

}  // namespace
}  // namespace idem::conformance

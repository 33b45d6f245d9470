// The store conformance suite against the standalone Bloom store (bloom:), with its
// departures from the contract stated in the factory (FactoryCapabilities):
//   probabilistic       false positives on fresh ids, at most the configured rate;
//   membership_only     a committed id is only "done": no result, no fingerprint, no
//                       dead-letter mark;
//   fixed_retention     ids are remembered for the window, not the commit's ttl;
//   no fault hook       a commit is one filter insert under a lock.
// Leases, retry counts and the exactly-one-winner promise are exact and tested as for
// every store. Not durable: the suite checks that a reopened store works.
#include "conformance/store_conformance.hpp"
#include "idem/bloom_store.hpp"

namespace idem::conformance {
namespace {

// The suite's kTtl: the window must equal it (see fixed_retention).
constexpr Duration kSuiteTtl{3'600'000};

class BloomLocation final : public StoreLocation {
 public:
  explicit BloomLocation(bloom::Options o) : options_(std::move(o)) {}
  StatusOr<std::shared_ptr<Store>> open(FaultHook) override { return bloom::open(options_); }

 private:
  bloom::Options options_;
};

StoreFactory bloom_factory(std::string name, bloom::Options o) {
  StoreFactory f;
  f.name = std::move(name);
  f.capabilities.durable = false;
  f.capabilities.shared = false;
  f.capabilities.probabilistic = true;
  f.capabilities.false_positive_rate = o.fp;
  f.capabilities.membership_only = true;
  f.capabilities.fixed_retention = o.window;
  f.capabilities.fault_hook = false;
  f.capabilities.no_fault_hook_reason =
      "bloom: a commit is one insert into the newest in-memory filter under a lock; no step can fail midway";
  f.new_location = [o] { return std::make_unique<BloomLocation>(o); };
  return f;
}

INSTANTIATE_TEST_SUITE_P(
    Bloom, StoreConformance,
    ::testing::Values(bloom_factory("four_generations", {.capacity = 100'000, .fp = 0.001, .window = kSuiteTtl}),
                      // one filter (plus the next), sized at libbloom's minimum of 1000 ids
                      bloom_factory("one_small_generation",
                                    {.capacity = 1000, .fp = 0.01, .window = kSuiteTtl, .generations = 1})),
    factory_name);

}  // namespace
}  // namespace idem::conformance

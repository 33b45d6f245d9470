// The store conformance suite against the standalone Bloom store (bloom:), with its
// departures from the contract stated in the factory (FactoryCapabilities):
//   probabilistic       false positives on fresh ids, at most the configured rate;
//   membership_only     a committed id is only "done": no result, no fingerprint, no
//                       dead-letter mark;
//   fixed_retention     ids are remembered for the window, not the commit's ttl;
//   no fault hook       a commit is one filter insert under a lock;
//   no entities         entity records and the reorder buffer are refused.
// Leases, retry counts and the exactly-one-winner promise are exact and tested as for
// every store. Not durable: the suite checks that a reopened store works.
//
// Also a front filter over memory: (BloomMemory), whose read-free claim hook knows no
// entities, so that the suite checks that the filter sends every claim with an entity
// key, and every entity method, to the store behind it; and the same over a memory
// store that declares the combined commit_then_claim (front_combined_memory), which the
// filter forwards.
#include "conformance/store_conformance.hpp"
#include "idem/backend/store_wrapper.hpp"
#include "idem/bloom_store.hpp"
#include "idem/memory_store.hpp"

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
  f.capabilities.entities = false;  // no entity records or reorder buffer
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

// A memory store that declares the combined commit_then_claim (as idem::redis does),
// so that the filter in front of it forwards the call.
class CombinedMemory final : public StoreWrapper {
 public:
  using StoreWrapper::StoreWrapper;
  StoreCapabilities capabilities() const override {
    StoreCapabilities c = StoreWrapper::capabilities();
    c.combined_commit_claim = true;
    return c;
  }
};

// Each open() is a new, empty memory store behind a new filter (`combined`: declaring
// the combined commit_then_claim).
class FrontMemoryLocation final : public StoreLocation {
 public:
  explicit FrontMemoryLocation(bool combined) : combined_(combined) {}
  StatusOr<std::shared_ptr<Store>> open(FaultHook) override {
    auto durable = memory::open();
    if (!durable.ok()) return durable.status();
    Store* raw = durable->get();
    if (combined_) *durable = std::make_shared<CombinedMemory>(*durable);
    bloom::DurableHooks hooks;
    // Answers like memory's claim, but never reads an entity record (as a store's
    // read-free claim need not): a claim with an entity key must not come here.
    hooks.claim_absent = [raw](const ClaimRequest& q) {
      ClaimRequest without_entity = q;
      without_entity.entity_key.reset();
      return raw->claim(without_entity);
    };
    // The store is new and empty: there is nothing to warm from, so the filter vouches.
    hooks.for_each_record = [](const std::function<void(std::string_view, TimePoint)>&) { return ok_status(); };
    return bloom::open_front(*durable, {.capacity = 10'000, .fp = 0.01}, std::move(hooks));
  }

 private:
  bool combined_;
};

StoreFactory front_memory_factory(bool combined) {
  StoreFactory f;
  f.name = combined ? "front_combined_memory" : "front_memory";
  f.capabilities.combined_commit_claim = combined;
  f.capabilities.durable = false;
  f.capabilities.shared = false;
  f.capabilities.probabilistic = false;  // positives are confirmed by memory
  f.capabilities.entities = true;        // memory's, through the filter
  f.capabilities.fault_hook = false;
  f.capabilities.no_fault_hook_reason = "memory: no step of its commit can fail midway, so it has no fault points";
  f.new_location = [combined] { return std::make_unique<FrontMemoryLocation>(combined); };
  return f;
}

INSTANTIATE_TEST_SUITE_P(BloomMemory, StoreConformance,
                         ::testing::Values(front_memory_factory(false), front_memory_factory(true)), factory_name);

}  // namespace
}  // namespace idem::conformance

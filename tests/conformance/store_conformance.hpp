// The store conformance suite: one set of value-parameterised tests of the Store
// contract (include/idem/store.hpp) that every backend's test binary instantiates
// with a StoreFactory:
//
//   INSTANTIATE_TEST_SUITE_P(Memory, StoreConformance,
//                            ::testing::Values(memory_factory()),
//                            idem::conformance::factory_name);
//
// The suite drives time through the `now` of each request, never by sleeping.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "idem/clock.hpp"
#include "idem/store.hpp"

namespace idem::conformance {

// One place where a store lives (a directory, a database number, or nothing for
// memory). A location outlives the stores opened at it; destroying it removes what
// the stores left behind.
class StoreLocation {
 public:
  virtual ~StoreLocation() = default;
  // Opens a store at this location. Each call opens a new handle; the suite closes a
  // handle (drops every shared_ptr to it) before it opens the next one unless the
  // factory says the store is shared. `hook` is null or a fault hook (see store.hpp);
  // factories whose backend has no fault hook ignore it.
  virtual StatusOr<std::shared_ptr<Store>> open(FaultHook hook) = 0;
};

// What a backend promises; the suite asserts each promise, and only those it makes.
// A backend that departs from the contract states each departure here as a named
// field (as probabilistic/false_positive_rate does); the tests it affects branch on
// that field and assert the weaker promise instead. Nothing is skipped.
struct FactoryCapabilities {
  // Records committed through one handle are there after close and reopen.
  bool durable = false;
  // Two handles open at the same location at once see each other's leases and records.
  bool shared = false;
  // claim may answer kCompleted for an id never committed (a false positive). The
  // suite then tolerates false positives on fresh ids, up to false_positive_rate,
  // instead of requiring kNew, and checks that rate on its own test.
  bool probabilistic = false;
  double false_positive_rate = 0.0;  // REQUIRES: 0 unless probabilistic
  // The backend calls a FaultHook passed to open() inside commit. When false,
  // no_fault_hook_reason says why, and the atomic-commit test checks only what can be
  // checked without one (a rejected commit changes nothing).
  bool fault_hook = false;
  std::string no_fault_hook_reason;
  // Membership only (the standalone Bloom store): of a committed id the store keeps
  // only that it is done. A duplicate gets kCompleted without its result, with
  // dead_lettered false, and never kConflict (the fingerprint is not kept); inspect()
  // shows kCompleted without result or fingerprint. The affected tests assert exactly
  // that instead. REQUIRES: probabilistic.
  bool membership_only = false;
  // > 0: the store keeps a committed id for this long whatever the commit's ttl (a
  // Bloom window). REQUIRES: equal to the suite's kTtl, so that the tests' expiry
  // checks hold; tests that commit with a shorter ttl check this retention instead.
  Duration fixed_retention{0};
  // commit_then_claim is one round trip (capabilities().combined_commit_claim). When
  // false the store keeps Store's default, the two calls (a declared departure): the
  // commit_then_claim tests then assert that its answers and records are exactly those
  // of commit() and claim() made one after the other.
  bool combined_commit_claim = false;
  // The store keeps entity records and the reorder buffer (entity.hpp): entities() is
  // not null. When false, the entity tests assert that it is null instead.
  bool entities = false;
};

struct StoreFactory {
  std::string name;  // test-name suffix: letters, digits and '_' only
  FactoryCapabilities capabilities;
  // A tuning of a store that another factory of the same store already covers (a small
  // cache, one stripe): the differential test runs a quarter of its traces on it.
  bool variant = false;
  // Returns a new, empty location. Called once per test.
  std::function<std::unique_ptr<StoreLocation>()> new_location;
  // Returns the live record of id at `now` (as Store::inspect), for an id whose every
  // claim, release, extend and commit carried `entity_key` (nullopt: none did). A
  // store that places an id's record by its entity key (store.hpp, ClaimRequest) reads
  // it there. Default: Store::inspect, whatever the key.
  std::function<StatusOr<std::optional<RecordInfo>>(Store&, std::string_view id,
                                                    std::optional<std::string_view> entity_key, TimePoint now)>
      inspect = [](Store& s, std::string_view id, std::optional<std::string_view>, TimePoint now) {
        return s.inspect(id, now);
      };
};

// Prints the factory's name in test output (instead of its bytes).
void PrintTo(const StoreFactory& f, std::ostream* os);

// For INSTANTIATE_TEST_SUITE_P's name generator.
std::string factory_name(const ::testing::TestParamInfo<StoreFactory>& info);

// A fault hook whose behaviour a test changes while the store is open: it records
// every point it is called at and fails at the point named by fail_at().
class FaultSwitch {
 public:
  // The hook to pass to StoreLocation::open. Holds a reference to *this.
  FaultHook hook();
  // From now on, fail (kUnavailable) at `point`; empty: fail nowhere.
  void fail_at(std::string point);
  // Points seen since the last clear_seen(), in call order, deduplicated.
  std::vector<std::string> seen() const;
  void clear_seen();

 private:
  mutable std::mutex mu_;
  std::string fail_at_;
  std::vector<std::string> seen_;
};

class StoreConformance : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override;
  void TearDown() override;

  const FactoryCapabilities& caps() const { return GetParam().capabilities; }
  Store& store() { return *store_; }
  // Closes the current handle and opens a new one at the same location.
  void reopen();
  // Opens a second, concurrent handle at the same location (shared stores only).
  std::shared_ptr<Store> open_second();

  // Request builders with the suite's defaults (lease 10 s, ttl 1 h, retry_ttl 1 h).
  ClaimRequest claim_req(std::string_view id, std::string_view owner, TimePoint now,
                         std::optional<std::uint64_t> fp = std::nullopt) const;
  CommitRequest commit_req(std::string_view id, std::string_view owner, TimePoint now,
                           std::optional<std::string_view> result = std::nullopt,
                           Outcome outcome = Outcome::kProcessed) const;
  ReleaseRequest release_req(std::string_view id, std::string_view owner, TimePoint now, bool count_retry) const;

  // Claims `id` (with `entity_key`, if set) and requires kNew (a probabilistic store
  // may instead answer a false positive: then returns false and the caller must not
  // rely on the lease).
  bool claim_new(std::string_view id, std::string_view owner, TimePoint now,
                 std::optional<std::uint64_t> fp = std::nullopt,
                 std::optional<std::string_view> entity_key = std::nullopt);
  ClaimResult claim_ok(const ClaimRequest& r);
  // The factory's inspect of id (claimed with entity_key, if set) on the current handle.
  StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint now,
                                              std::optional<std::string_view> entity_key = std::nullopt);
  // inspect() that requires a live record.
  RecordInfo inspect_live(std::string_view id, TimePoint now,
                          std::optional<std::string_view> entity_key = std::nullopt);

  // The result a duplicate carries under this factory: `r`, or nullopt for a
  // membership-only store.
  std::optional<std::string> stored(std::optional<std::string> r) const {
    return caps().membership_only ? std::nullopt : r;
  }
  // The answer to a different fingerprint on a completed id: kConflict, or kCompleted
  // for a membership-only store (which did not keep the fingerprint).
  ClaimStatus completed_conflict() const {
    return caps().membership_only ? ClaimStatus::kCompleted : ClaimStatus::kConflict;
  }

  static constexpr Duration kLease{10'000};
  static constexpr Duration kTtl{3'600'000};
  static constexpr Duration kRetryTtl{3'600'000};

  ManualClock clock_;
  FaultSwitch faults_;
  std::unique_ptr<StoreLocation> location_;
  std::shared_ptr<Store> store_;
};

}  // namespace idem::conformance

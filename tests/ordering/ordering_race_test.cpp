// Strict ordering, two consumers on one store: a drain that finds its buffered entry
// already completed by the other consumer (a redelivery of it) must not move the
// entity's version back, or the key stops behind a gap no delivery can fill.
//
// The interleaving is deterministic: the store the first consumer (A) uses runs a hook
// just before A's claim of a buffered message, and the hook lets the second consumer
// (B) process that same message and, through B's own drain, its successor. A's claim
// then finds the message completed while the entity is already past it.
#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/consumer.hpp"
#include "idem/open_store.hpp"
#include "ordering/hooked_store.hpp"
#include "ordering/one_key.hpp"
#include "support/store_uri.hpp"
#include "support/temp_dir.hpp"

namespace idem {
namespace {

using ordering_test::extractors;
using ordering_test::HookedStore;
using ordering_test::v;
using ordering_test::VMsg;

class DrainRace : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string scheme = GetParam();
    auto s = open_store(test_support::store_uri(scheme, dir_.sub("store")));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    store_ = std::move(s).value();
    hooked_ = std::make_shared<HookedStore>(store_);
  }

  Consumer<VMsg> make(std::shared_ptr<Store> store, std::string name) {
    ConsumerOptions o;
    o.store = std::move(store);
    o.clock = clock_;
    o.owner = name;
    o.ordering.mode = Ordering::kStrict;
    o.on_buffered = [](const BufferedOutcome&) {};
    auto c = Consumer<VMsg>::create(std::move(o), extractors(), [this, name](const VMsg& m, HandlerContext&) {
      seen_.push_back(name + ":" + std::to_string(m.version));
      return HandlerResult::ok();
    });
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return std::move(c).value();
  }

  testing::TempDir dir_{"ordering-race"};
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Store> store_;
  std::shared_ptr<HookedStore> hooked_;
  std::vector<std::string> seen_;
};

TEST_P(DrainRace, CompletedEntryFoundByADrainDoesNotMoveTheVersionBack) {
  Consumer<VMsg> a = make(hooked_, "A");
  Consumer<VMsg> b = make(store_, "B");

  EXPECT_EQ(b.process(v(2)).reason, Reason::kBuffered);
  EXPECT_EQ(b.process(v(3)).reason, Reason::kBuffered);
  a.tick();  // A learns that order-1 has buffered entries (as at start-up)

  // When A's drain claims m2: B gets a redelivery of m2, processes it (version 2) and,
  // draining, m3 (version 3).
  bool fired = false;
  hooked_->before_claim = [&](const ClaimRequest& r) {
    if (fired || r.id != "m2") return;
    fired = true;
    const Decision d = b.process(v(2));
    EXPECT_EQ(d.reason, Reason::kProcessed);
  };
  EXPECT_EQ(a.process(v(1)).reason, Reason::kProcessed);
  ASSERT_TRUE(fired);
  EXPECT_EQ(seen_, (std::vector<std::string>{"A:1", "B:2", "B:3"}));

  auto e = store_->entities()->read_entity("order-1");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->version, 3u) << "versions 2 and 3 were applied, but the entity says " << e->version;

  // The consequence: version 4 waits behind a gap that no delivery can fill.
  hooked_->before_claim = nullptr;
  const Decision d4 = a.process(v(4));
  EXPECT_EQ(d4.reason, Reason::kProcessed) << "version 4 was " << reason_name(d4.reason) << " (" << d4.detail << ")";
}

INSTANTIATE_TEST_SUITE_P(Stores, DrainRace, ::testing::ValuesIn(ordering_test::kStores),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace idem

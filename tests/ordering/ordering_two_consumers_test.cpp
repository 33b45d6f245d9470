// Strict ordering with two consumers on one store (two processes of one service): a
// successor buffered by consumer B must be drained when consumer A commits its
// predecessor, as docs/design.md §5 says ("when the missing version is processed, the
// buffered successors are drained in order"), not only at the next tick().
//
// The interleaving is made deterministic by delivering v2 to B from inside A's handler
// for v1: B claims v2 while v1 is not committed yet, so B buffers it; then A commits v1.
#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/consumer.hpp"
#include "idem/open_store.hpp"
#include "ordering/one_key.hpp"
#include "support/store_uri.hpp"
#include "support/temp_dir.hpp"

namespace idem {
namespace {

using ordering_test::extractors;
using ordering_test::v;
using ordering_test::VMsg;

class TwoConsumers : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string scheme = GetParam();
    auto s = open_store(test_support::store_uri(scheme, dir_.sub("store")));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    store_ = std::move(s).value();
  }

  Consumer<VMsg> make(std::function<void(const VMsg&)> during) {
    ConsumerOptions o;
    o.store = store_;
    o.clock = clock_;
    o.ordering.mode = Ordering::kStrict;
    o.on_buffered = [this](const BufferedOutcome& b) { outcomes_.push_back(b); };
    auto c = Consumer<VMsg>::create(std::move(o), extractors(), [this, during](const VMsg& m, HandlerContext&) {
      seen_.push_back(m.version);
      if (during) during(m);
      return HandlerResult::ok();
    });
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return std::move(c).value();
  }

  testing::TempDir dir_{"ordering-two"};
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Store> store_;
  std::vector<std::uint64_t> seen_;
  std::vector<BufferedOutcome> outcomes_;
};

TEST_P(TwoConsumers, SuccessorBufferedByTheOtherConsumerIsDrainedWhenThePredecessorCommits) {
  std::optional<Consumer<VMsg>> b;
  std::optional<Decision> b_decision;
  Consumer<VMsg> a = make([&](const VMsg& m) {
    if (m.version == 1) b_decision = b->process(VMsg{"m2", 2});  // v2 reaches B while A runs v1
  });
  b.emplace(make(nullptr));

  const Decision d1 = a.process(VMsg{"m1", 1});
  EXPECT_EQ(d1.reason, Reason::kProcessed);
  ASSERT_TRUE(b_decision.has_value());
  EXPECT_EQ(b_decision->reason, Reason::kBuffered);

  // No time has passed and nobody called tick(): v1's commit must have drained v2.
  EXPECT_EQ(seen_, (std::vector<std::uint64_t>{1, 2}))
      << "v2, buffered by the other consumer, was not drained when v1 committed";
  auto e = store_->entities()->read_entity("order-1");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->version, 2u);

  // What does bring it through: a tick() on either consumer.
  a.tick();
  EXPECT_EQ(seen_, (std::vector<std::uint64_t>{1, 2}));
}

INSTANTIATE_TEST_SUITE_P(Stores, TwoConsumers, ::testing::ValuesIn(ordering_test::kStores),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace idem

// Contradictory options fail at create() with kInvalidArgument naming the option.
#include "idem/backend/store_wrapper.hpp"
#include "unit/consumer_test_support.hpp"

namespace idem::test {
namespace {

using std::chrono::milliseconds;

// A test-only store that reports itself probabilistic (or transactional) and delegates
// everything else to a memory store.
class FlaggedStore final : public StoreWrapper {
 public:
  FlaggedStore(std::shared_ptr<Store> inner, StoreCapabilities caps) : StoreWrapper(std::move(inner)), caps_(caps) {}
  StoreCapabilities capabilities() const override { return caps_; }

 private:
  StoreCapabilities caps_;
};

class OptionsTest : public ConsumerTest {
 protected:
  // Returns the create() status for `o` with all extractors (or `x`).
  Status create_status(ConsumerOptions o, Extractors<Msg> x = all_extractors()) {
    auto c = Consumer<Msg>::create(std::move(o), std::move(x),
                                   [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
    return c.status();
  }

  void expect_invalid(const Status& s, std::string_view names) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find(names), std::string::npos) << "message should name " << names << ": " << s.message();
  }

  std::shared_ptr<Store> probabilistic_store() {
    StoreCapabilities caps;
    caps.probabilistic = true;
    return std::make_shared<FlaggedStore>(store_, caps);
  }
};

TEST_F(OptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(create_status(options()).ok());
  EXPECT_TRUE(create_status(options(Guarantee::kAtLeastOnce)).ok());
  EXPECT_TRUE(create_status(options(Guarantee::kAtMostOnce)).ok());
  EXPECT_TRUE(create_status(options(Guarantee::kManual)).ok());
}

TEST_F(OptionsTest, StoreIsRequiredUnderDedupGuarantees) {
  for (Guarantee g : {Guarantee::kEffectivelyOnce, Guarantee::kAtMostOnce, Guarantee::kManual}) {
    ConsumerOptions o = options(g);
    o.store = nullptr;
    expect_invalid(create_status(o), "ConsumerOptions::store");
  }
}

TEST_F(OptionsTest, StoreMustBeNullUnderAtLeastOnce) {
  ConsumerOptions o = options(Guarantee::kAtLeastOnce);
  o.store = store_;
  expect_invalid(create_status(o), "ConsumerOptions::store");
}

TEST_F(OptionsTest, IdExtractorIsRequiredUnderDedupGuarantees) {
  Extractors<Msg> x = all_extractors();
  x.id = nullptr;
  expect_invalid(create_status(options(), x), "Extractors::id");
  expect_invalid(create_status(options(Guarantee::kManual), x), "Extractors::id");
  EXPECT_TRUE(create_status(options(Guarantee::kAtLeastOnce), x).ok());
}

TEST_F(OptionsTest, TransactionalNeedsADedupGuaranteeAndATransactionalStore) {
  ConsumerOptions alo = options(Guarantee::kAtLeastOnce);
  alo.transactional = true;
  expect_invalid(create_status(alo), "ConsumerOptions::transactional");

  ConsumerOptions amo = options(Guarantee::kAtMostOnce);
  amo.transactional = true;
  expect_invalid(create_status(amo), "ConsumerOptions::transactional");

  ConsumerOptions eo = options();
  eo.transactional = true;  // the memory store is not transactional
  expect_invalid(create_status(eo), "ConsumerOptions::transactional");
}

TEST_F(OptionsTest, ProbabilisticStoreNeedsExplicitOptIn) {
  for (Guarantee g : {Guarantee::kEffectivelyOnce, Guarantee::kManual}) {
    ConsumerOptions o = options(g);
    o.store = probabilistic_store();
    expect_invalid(create_status(o), "allow_probabilistic_store");
    o.allow_probabilistic_store = true;
    EXPECT_TRUE(create_status(o).ok()) << guarantee_name(g);
  }
  // And the opted-in consumer works through the delegating store.
  ConsumerOptions o = options();
  o.store = probabilistic_store();
  o.allow_probabilistic_store = true;
  auto c = make(o, [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kProcessed);
  EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kDuplicate);
}

TEST_F(OptionsTest, NumericLimits) {
  ConsumerOptions lease = options();
  lease.lease = milliseconds(0);
  expect_invalid(create_status(lease), "ConsumerOptions::lease");

  ConsumerOptions ttl = options();
  ttl.ttl = milliseconds(0);
  expect_invalid(create_status(ttl), "ConsumerOptions::ttl");

  ConsumerOptions mult = options();
  mult.backoff.multiplier = 0.5;
  expect_invalid(create_status(mult), "backoff.multiplier");

  ConsumerOptions nan = options();
  nan.backoff.multiplier = std::numeric_limits<double>::quiet_NaN();
  expect_invalid(create_status(nan), "backoff.multiplier");

  ConsumerOptions max = options();
  max.backoff.max = milliseconds(10);
  max.backoff.initial = milliseconds(20);
  expect_invalid(create_status(max), "backoff.max");

  ConsumerOptions ids = options();
  ids.max_id_bytes = 0;
  expect_invalid(create_status(ids), "max_id_bytes");

  ConsumerOptions purge = options();
  purge.purge_batch = 0;
  expect_invalid(create_status(purge), "purge_batch");
}

TEST_F(OptionsTest, EmptyHandlerIsRejected) {
  auto c = Consumer<Msg>::create(options(), all_extractors(), nullptr);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("handler"), std::string::npos);
}

TEST_F(OptionsTest, DefaultOwnerIsFilledIn) {
  ConsumerOptions o = options();
  o.owner.clear();
  auto c = make(o, [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  EXPECT_FALSE(c.options().owner.empty());
  ConsumerOptions o2 = options();
  o2.owner.clear();
  auto c2 = make(o2, [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  EXPECT_NE(c.options().owner, c2.options().owner) << "two consumers in one process need distinct owners";
}

}  // namespace
}  // namespace idem::test

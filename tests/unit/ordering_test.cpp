// Version ordering per entity (docs/design.md §5) over the memory store: monotonic, strict with
// the reorder buffer, limits, horizon, gap policies, drains, watermark, bad input.
#include <gtest/gtest.h>

#include <string>

#include "consumer_test_support.hpp"
#include "idem/memory_store.hpp"
#include "support/entity_messages.hpp"

namespace idem::test {
namespace {

class OrderingTest : public ::testing::Test {
 protected:
  ConsumerOptions options(Ordering mode) {
    ConsumerOptions o;
    o.store = memory::open().value();
    o.clock = clock_;
    o.ordering.mode = mode;
    o.backoff.initial = Duration(100);
    return o;
  }
  Consumer<EntityMsg> make(ConsumerOptions o) {
    auto c = entity_consumer(std::move(o), journal_);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return std::move(c).value();
  }
  void advance(std::int64_t ms) { clock_->advance(Duration(ms)); }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(from_unix_ms(1'000'000));
  Journal journal_;
};

Decision expect_decision(const Decision& d, Action a, Reason r) {
  EXPECT_EQ(d.action, a) << ::testing::PrintToString(d);
  EXPECT_EQ(d.reason, r) << ::testing::PrintToString(d);
  return d;
}

TEST_F(OrderingTest, MonotonicDropsStaleVersionsAndAllowsGaps) {
  auto c = make(options(Ordering::kMonotonic));
  expect_decision(c.process(versioned("m3", "k", 3)), Action::kAck, Reason::kProcessed);
  const Decision stale = expect_decision(c.process(versioned("m2", "k", 2)), Action::kAck, Reason::kStale);
  EXPECT_NE(stale.detail.find("applied version 3"), std::string::npos) << stale.detail;
  expect_decision(c.process(versioned("other3", "k", 3)), Action::kAck, Reason::kStale);
  expect_decision(c.process(versioned("m3", "k", 3)), Action::kAck, Reason::kDuplicate);
  expect_decision(c.process(versioned("m7", "k", 7)), Action::kAck, Reason::kProcessed);
  expect_decision(c.process(versioned("x1", "other", 1)), Action::kAck, Reason::kProcessed);
  EXPECT_EQ(journal_.versions(), (std::vector<std::uint64_t>{3, 7, 1}));
  // A stale message is not recorded as processed: it stays stale on redelivery.
  expect_decision(c.process(versioned("m2", "k", 2)), Action::kAck, Reason::kStale);
}

TEST_F(OrderingTest, StrictRunsInOrderAndHoldsEarlyVersionsOnANonDurableStore) {
  auto c = make(options(Ordering::kStrict));
  const Decision d3 = expect_decision(c.process(versioned("m3", "k", 3)), Action::kHold, Reason::kBuffered);
  EXPECT_NE(d3.detail.find("waiting for version 1"), std::string::npos) << d3.detail;
  expect_decision(c.process(versioned("m2", "k", 2)), Action::kHold, Reason::kBuffered);
  expect_decision(c.process(versioned("m2", "k", 2)), Action::kHold, Reason::kBuffered);  // redelivered
  EXPECT_TRUE(journal_.runs().empty());
  expect_decision(c.process(versioned("m1", "k", 1)), Action::kAck, Reason::kProcessed);
  EXPECT_EQ(journal_.versions(), (std::vector<std::uint64_t>{1, 2, 3}));
  const auto runs = journal_.runs();
  EXPECT_FALSE(runs[0].drained);
  EXPECT_TRUE(runs[1].drained);
  EXPECT_TRUE(runs[2].drained);
  const auto outs = journal_.outcomes();
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].id, "m2");
  EXPECT_EQ(outs[0].decision.reason, Reason::kProcessed);
  EXPECT_EQ(outs[1].id, "m3");
  EXPECT_EQ(outs[1].message, encode_entity_msg(versioned("m3", "k", 3)));
  expect_decision(c.process(versioned("m3", "k", 3)), Action::kAck, Reason::kDuplicate);
  expect_decision(c.process(versioned("late2", "k", 2)), Action::kAck, Reason::kStale);
  EXPECT_EQ(c.metrics().snapshot().drained, 2u);
}

TEST_F(OrderingTest, StrictFirstVersionCanBeWhateverArrivesFirst) {
  ConsumerOptions o = options(Ordering::kStrict);
  o.ordering.first_version = std::nullopt;
  auto c = make(o);
  expect_decision(c.process(versioned("m7", "k", 7)), Action::kAck, Reason::kProcessed);
  expect_decision(c.process(versioned("m9", "k", 9)), Action::kHold, Reason::kBuffered);
  expect_decision(c.process(versioned("m8", "k", 8)), Action::kAck, Reason::kProcessed);
  EXPECT_EQ(journal_.versions(), (std::vector<std::uint64_t>{7, 8, 9}));
}

TEST_F(OrderingTest, AVersionBeyondTheHorizonIsDeadLettered) {
  ConsumerOptions o = options(Ordering::kStrict);
  o.ordering.horizon = 10;
  auto c = make(o);
  const Decision d = expect_decision(c.process(versioned("far", "k", 12)), Action::kDeadLetter, Reason::kTooFarAhead);
  EXPECT_NE(d.detail.find("horizon"), std::string::npos) << d.detail;
  expect_decision(c.process(versioned("far", "k", 12)), Action::kAck, Reason::kDuplicate);
  expect_decision(c.process(versioned("near", "k", 11)), Action::kHold, Reason::kBuffered);  // 1 + 10
}

TEST_F(OrderingTest, AFullBufferLeavesTheMessageWithTheBroker) {
  ConsumerOptions o = options(Ordering::kStrict);
  o.ordering.limits.per_key = 2;
  o.ordering.buffer_full_delay = Duration(250);
  auto c = make(o);
  expect_decision(c.process(versioned("m3", "k", 3)), Action::kHold, Reason::kBuffered);
  expect_decision(c.process(versioned("m4", "k", 4)), Action::kHold, Reason::kBuffered);
  const Decision full = expect_decision(c.process(versioned("m5", "k", 5)), Action::kRetry, Reason::kBufferFull);
  EXPECT_EQ(full.delay, Duration(250));
  EXPECT_NE(full.detail.find("per_key"), std::string::npos) << full.detail;
  EXPECT_EQ(c.metrics().snapshot().decisions_for(Reason::kBufferFull), 1u);
  expect_decision(c.process(versioned("m1", "k", 1)), Action::kAck, Reason::kProcessed);
  expect_decision(c.process(versioned("m2", "k", 2)), Action::kAck, Reason::kProcessed);
  expect_decision(c.process(versioned("m5", "k", 5)), Action::kAck, Reason::kProcessed);  // redelivered
  EXPECT_EQ(journal_.versions(), (std::vector<std::uint64_t>{1, 2, 3, 4, 5}));
}

TEST_F(OrderingTest, GapPolicySkipAdvancesToTheLowestBufferedVersion) {
  ConsumerOptions o = options(Ordering::kStrict);
  o.ordering.gap_policy = GapPolicy::kSkip;
  o.ordering.gap_timeout = Duration(1000);
  auto c = make(o);
  expect_decision(c.process(versioned("m3", "k", 3)), Action::kHold, Reason::kBuffered);
  advance(999);
  c.tick();
  EXPECT_TRUE(journal_.runs().empty());
  advance(1);
  EXPECT_EQ(c.tick(), 1u);
  EXPECT_EQ(journal_.versions(), (std::vector<std::uint64_t>{3}));
  EXPECT_EQ(c.metrics().snapshot().skipped_versions, 2u);
  expect_decision(c.process(versioned("m1", "k", 1)), Action::kAck, Reason::kStale);
}

TEST_F(OrderingTest, GapTimeoutsAlsoFireFromTheConsumersOwnCalls) {
  ConsumerOptions o = options(Ordering::kStrict);
  o.ordering.gap_policy = GapPolicy::kSkip;
  o.ordering.gap_timeout = Duration(1000);
  auto c = make(o);
  expect_decision(c.process(versioned("m2", "k", 2)), Action::kHold, Reason::kBuffered);
  advance(1500);
  expect_decision(c.process(versioned("x1", "other", 1)), Action::kAck, Reason::kProcessed);
  EXPECT_EQ(journal_.versions(), (std::vector<std::uint64_t>{2, 1}));
}

TEST_F(OrderingTest, GapPolicyDeadLetterHandsTheBufferedMessagesOver) {
  ConsumerOptions o = options(Ordering::kStrict);
  o.ordering.gap_policy = GapPolicy::kDeadLetter;
  o.ordering.gap_timeout = Duration(1000);
  auto c = make(o);
  expect_decision(c.process(versioned("m2", "k", 2)), Action::kHold, Reason::kBuffered);
  expect_decision(c.process(versioned("m3", "k", 3)), Action::kHold, Reason::kBuffered);
  advance(1000);
  c.tick();
  const auto outs = journal_.outcomes();
  ASSERT_EQ(outs.size(), 2u);
  for (const auto& out : outs) {
    EXPECT_EQ(out.decision.action, Action::kDeadLetter);
    EXPECT_EQ(out.decision.reason, Reason::kGapTimeout);
  }
  EXPECT_EQ(outs[0].message, encode_entity_msg(versioned("m2", "k", 2)));
  expect_decision(c.process(versioned("m2", "k", 2)), Action::kAck, Reason::kDuplicate);
  expect_decision(c.process(versioned("m1", "k", 1)), Action::kAck, Reason::kProcessed);
  EXPECT_EQ(journal_.versions(), (std::vector<std::uint64_t>{1}));
}

TEST_F(OrderingTest, GapPolicyHoldKeepsWaitingAndReportsTheGapAge) {
  ConsumerOptions o = options(Ordering::kStrict);
  o.ordering.gap_timeout = Duration(1000);
  auto c = make(o);
  expect_decision(c.process(versioned("m4", "k", 4)), Action::kHold, Reason::kBuffered);
  advance(5000);
  c.tick();
  EXPECT_TRUE(journal_.runs().empty());
  const MetricsSnapshot s = c.metrics().snapshot();
  EXPECT_EQ(s.buffered, 1u);
  EXPECT_GT(s.buffer_bytes, 0u);
  ASSERT_EQ(s.gaps.size(), 1u);
  EXPECT_EQ(s.gaps[0].key, "k");
  EXPECT_EQ(s.gaps[0].age, Duration(5000));
  EXPECT_EQ(s.gaps[0].lowest_version, 4u);
  EXPECT_NE(c.metrics().prometheus().find("idem_gap_age_seconds{key=\"k\"} 5"), std::string::npos);
}

TEST_F(OrderingTest, AFailingDrainIsRetriedLaterAndCapped) {
  ConsumerOptions o = options(Ordering::kStrict);
  o.max_retries = 1;
  auto c = make(o);
  expect_decision(c.process(versioned("m2", "k", 2)), Action::kHold, Reason::kBuffered);
  expect_decision(c.process(versioned("m3", "k", 3)), Action::kHold, Reason::kBuffered);
  journal_.fail("m2", true);
  expect_decision(c.process(versioned("m1", "k", 1)), Action::kAck, Reason::kProcessed);
  auto outs = journal_.outcomes();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].decision.action, Action::kRetry);
  EXPECT_EQ(outs[0].decision.reason, Reason::kHandlerFailed);
  c.tick();  // within the backoff: nothing runs
  EXPECT_EQ(journal_.outcomes().size(), 1u);
  advance(100);
  c.tick();  // the second failure reaches max_retries = 1: dead-lettered, version used up
  outs = journal_.outcomes();
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[1].decision.action, Action::kDeadLetter);
  EXPECT_EQ(outs[1].decision.reason, Reason::kRetriesExhausted);
  EXPECT_EQ(outs[2].id, "m3");
  EXPECT_EQ(outs[2].decision.reason, Reason::kProcessed);
  EXPECT_EQ(journal_.versions(), (std::vector<std::uint64_t>{1, 3}));
}

TEST_F(OrderingTest, ALaterVersionWithAnotherIdForABufferedVersionIsABadMessage) {
  auto c = make(options(Ordering::kStrict));
  expect_decision(c.process(versioned("a3", "k", 3)), Action::kHold, Reason::kBuffered);
  const Decision d = expect_decision(c.process(versioned("b3", "k", 3)), Action::kDeadLetter, Reason::kBadMessage);
  EXPECT_NE(d.detail.find("already buffered"), std::string::npos) << d.detail;
}

TEST_F(OrderingTest, AnEntityChangedDuringTheHandlerMakesTheCommitLose) {
  ConsumerOptions o = options(Ordering::kMonotonic);
  auto store = o.store;
  std::optional<Consumer<EntityMsg>> other;
  Journal other_journal;
  {
    ConsumerOptions o2 = o;
    o2.owner = "other";
    other.emplace(entity_consumer(o2, other_journal).value());
  }
  bool interleave = true;
  auto c = Consumer<EntityMsg>::create(o, entity_extractors(), [&](const EntityMsg& m, HandlerContext& ctx) {
    if (interleave) {
      interleave = false;
      EXPECT_EQ(other->process(versioned("b5", "k", 5)).reason, Reason::kProcessed);
    }
    return journal_.handle(m, ctx);
  });
  ASSERT_TRUE(c.ok());
  expect_decision(c->process(versioned("a4", "k", 4)), Action::kRetry, Reason::kConcurrentUpdate);
  // Redelivered: version 4 is now stale.
  expect_decision(c->process(versioned("a4", "k", 4)), Action::kAck, Reason::kStale);
}

TEST_F(OrderingTest, BadInputGetsAReason) {
  ConsumerOptions o = options(Ordering::kStrict);
  o.ordering.max_key_bytes = 8;
  auto c = make(o);
  EntityMsg no_key;
  no_key.id = "a";
  no_key.version = 1;
  EXPECT_NE(expect_decision(c.process(no_key), Action::kDeadLetter, Reason::kBadMessage).detail.find("no key"),
            std::string::npos);
  EntityMsg no_version;
  no_version.id = "b";
  no_version.key = "k";
  EXPECT_NE(expect_decision(c.process(no_version), Action::kDeadLetter, Reason::kBadMessage).detail.find("no version"),
            std::string::npos);
  EXPECT_NE(expect_decision(c.process(versioned("c", "k", 0)), Action::kDeadLetter, Reason::kBadMessage)
                .detail.find("version 0"),
            std::string::npos);
  EXPECT_NE(expect_decision(c.process(versioned("d", "123456789", 1)), Action::kDeadLetter, Reason::kBadMessage)
                .detail.find("max_key_bytes"),
            std::string::npos);
  EntityMsg long_event = versioned("e", "k", 1);
  long_event.event = std::string(o.max_event_bytes + 1, 'e');
  EXPECT_NE(
      expect_decision(c.process(long_event), Action::kDeadLetter, Reason::kBadMessage).detail.find("max_event_bytes"),
      std::string::npos);
  EXPECT_TRUE(journal_.runs().empty());
}

TEST_F(OrderingTest, ContradictoryOptionsAreRejectedByName) {
  auto error = [&](ConsumerOptions o, Extractors<EntityMsg> x) {
    auto c = Consumer<EntityMsg>::create(std::move(o), std::move(x),
                                         [](const EntityMsg&, HandlerContext&) { return HandlerResult::ok(); });
    EXPECT_FALSE(c.ok());
    return c.ok() ? std::string() : c.status().message();
  };
  ConsumerOptions strict = options(Ordering::kStrict);
  strict.on_buffered = [](const BufferedOutcome&) {};
  Extractors<EntityMsg> no_codec = entity_extractors();
  no_codec.decode = nullptr;
  EXPECT_NE(error(strict, no_codec).find("Extractors::encode"), std::string::npos);
  ConsumerOptions no_listener = options(Ordering::kStrict);
  EXPECT_NE(error(no_listener, entity_extractors()).find("on_buffered"), std::string::npos);
  ConsumerOptions alo = options(Ordering::kMonotonic);
  alo.guarantee = Guarantee::kAtLeastOnce;
  alo.store = nullptr;
  EXPECT_NE(error(alo, entity_extractors()).find("effectively_once"), std::string::npos);
  Extractors<EntityMsg> no_version = entity_extractors();
  no_version.version = nullptr;
  EXPECT_NE(error(options(Ordering::kMonotonic), no_version).find("Extractors::version"), std::string::npos);
  Extractors<EntityMsg> no_stream = entity_extractors();
  no_stream.stream = nullptr;
  EXPECT_NE(error(options(Ordering::kWatermark), no_stream).find("Extractors::stream"), std::string::npos);
  ConsumerOptions open = options(Ordering::kMonotonic);
  open.on_store_failure = StoreFailurePolicy::kFailOpen;
  EXPECT_NE(error(open, entity_extractors()).find("fail_open"), std::string::npos);
}

// --- watermark -----------------------------------------------------------------------

EntityMsg positioned(std::string id, std::string stream, std::uint64_t position) {
  EntityMsg m;
  m.id = std::move(id);
  m.stream = std::move(stream);
  m.position = position;
  return m;
}

TEST_F(OrderingTest, WatermarkDropsPositionsAtOrBelowTheLargestAcked) {
  ConsumerOptions o;
  o.guarantee = Guarantee::kAtLeastOnce;  // the filter needs no store
  o.clock = clock_;
  o.ordering.mode = Ordering::kWatermark;
  auto c = make(o);
  expect_decision(c.process(positioned("a", "p0", 1)), Action::kAck, Reason::kProcessed);
  expect_decision(c.process(positioned("b", "p0", 2)), Action::kAck, Reason::kProcessed);
  const Decision d = expect_decision(c.process(positioned("a-again", "p0", 1)), Action::kAck, Reason::kDuplicate);
  EXPECT_NE(d.detail.find("watermark 2"), std::string::npos) << d.detail;
  expect_decision(c.process(positioned("other", "p1", 1)), Action::kAck, Reason::kProcessed);  // its own stream
  // A failed position does not move the watermark: its redelivery passes.
  journal_.fail("c", true);
  expect_decision(c.process(positioned("c", "p0", 3)), Action::kRetry, Reason::kHandlerFailed);
  journal_.fail("c", false);
  expect_decision(c.process(positioned("c", "p0", 3)), Action::kAck, Reason::kProcessed);
  // A requested redelivery from position 2 on.
  c.reset_watermark("p0", 1);
  expect_decision(c.process(positioned("b", "p0", 2)), Action::kAck, Reason::kProcessed);
  expect_decision(c.process(positioned("b", "p0", 2)), Action::kAck, Reason::kDuplicate);
  EntityMsg no_position;
  no_position.id = "x";
  no_position.stream = "p0";
  expect_decision(c.process(no_position), Action::kDeadLetter, Reason::kBadMessage);
}

TEST_F(OrderingTest, WatermarkStreamNamesHaveALimit) {
  ConsumerOptions o;
  o.guarantee = Guarantee::kAtLeastOnce;
  o.clock = clock_;
  o.ordering.mode = Ordering::kWatermark;
  ASSERT_EQ(o.ordering.max_stream_bytes, 512u);
  auto c = make(o);
  expect_decision(c.process(positioned("a", std::string(512, 's'), 1)), Action::kAck, Reason::kProcessed);
  const Decision d =
      expect_decision(c.process(positioned("b", std::string(513, 's'), 1)), Action::kDeadLetter, Reason::kBadMessage);
  EXPECT_NE(d.detail.find("max_stream_bytes"), std::string::npos) << d.detail;
  EXPECT_EQ(journal_.runs().size(), 1u);
}

}  // namespace
}  // namespace idem::test

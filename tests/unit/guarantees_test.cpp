// The exact semantics of each processing guarantee (docs/design.md §2 table).
#include <atomic>
#include <stdexcept>

#include "unit/consumer_test_support.hpp"

namespace idem::test {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

// --- at_most_once -------------------------------------------------------------------

TEST(DecisionDefault, HoldsRatherThanAcks) {
  const Decision d;
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_EQ(d.reason, Reason::kUnacknowledged);
}

TEST_F(ConsumerTest, AtMostOnceMarksDoneBeforeTheHandlerRuns) {
  std::optional<RecordState> seen;
  auto c = make(options(Guarantee::kAtMostOnce), [&](const Msg& m, HandlerContext&) {
    auto info = store_->inspect(*m.id, clock_->now());
    if (info.ok() && info->has_value()) seen = (*info)->state;
    return HandlerResult::ok();
  });
  EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kProcessed);
  ASSERT_TRUE(seen.has_value()) << "no record existed while the handler ran";
  EXPECT_EQ(*seen, RecordState::kCompleted);
}

TEST_F(ConsumerTest, AtMostOnceFailureIsAckedAndNeverRerun) {
  int calls = 0;
  auto c = make(options(Guarantee::kAtMostOnce), [&](const Msg& m, HandlerContext&) -> HandlerResult {
    ++calls;
    if (*m.id == "throws") throw std::runtime_error("boom");
    return HandlerResult::fail("nope");
  });
  Decision d = c.process(msg("m1"));
  EXPECT_DECISION(d, Action::kAck, Reason::kHandlerFailed);
  EXPECT_NE(d.detail.find("nope"), std::string::npos) << d.detail;
  EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kDuplicate);
  EXPECT_DECISION(c.process(msg("throws")), Action::kAck, Reason::kHandlerFailed);
  EXPECT_DECISION(c.process(msg("throws")), Action::kAck, Reason::kDuplicate);
  EXPECT_EQ(calls, 2);
}

// --- at_least_once ------------------------------------------------------------------

TEST_F(ConsumerTest, AtLeastOnceKeepsNoRecordAndRunsEveryCopy) {
  int calls = 0;
  auto c = make(options(Guarantee::kAtLeastOnce), [&](const Msg&, HandlerContext&) {
    ++calls;
    return HandlerResult::ok();
  });
  EXPECT_EQ(c.options().store, nullptr);
  EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kProcessed);
  EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kProcessed);
  EXPECT_EQ(calls, 2);
  // No id needed either.
  Extractors<Msg> no_id = all_extractors();
  no_id.id = nullptr;
  auto anon = make(
      options(Guarantee::kAtLeastOnce),
      [&](const Msg&, HandlerContext& ctx) {
        EXPECT_TRUE(ctx.id().empty());
        ++calls;
        return HandlerResult::ok();
      },
      no_id);
  EXPECT_DECISION(anon.process(Msg{}), Action::kAck, Reason::kProcessed);
  EXPECT_EQ(calls, 3);
}

TEST_F(ConsumerTest, AtLeastOnceFailureRetriesWithBackoffCappedByDeliveryCount) {
  ConsumerOptions o = options(Guarantee::kAtLeastOnce);
  o.max_retries = 3;
  int calls = 0;
  auto c = make(o, [&](const Msg&, HandlerContext& ctx) {
    ++calls;
    EXPECT_EQ(ctx.attempt(), static_cast<std::uint32_t>(calls));
    return HandlerResult::fail("down");
  });
  const Duration expected[] = {seconds(1), seconds(2), seconds(4)};
  for (std::uint32_t n = 1; n <= 3; ++n) {
    Msg m = msg("m1");
    m.delivery_count = n;
    Decision d = c.process(m);
    EXPECT_DECISION(d, Action::kRetry, Reason::kHandlerFailed);
    EXPECT_EQ(d.delay, expected[n - 1]) << "delivery " << n;
  }
  Msg last = msg("m1");
  last.delivery_count = 4;
  EXPECT_DECISION(c.process(last), Action::kDeadLetter, Reason::kRetriesExhausted);
  EXPECT_EQ(calls, 4);
}

TEST_F(ConsumerTest, AtLeastOnceWithoutDeliveryCountRetriesWithoutCap) {
  ConsumerOptions o = options(Guarantee::kAtLeastOnce);
  o.max_retries = 1;
  Extractors<Msg> x = all_extractors();
  x.delivery_count = nullptr;
  auto c = make(
      o, [&](const Msg&, HandlerContext&) { return HandlerResult::fail("down"); }, x);
  for (int i = 0; i < 4; ++i) {
    Decision d = c.process(msg("m1"));
    EXPECT_DECISION(d, Action::kRetry, Reason::kHandlerFailed);
    EXPECT_EQ(d.delay, seconds(1));
  }
}

// --- effectively_once ---------------------------------------------------------------

TEST_F(ConsumerTest, EffectivelyOnceCommitsAndAnswersDuplicatesWithTheStoredResult) {
  int calls = 0;
  auto c = make(options(), [&](const Msg& m, HandlerContext& ctx) {
    ++calls;
    EXPECT_EQ(ctx.id(), *m.id);
    EXPECT_EQ(ctx.attempt(), 1u);
    EXPECT_EQ(ctx.guarantee(), Guarantee::kEffectivelyOnce);
    auto info = store_->inspect(*m.id, clock_->now());
    EXPECT_TRUE(info.ok() && info->has_value() && (*info)->state == RecordState::kInProgress)
        << "the id is claimed while the handler runs";
    return HandlerResult::ok("result of " + *m.id);
  });
  const TimePoint t0 = clock_->now();
  Decision first = c.process(msg("m1"));
  EXPECT_DECISION(first, Action::kAck, Reason::kProcessed);
  EXPECT_EQ(first.result, std::optional<std::string>("result of m1"));
  clock_->advance(hours(1));
  Decision dup = c.process(msg("m1"));
  EXPECT_DECISION(dup, Action::kAck, Reason::kDuplicate);
  EXPECT_EQ(dup.result, std::optional<std::string>("result of m1"));
  EXPECT_EQ(calls, 1);
  auto info = store_->inspect("m1", clock_->now());
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->state, RecordState::kCompleted);
  EXPECT_EQ((*info)->expires_at, t0 + ConsumerOptions{}.ttl) << "remembered for the default ttl of 7 days";
}

TEST_F(ConsumerTest, CopyArrivingDuringTheLeaseIsRetriedAfterTheLeaseLeft) {
  ConsumerOptions o = options();
  o.lease = seconds(30);
  Consumer<Msg>* self = nullptr;
  int calls = 0;
  std::optional<Decision> inner;
  auto c = make(o, [&](const Msg& m, HandlerContext&) {
    ++calls;
    if (!inner) {
      clock_->advance(seconds(4));
      inner = self->process(m);  // the broker redelivers while we work
    }
    return HandlerResult::ok();
  });
  self = &c;
  EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kProcessed);
  ASSERT_TRUE(inner.has_value());
  EXPECT_DECISION(*inner, Action::kRetry, Reason::kInProgress);
  EXPECT_EQ(inner->delay, seconds(26)) << "delay = the lease left";
  EXPECT_NE(inner->detail.find("test-owner"), std::string::npos) << inner->detail;
  EXPECT_EQ(calls, 1) << "the second copy must not run while the first holds the lease";
  EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kDuplicate);
}

TEST_F(ConsumerTest, LeaseStartsWhenTheHandlerStartsNotAtReceipt) {
  ConsumerOptions o = options();
  o.lease = seconds(30);
  Consumer<Msg>* self = nullptr;
  std::optional<Decision> inner;
  TimePoint lease_end{};
  auto c = make(o, [&](const Msg& m, HandlerContext& ctx) {
    lease_end = ctx.lease_expires_at();
    if (!inner) inner = self->process(m);
    return HandlerResult::ok();
  });
  self = &c;
  Msg m = msg("m1");
  m.received_at = clock_->now() - hours(2);  // sat in the client's queue for 2 hours
  const TimePoint start = clock_->now();
  EXPECT_DECISION(c.process(m), Action::kAck, Reason::kProcessed);
  EXPECT_EQ(lease_end, start + seconds(30));
  ASSERT_TRUE(inner.has_value());
  EXPECT_DECISION(*inner, Action::kRetry, Reason::kInProgress);
  EXPECT_EQ(inner->delay, seconds(30));
}

TEST_F(ConsumerTest, HandlerExtendsItsLease) {
  ConsumerOptions o = options();
  o.lease = seconds(30);
  Consumer<Msg>* self = nullptr;
  std::optional<Decision> inner;
  Status extended;
  TimePoint lease_end{};
  auto c = make(o, [&](const Msg& m, HandlerContext& ctx) {
    clock_->advance(seconds(20));
    extended = ctx.extend_lease(seconds(60));
    lease_end = ctx.lease_expires_at();
    clock_->advance(seconds(20));  // 40 s after the start: past the original lease
    if (!inner) inner = self->process(m);
    return HandlerResult::ok();
  });
  self = &c;
  const TimePoint start = clock_->now();
  EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kProcessed);
  EXPECT_TRUE(extended.ok()) << extended.to_string();
  EXPECT_EQ(lease_end, start + seconds(80));
  ASSERT_TRUE(inner.has_value());
  EXPECT_DECISION(*inner, Action::kRetry, Reason::kInProgress);
  EXPECT_EQ(inner->delay, seconds(40));
}

TEST_F(ConsumerTest, ExtendLeaseAfterTheLeaseWasLostFails) {
  ConsumerOptions o = options();
  o.lease = seconds(30);
  Status extended;
  auto c = make(o, [&](const Msg& m, HandlerContext& ctx) {
    clock_->advance(seconds(31));
    // Another consumer takes the expired lease.
    auto other = store_->claim({*m.id, "other-owner", seconds(30), std::nullopt, clock_->now()});
    EXPECT_TRUE(other.ok() && other->status == ClaimStatus::kNew);
    extended = ctx.extend_lease(seconds(60));
    return HandlerResult::ok();
  });
  Decision d = c.process(msg("m1"));
  EXPECT_EQ(extended.code(), StatusCode::kFailedPrecondition) << extended.to_string();
  EXPECT_EQ(d.reason, Reason::kLeaseLost) << ::testing::PrintToString(d);
}

TEST_F(ConsumerTest, ExtendLeaseIsANoOpWithoutALease) {
  for (Guarantee g : {Guarantee::kAtMostOnce, Guarantee::kAtLeastOnce}) {
    Status extended = internal_error("not called");
    auto c = make(options(g), [&](const Msg&, HandlerContext& ctx) {
      extended = ctx.extend_lease(seconds(60));
      return HandlerResult::ok();
    });
    EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kProcessed);
    EXPECT_TRUE(extended.ok()) << guarantee_name(g) << ": " << extended.to_string();
  }
  HandlerContext bare;
  EXPECT_TRUE(bare.extend_lease(seconds(1)).ok());
}

TEST_F(ConsumerTest, FailureReleasesTheClaimSoARedeliveryRunsAgain) {
  std::vector<std::uint32_t> attempts;
  auto c = make(options(), [&](const Msg&, HandlerContext& ctx) {
    attempts.push_back(ctx.attempt());
    return attempts.size() < 3 ? HandlerResult::fail("flaky") : HandlerResult::ok();
  });
  EXPECT_DECISION(c.process(msg("m1")), Action::kRetry, Reason::kHandlerFailed);
  EXPECT_DECISION(c.process(msg("m1")), Action::kRetry, Reason::kHandlerFailed);
  EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kProcessed);
  EXPECT_EQ(attempts, (std::vector<std::uint32_t>{1, 2, 3}));
  auto info = store_->inspect("m1", clock_->now());
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->retries, 0u) << "a commit clears the retry count";
}

// --- manual -------------------------------------------------------------------------

TEST_F(ConsumerTest, ManualAckCommits) {
  int calls = 0;
  auto c = make(options(Guarantee::kManual), [&](const Msg&, HandlerContext& ctx) {
    ++calls;
    EXPECT_EQ(ctx.guarantee(), Guarantee::kManual);
    ctx.ack();
    return HandlerResult::ok("done");
  });
  Decision d = c.process(msg("m1"));
  EXPECT_DECISION(d, Action::kAck, Reason::kProcessed);
  EXPECT_EQ(d.result, std::optional<std::string>("done"));
  Decision dup = c.process(msg("m1"));
  EXPECT_DECISION(dup, Action::kAck, Reason::kDuplicate);
  EXPECT_EQ(dup.result, std::optional<std::string>("done"));
  EXPECT_EQ(calls, 1);
}

TEST_F(ConsumerTest, ManualNackRetriesAndCountsAgainstTheCap) {
  ConsumerOptions o = options(Guarantee::kManual);
  o.max_retries = 2;
  int calls = 0;
  auto c = make(o, [&](const Msg&, HandlerContext& ctx) {
    ++calls;
    ctx.nack(seconds(9));
    return HandlerResult::ok();
  });
  for (int i = 0; i < 2; ++i) {
    Decision d = c.process(msg("m1"));
    EXPECT_DECISION(d, Action::kRetry, Reason::kNacked);
    EXPECT_EQ(d.delay, seconds(9));
  }
  EXPECT_DECISION(c.process(msg("m1")), Action::kDeadLetter, Reason::kRetriesExhausted);
  EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kDuplicate);
  EXPECT_EQ(calls, 3);
}

TEST_F(ConsumerTest, ManualNeitherAckNorNackHolds) {
  std::vector<std::uint32_t> attempts;
  auto c = make(options(Guarantee::kManual), [&](const Msg&, HandlerContext& ctx) {
    attempts.push_back(ctx.attempt());
    return HandlerResult::ok();
  });
  Decision d = c.process(msg("m1"));
  EXPECT_DECISION(d, Action::kHold, Reason::kUnacknowledged);
  EXPECT_FALSE(d.detail.empty());
  // The claim was released without counting: the next copy runs at once, attempt 1.
  EXPECT_DECISION(c.process(msg("m1")), Action::kHold, Reason::kUnacknowledged);
  EXPECT_EQ(attempts, (std::vector<std::uint32_t>{1, 1}));
}

TEST_F(ConsumerTest, ManualLastCallWins) {
  auto c = make(options(Guarantee::kManual), [&](const Msg& m, HandlerContext& ctx) {
    if (*m.id == "nack-then-ack") {
      ctx.nack(seconds(5));
      ctx.ack();
    } else {
      ctx.ack();
      ctx.nack(seconds(5));
    }
    return HandlerResult::ok();
  });
  EXPECT_DECISION(c.process(msg("nack-then-ack")), Action::kAck, Reason::kProcessed);
  Decision d = c.process(msg("ack-then-nack"));
  EXPECT_DECISION(d, Action::kRetry, Reason::kNacked);
  EXPECT_EQ(d.delay, seconds(5));
}

TEST_F(ConsumerTest, ManualCallsUnderOtherGuaranteesAreIgnoredAndWarnedOnce) {
  for (Guarantee g : {Guarantee::kEffectivelyOnce, Guarantee::kAtMostOnce, Guarantee::kAtLeastOnce}) {
    LogCapture log;
    ConsumerOptions o = options(g);
    o.logger = log.logger();
    if (o.store) o.store = memory::open().value();  // a fresh store per guarantee
    auto c = make(o, [&](const Msg& m, HandlerContext& ctx) {
      ctx.ack();
      ctx.nack(seconds(1));
      ctx.ack();
      return *m.id == "fails" ? HandlerResult::fail("x") : HandlerResult::ok();
    });
    EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kProcessed) << guarantee_name(g);
    EXPECT_DECISION(c.process(msg("m2")), Action::kAck, Reason::kProcessed) << guarantee_name(g);
    // ack() does not turn a failure into a success.
    EXPECT_NE(c.process(msg("fails")).reason, Reason::kProcessed) << guarantee_name(g);
    EXPECT_EQ(log.count_lines("ignored"), 1) << guarantee_name(g) << "\n" << log.text();
  }
}

// --- HandlerResult::reject ------------------------------------------------------------

// A rejected message is dead-lettered at once under every guarantee, without retries;
// where a record is kept, a redelivery is a duplicate and the handler does not run.
TEST_F(ConsumerTest, ARejectedMessageIsDeadLetteredAtOnceUnderEveryGuarantee) {
  for (Guarantee g : {Guarantee::kAtMostOnce, Guarantee::kAtLeastOnce, Guarantee::kEffectivelyOnce}) {
    store_ = memory::open().value();
    int calls = 0;
    auto c = make(options(g), [&](const Msg&, HandlerContext&) {
      ++calls;
      return HandlerResult::reject("amount is negative");
    });
    const Decision d = c.process(msg("r1"));
    EXPECT_DECISION(d, Action::kDeadLetter, Reason::kHandlerRejected) << guarantee_name(g);
    EXPECT_EQ(d.detail, "amount is negative");
    const Decision again = c.process(msg("r1"));
    if (g == Guarantee::kAtLeastOnce) {
      EXPECT_DECISION(again, Action::kDeadLetter, Reason::kHandlerRejected) << "no record: it runs again";
      EXPECT_EQ(calls, 2);
    } else {
      EXPECT_EQ(again.action, Action::kAck) << guarantee_name(g) << ": " << ::testing::PrintToString(again);
      EXPECT_EQ(calls, 1) << guarantee_name(g);
    }
  }
}

TEST_F(ConsumerTest, ARejectionInABatchDeadLettersThatMessageAlone) {
  auto c = make(options(), [](const Msg& m, HandlerContext&) {
    return *m.id == "bad" ? HandlerResult::reject("refused") : HandlerResult::ok();
  });
  const std::vector<Msg> batch{msg("a"), msg("bad"), msg("b")};
  const std::vector<Decision> ds = c.process_batch(batch);
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_DECISION(ds[0], Action::kAck, Reason::kProcessed);
  EXPECT_DECISION(ds[1], Action::kDeadLetter, Reason::kHandlerRejected);
  EXPECT_DECISION(ds[2], Action::kAck, Reason::kProcessed);
  EXPECT_DECISION(c.process(msg("bad")), Action::kAck, Reason::kDuplicate);
}

}  // namespace
}  // namespace idem::test

// Handler failures, retries, backoff, dead-lettering, payload conflicts and bad input.
#include <stdexcept>

#include "unit/consumer_test_support.hpp"

namespace idem::test {
namespace {

using namespace std::string_literals;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

// --- retries ------------------------------------------------------------------------

TEST_F(ConsumerTest, FailuresBackOffExponentiallyThenDeadLetterAfterExactlyMaxRetries) {
  int calls = 0;
  auto c = make(options(), [&](const Msg&, HandlerContext& ctx) {
    ++calls;
    EXPECT_EQ(ctx.attempt(), static_cast<std::uint32_t>(calls));
    return HandlerResult::fail("downstream is down");
  });
  ASSERT_EQ(c.options().max_retries, 5u) << "the default cap";
  const std::vector<Duration> expected = {seconds(1), seconds(2), seconds(4), seconds(8), seconds(16)};
  for (std::size_t k = 0; k < expected.size(); ++k) {
    Decision d = c.process(msg("m1"));
    EXPECT_DECISION(d, Action::kRetry, Reason::kHandlerFailed);
    EXPECT_EQ(d.delay, expected[k]) << "retry " << k + 1;
    EXPECT_NE(d.detail.find("downstream is down"), std::string::npos) << d.detail;
    clock_->advance(d.delay);
  }
  Decision dl = c.process(msg("m1"));
  EXPECT_DECISION(dl, Action::kDeadLetter, Reason::kRetriesExhausted);
  EXPECT_NE(dl.detail.find("downstream is down"), std::string::npos) << dl.detail;
  EXPECT_EQ(calls, 6) << "1 attempt + 5 retries";

  Decision again = c.process(msg("m1"));
  EXPECT_DECISION(again, Action::kAck, Reason::kDuplicate);
  EXPECT_EQ(calls, 6);
  auto info = store_->inspect("m1", clock_->now());
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->state, RecordState::kDeadLettered);
}

TEST_F(ConsumerTest, BackoffIsCappedAtMax) {
  ConsumerOptions o = options();
  o.max_retries = 10;
  o.backoff.initial = milliseconds(500);
  o.backoff.multiplier = 3.0;
  o.backoff.max = seconds(5);
  auto c = make(o, [&](const Msg&, HandlerContext&) { return HandlerResult::fail("x"); });
  const std::vector<Duration> expected = {milliseconds(500), milliseconds(1500), milliseconds(4500), seconds(5),
                                          seconds(5)};
  for (Duration want : expected) EXPECT_EQ(c.process(msg("m1")).delay, want);
}

TEST_F(ConsumerTest, MaxRetriesZeroDeadLettersTheFirstFailure) {
  ConsumerOptions o = options();
  o.max_retries = 0;
  auto c = make(o, [&](const Msg&, HandlerContext&) { return HandlerResult::fail("x"); });
  EXPECT_DECISION(c.process(msg("m1")), Action::kDeadLetter, Reason::kRetriesExhausted);
}

TEST_F(ConsumerTest, RetryAfterUsesItsDelayAndCountsAgainstTheSameCap) {
  ConsumerOptions o = options();
  o.max_retries = 3;
  int calls = 0;
  auto c = make(o, [&](const Msg&, HandlerContext&) {
    ++calls;
    if (calls == 2) return HandlerResult::fail("and a failure");
    return HandlerResult::retry_after(seconds(7), "not yet");
  });
  Decision d1 = c.process(msg("m1"));
  EXPECT_DECISION(d1, Action::kRetry, Reason::kRetryRequested);
  EXPECT_EQ(d1.delay, seconds(7));
  EXPECT_NE(d1.detail.find("not yet"), std::string::npos);
  Decision d2 = c.process(msg("m1"));
  EXPECT_DECISION(d2, Action::kRetry, Reason::kHandlerFailed);
  EXPECT_EQ(d2.delay, seconds(2)) << "backoff for the second failed attempt";
  Decision d3 = c.process(msg("m1"));
  EXPECT_DECISION(d3, Action::kRetry, Reason::kRetryRequested);
  EXPECT_EQ(d3.delay, seconds(7));
  EXPECT_DECISION(c.process(msg("m1")), Action::kDeadLetter, Reason::kRetriesExhausted);
  EXPECT_EQ(calls, 4);
}

TEST_F(ConsumerTest, ExceptionsOfAnyTypeAreHandlerFailures) {
  auto c = make(options(), [&](const Msg& m, HandlerContext&) -> HandlerResult {
    if (*m.id == "std") throw std::runtime_error("std boom");
    if (*m.id == "int") throw 42;
    throw "a C string";
  });
  Decision s = c.process(msg("std"));
  EXPECT_DECISION(s, Action::kRetry, Reason::kHandlerFailed);
  EXPECT_NE(s.detail.find("std boom"), std::string::npos) << s.detail;
  Decision i = c.process(msg("int"));
  EXPECT_DECISION(i, Action::kRetry, Reason::kHandlerFailed);
  EXPECT_NE(i.detail.find("non-std"), std::string::npos) << i.detail;
  EXPECT_DECISION(c.process(msg("cstr")), Action::kRetry, Reason::kHandlerFailed);
  // The failure was counted: the next attempt is the second.
  auto info = store_->inspect("int", clock_->now());
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->retries, 1u);
}

TEST_F(ConsumerTest, RetryCountsOfDifferentIdsAreIndependent) {
  ConsumerOptions o = options();
  o.max_retries = 1;
  auto c = make(o, [&](const Msg&, HandlerContext&) { return HandlerResult::fail("x"); });
  EXPECT_DECISION(c.process(msg("a")), Action::kRetry, Reason::kHandlerFailed);
  EXPECT_DECISION(c.process(msg("b")), Action::kRetry, Reason::kHandlerFailed);
  EXPECT_DECISION(c.process(msg("a")), Action::kDeadLetter, Reason::kRetriesExhausted);
  EXPECT_DECISION(c.process(msg("b")), Action::kDeadLetter, Reason::kRetriesExhausted);
}

// --- payload conflicts ----------------------------------------------------------------

TEST_F(ConsumerTest, PayloadConflictDeadLettersByDefault) {
  int calls = 0;
  auto c = make(options(), [&](const Msg&, HandlerContext&) {
    ++calls;
    return HandlerResult::ok();
  });
  EXPECT_DECISION(c.process(msg("m1", "payload A")), Action::kAck, Reason::kProcessed);
  Decision d = c.process(msg("m1", "payload B"));
  EXPECT_DECISION(d, Action::kDeadLetter, Reason::kPayloadConflict);
  EXPECT_FALSE(d.detail.empty());
  EXPECT_DECISION(c.process(msg("m1", "payload A")), Action::kAck, Reason::kDuplicate);
  EXPECT_DECISION(c.process(msg("m1")), Action::kAck, Reason::kDuplicate) << "no payload: nothing to compare";
  EXPECT_EQ(calls, 1);
}

TEST_F(ConsumerTest, PayloadConflictTreatedAsDuplicateWhenAsked) {
  ConsumerOptions o = options();
  o.on_conflict = ConflictPolicy::kTreatAsDuplicate;
  int calls = 0;
  auto c = make(o, [&](const Msg&, HandlerContext&) {
    ++calls;
    return HandlerResult::ok();
  });
  EXPECT_DECISION(c.process(msg("m1", "payload A")), Action::kAck, Reason::kProcessed);
  EXPECT_DECISION(c.process(msg("m1", "payload B")), Action::kAck, Reason::kPayloadConflict);
  EXPECT_EQ(calls, 1);
}

TEST_F(ConsumerTest, PayloadConflictWhileInProgress) {
  Consumer<Msg>* self = nullptr;
  std::optional<Decision> inner;
  auto c = make(options(), [&](const Msg& m, HandlerContext&) {
    if (!inner) inner = self->process(msg(*m.id, "other payload"));
    return HandlerResult::ok();
  });
  self = &c;
  EXPECT_DECISION(c.process(msg("m1", "payload")), Action::kAck, Reason::kProcessed);
  ASSERT_TRUE(inner.has_value());
  EXPECT_DECISION(*inner, Action::kDeadLetter, Reason::kPayloadConflict);
}

TEST_F(ConsumerTest, NoPayloadExtractorNeverConflicts) {
  Extractors<Msg> x = all_extractors();
  x.payload = nullptr;
  auto c = make(
      options(), [&](const Msg&, HandlerContext&) { return HandlerResult::ok(); }, x);
  EXPECT_DECISION(c.process(msg("m1", "A")), Action::kAck, Reason::kProcessed);
  EXPECT_DECISION(c.process(msg("m1", "B")), Action::kAck, Reason::kDuplicate);
}

// --- bad input ----------------------------------------------------------------------

TEST_F(ConsumerTest, MissingOrEmptyIdIsABadMessage) {
  int calls = 0;
  for (Guarantee g : {Guarantee::kEffectivelyOnce, Guarantee::kAtMostOnce, Guarantee::kManual}) {
    auto c = make(options(g), [&](const Msg&, HandlerContext&) {
      ++calls;
      return HandlerResult::ok();
    });
    Decision none = c.process(Msg{});
    EXPECT_DECISION(none, Action::kDeadLetter, Reason::kBadMessage);
    EXPECT_NE(none.detail.find("no id"), std::string::npos) << none.detail;
    Decision empty = c.process(msg(""));
    EXPECT_DECISION(empty, Action::kDeadLetter, Reason::kBadMessage);
    EXPECT_NE(empty.detail.find("empty"), std::string::npos) << empty.detail;
  }
  EXPECT_EQ(calls, 0);
}

TEST_F(ConsumerTest, IdLengthLimit) {
  int calls = 0;
  auto c = make(options(), [&](const Msg&, HandlerContext&) {
    ++calls;
    return HandlerResult::ok();
  });
  ASSERT_EQ(c.options().max_id_bytes, 512u);
  EXPECT_DECISION(c.process(msg(std::string(512, 'a'))), Action::kAck, Reason::kProcessed);
  Decision d = c.process(msg(std::string(513, 'a')));
  EXPECT_DECISION(d, Action::kDeadLetter, Reason::kBadMessage);
  EXPECT_NE(d.detail.find("max_id_bytes"), std::string::npos) << d.detail;
  EXPECT_NE(d.detail.find("513"), std::string::npos) << d.detail;
  EXPECT_DECISION(c.process(msg("x")), Action::kAck, Reason::kProcessed);
  EXPECT_EQ(calls, 2);

  ConsumerOptions o = options();
  o.max_id_bytes = 4;
  auto small = make(o, [&](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  EXPECT_DECISION(small.process(msg("abcd")), Action::kAck, Reason::kProcessed);
  EXPECT_DECISION(small.process(msg("abcde")), Action::kDeadLetter, Reason::kBadMessage);
}

TEST_F(ConsumerTest, PayloadLengthLimit) {
  int calls = 0;
  ConsumerOptions o = options();
  ASSERT_EQ(o.max_payload_bytes, std::size_t{64} << 20);
  o.max_payload_bytes = 16;
  auto c = make(o, [&](const Msg&, HandlerContext&) {
    ++calls;
    return HandlerResult::ok();
  });
  EXPECT_DECISION(c.process(msg("a", std::string(16, 'p'))), Action::kAck, Reason::kProcessed);
  Decision d = c.process(msg("b", std::string(17, 'p')));
  EXPECT_DECISION(d, Action::kDeadLetter, Reason::kBadMessage);
  EXPECT_NE(d.detail.find("max_payload_bytes"), std::string::npos) << d.detail;
  EXPECT_EQ(calls, 1);
  // Checked under at_least_once too, where nothing else is.
  ConsumerOptions alo;
  alo.guarantee = Guarantee::kAtLeastOnce;
  alo.max_payload_bytes = 16;
  auto plain = make(alo, [&](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  EXPECT_DECISION(plain.process(msg("c", std::string(17, 'p'))), Action::kDeadLetter, Reason::kBadMessage);
  ConsumerOptions zero = options();
  zero.max_payload_bytes = 0;
  EXPECT_FALSE(Consumer<Msg>::create(zero, all_extractors(), [](const Msg&, HandlerContext&) {
                 return HandlerResult::ok();
               }).ok());
}

TEST_F(ConsumerTest, BinaryIdsWork) {
  std::vector<std::string> seen;
  auto c = make(options(), [&](const Msg&, HandlerContext& ctx) {
    seen.emplace_back(ctx.id());
    return HandlerResult::ok();
  });
  const std::vector<std::string> ids = {"a\0b"s, "a\0c"s, "a"s, "\xff\xfe\xfd"s, "\xc3\x28"s, "\0"s};
  for (const auto& id : ids) EXPECT_DECISION(c.process(msg(id)), Action::kAck, Reason::kProcessed);
  for (const auto& id : ids) EXPECT_DECISION(c.process(msg(id)), Action::kAck, Reason::kDuplicate);
  EXPECT_EQ(seen, ids);
}

TEST_F(ConsumerTest, OversizedResultIsCommittedButNotStored) {
  ConsumerOptions o = options();
  o.max_result_bytes = 10;
  int calls = 0;
  auto c = make(o, [&](const Msg& m, HandlerContext&) {
    ++calls;
    return HandlerResult::ok(*m.id == "big" ? std::string(11, 'r') : std::string(10, 's'));
  });
  Decision big = c.process(msg("big"));
  EXPECT_DECISION(big, Action::kAck, Reason::kProcessed);
  EXPECT_NE(big.detail.find("not stored"), std::string::npos) << big.detail;
  EXPECT_NE(big.detail.find("max_result_bytes"), std::string::npos) << big.detail;
  EXPECT_EQ(big.result, std::optional<std::string>(std::string(11, 'r'))) << "this caller still gets it";
  Decision dup = c.process(msg("big"));
  EXPECT_DECISION(dup, Action::kAck, Reason::kDuplicate);
  EXPECT_FALSE(dup.result.has_value());

  Decision fits = c.process(msg("fits"));
  EXPECT_TRUE(fits.detail.empty()) << fits.detail;
  EXPECT_EQ(c.process(msg("fits")).result, std::optional<std::string>(std::string(10, 's')));
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace idem::test

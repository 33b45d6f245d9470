// `idem replay` on the memory store: the exact output for duplicates, failures and
// backoff, the retry cap, TTL expiry by at_ms, and the guarantees (docs/design.md §8).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "replay/run_idem.hpp"

namespace idem::testing {
namespace {

using Lines = std::vector<std::string>;

// Replays `input` through stdin with `args`; expects exit 0 and returns stdout's lines.
Lines replay(const Lines& input, Lines args = {}) {
  args.insert(args.begin(), "replay");
  const RunResult r = run_idem(args, trace(input));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return lines_of(r.out);
}

TEST(ReplayDecisions, DuplicatesAreAckedWithoutAnEffect) {
  EXPECT_EQ(replay({R"({"id":"a","payload":"x"})", R"({"id":"a","payload":"x"})", R"({"id":"b"})", R"({"id":"a"})"}),
            (Lines{R"({"type":"effect","id":"a"})",
                   R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"processed"})",
                   R"({"type":"decision","line":2,"id":"a","action":"ack","reason":"duplicate"})",
                   R"({"type":"effect","id":"b"})",
                   R"({"type":"decision","line":3,"id":"b","action":"ack","reason":"processed"})",
                   R"({"type":"decision","line":4,"id":"a","action":"ack","reason":"duplicate"})"}));
}

TEST(ReplayDecisions, RedeliveryAfterFailureBacksOffDoublingThenProcesses) {
  EXPECT_EQ(
      replay({R"({"id":"a","fail":true,"at_ms":0})", R"({"id":"a","fail":true,"at_ms":1000})",
              R"({"id":"a","fail":true,"at_ms":3000})", R"({"id":"a","at_ms":7000})", R"({"id":"a","at_ms":8000})"}),
      (Lines{R"({"type":"decision","line":1,"id":"a","action":"retry","reason":"handler_failed","delay_ms":1000})",
             R"({"type":"decision","line":2,"id":"a","action":"retry","reason":"handler_failed","delay_ms":2000})",
             R"({"type":"decision","line":3,"id":"a","action":"retry","reason":"handler_failed","delay_ms":4000})",
             R"({"type":"effect","id":"a"})",
             R"({"type":"decision","line":4,"id":"a","action":"ack","reason":"processed"})",
             R"({"type":"decision","line":5,"id":"a","action":"ack","reason":"duplicate"})"}));
}

TEST(ReplayDecisions, BackoffMsSetsTheFirstDelay) {
  EXPECT_EQ(
      replay({R"({"id":"a","fail":true})", R"({"id":"a","fail":true})", R"({"id":"a","fail":true})"},
             {"--backoff-ms", "250"}),
      (Lines{R"({"type":"decision","line":1,"id":"a","action":"retry","reason":"handler_failed","delay_ms":250})",
             R"({"type":"decision","line":2,"id":"a","action":"retry","reason":"handler_failed","delay_ms":500})",
             R"({"type":"decision","line":3,"id":"a","action":"retry","reason":"handler_failed","delay_ms":1000})"}));
}

TEST(ReplayDecisions, BackoffIsCappedAtSixtySeconds) {
  const std::string f = R"({"id":"a","fail":true})";
  std::vector<std::string> delays;
  for (const std::string& line : replay({f, f, f, f, f, f, f, f}, {"--max-retries", "8"})) {
    const auto at = line.find("\"delay_ms\":");
    delays.push_back(at == std::string::npos ? "-" : line.substr(at + 11, line.size() - at - 12));
  }
  EXPECT_EQ(delays, (Lines{"1000", "2000", "4000", "8000", "16000", "32000", "60000", "60000"}));
  const Lines big = replay({f}, {"--backoff-ms", "90000"});
  ASSERT_EQ(big.size(), 1u);
  EXPECT_NE(big[0].find(R"("delay_ms":90000})"), std::string::npos) << big[0];
}

TEST(ReplayDecisions, FiveRetriesThenDeadLetterThenDuplicate) {
  const std::string f = R"({"id":"p","fail":true})";
  const auto retry = [](int line, int delay) {
    return R"({"type":"decision","line":)" + std::to_string(line) +
           R"(,"id":"p","action":"retry","reason":"handler_failed","delay_ms":)" + std::to_string(delay) + "}";
  };
  EXPECT_EQ(replay({f, f, f, f, f, f, R"({"id":"p"})", f}),
            (Lines{retry(1, 1000), retry(2, 2000), retry(3, 4000), retry(4, 8000), retry(5, 16000),
                   R"({"type":"decision","line":6,"id":"p","action":"dead_letter","reason":"retries_exhausted"})",
                   R"({"type":"decision","line":7,"id":"p","action":"ack","reason":"duplicate"})",
                   R"({"type":"decision","line":8,"id":"p","action":"ack","reason":"duplicate"})"}));
}

TEST(ReplayDecisions, MaxRetriesCapsRetryDecisionsPerId) {
  const std::string f = R"({"id":"p","fail":true})";
  EXPECT_EQ(
      replay({f, f, f}, {"--max-retries", "2"}),
      (Lines{R"({"type":"decision","line":1,"id":"p","action":"retry","reason":"handler_failed","delay_ms":1000})",
             R"({"type":"decision","line":2,"id":"p","action":"retry","reason":"handler_failed","delay_ms":2000})",
             R"({"type":"decision","line":3,"id":"p","action":"dead_letter","reason":"retries_exhausted"})"}));
  EXPECT_EQ(replay({f, R"({"id":"p"})"}, {"--max-retries", "0"}),
            (Lines{R"({"type":"decision","line":1,"id":"p","action":"dead_letter","reason":"retries_exhausted"})",
                   R"({"type":"decision","line":2,"id":"p","action":"ack","reason":"duplicate"})"}));
}

TEST(ReplayDecisions, RetryCountsAreKeptPerId) {
  EXPECT_EQ(
      replay({R"({"id":"a","fail":true})", R"({"id":"b","fail":true})", R"({"id":"a","fail":true})", R"({"id":"b"})",
              R"({"id":"a"})"},
             {"--max-retries", "1"}),
      (Lines{R"({"type":"decision","line":1,"id":"a","action":"retry","reason":"handler_failed","delay_ms":1000})",
             R"({"type":"decision","line":2,"id":"b","action":"retry","reason":"handler_failed","delay_ms":1000})",
             R"({"type":"decision","line":3,"id":"a","action":"dead_letter","reason":"retries_exhausted"})",
             R"({"type":"effect","id":"b"})",
             R"({"type":"decision","line":4,"id":"b","action":"ack","reason":"processed"})",
             R"({"type":"decision","line":5,"id":"a","action":"ack","reason":"duplicate"})"}));
}

TEST(ReplayDecisions, TtlExpiryByAtMsMakesTheIdNewAgain) {
  EXPECT_EQ(replay({R"({"id":"a","at_ms":0})", R"({"id":"a","at_ms":999})", R"({"id":"a"})",
                    R"({"id":"a","at_ms":1000})", R"({"id":"a","at_ms":1999})"},
                   {"--ttl-ms", "1000"}),
            (Lines{R"({"type":"effect","id":"a"})",
                   R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"processed"})",
                   R"({"type":"decision","line":2,"id":"a","action":"ack","reason":"duplicate"})",
                   R"({"type":"decision","line":3,"id":"a","action":"ack","reason":"duplicate"})",
                   R"({"type":"effect","id":"a"})",
                   R"({"type":"decision","line":4,"id":"a","action":"ack","reason":"processed"})",
                   R"({"type":"decision","line":5,"id":"a","action":"ack","reason":"duplicate"})"}));
}

TEST(ReplayDecisions, WithoutAtMsTheClockDoesNotMove) {
  // Starting at at_ms 0, the clock never passes the TTL, however many lines follow.
  EXPECT_EQ(replay({R"({"id":"a"})", R"({"id":"b"})", R"({"id":"a"})"}, {"--ttl-ms", "1"}),
            (Lines{R"({"type":"effect","id":"a"})",
                   R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"processed"})",
                   R"({"type":"effect","id":"b"})",
                   R"({"type":"decision","line":2,"id":"b","action":"ack","reason":"processed"})",
                   R"({"type":"decision","line":3,"id":"a","action":"ack","reason":"duplicate"})"}));
}

TEST(ReplayDecisions, SamePayloadOrNoneIsADuplicateAnotherPayloadAConflict) {
  EXPECT_EQ(replay({R"({"id":"a","payload":"x"})", R"({"id":"a"})", R"({"id":"a","payload":"y"})"}),
            (Lines{R"({"type":"effect","id":"a"})",
                   R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"processed"})",
                   R"({"type":"decision","line":2,"id":"a","action":"ack","reason":"duplicate"})",
                   R"({"type":"decision","line":3,"id":"a","action":"dead_letter","reason":"payload_conflict"})"}));
}

TEST(ReplayDecisions, IdsAreBytesEscapedInJson) {
  EXPECT_EQ(replay({R"({"id":"a\u0000b"})", R"({"id":"a"})", R"({"id":"a\u0000b"})", R"({"id":"caf\u00e9"})",
                    R"({"id":"café"})"}),
            (Lines{R"({"type":"effect","id":"a\u0000b"})",
                   R"({"type":"decision","line":1,"id":"a\u0000b","action":"ack","reason":"processed"})",
                   R"({"type":"effect","id":"a"})",
                   R"({"type":"decision","line":2,"id":"a","action":"ack","reason":"processed"})",
                   R"({"type":"decision","line":3,"id":"a\u0000b","action":"ack","reason":"duplicate"})",
                   R"({"type":"effect","id":"café"})",
                   R"({"type":"decision","line":4,"id":"café","action":"ack","reason":"processed"})",
                   R"({"type":"decision","line":5,"id":"café","action":"ack","reason":"duplicate"})"}));
}

TEST(ReplayDecisions, KeyVersionEventAreReportedAndDoNotChangeDedup) {
  EXPECT_EQ(replay({R"({"id":"a","key":"k","version":1,"event":"online","note":"own field"})",
                    R"({"id":"a","key":"k","version":1,"event":"online"})"}),
            (Lines{R"({"type":"effect","id":"a","key":"k","version":1,"event":"online"})",
                   R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"processed"})",
                   R"({"type":"decision","line":2,"id":"a","action":"ack","reason":"duplicate"})"}));
}

TEST(ReplayDecisions, AResetLineIsNotADelivery) {
  EXPECT_EQ(replay({R"({"reset":true,"stream":"s","position":7})", R"({"id":"a"})"}),
            (Lines{R"({"type":"decision","line":1,"action":"ack","reason":"reset"})", R"({"type":"effect","id":"a"})",
                   R"({"type":"decision","line":2,"id":"a","action":"ack","reason":"processed"})"}));
}

TEST(ReplayGuarantees, AtMostOnceDropsAFailedMessage) {
  EXPECT_EQ(replay({R"({"id":"a","fail":true})", R"({"id":"a"})", R"({"id":"b"})"}, {"--guarantee", "at_most_once"}),
            (Lines{R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"handler_failed"})",
                   R"({"type":"decision","line":2,"id":"a","action":"ack","reason":"duplicate"})",
                   R"({"type":"effect","id":"b"})",
                   R"({"type":"decision","line":3,"id":"b","action":"ack","reason":"processed"})"}));
}

TEST(ReplayGuarantees, AtLeastOnceRunsEveryDeliveryAndNeedsNoId) {
  EXPECT_EQ(
      replay({R"({"id":"a"})", R"({"id":"a"})", R"({"payload":"no id"})", R"({"id":"a","fail":true})"},
             {"--guarantee", "at_least_once"}),
      (Lines{R"({"type":"effect","id":"a"})",
             R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"processed"})",
             R"({"type":"effect","id":"a"})",
             R"({"type":"decision","line":2,"id":"a","action":"ack","reason":"processed"})", R"({"type":"effect"})",
             R"({"type":"decision","line":3,"action":"ack","reason":"processed"})",
             R"({"type":"decision","line":4,"id":"a","action":"retry","reason":"handler_failed","delay_ms":1000})"}));
}

TEST(ReplayGuarantees, ManualBehavesAsEffectivelyOnceWithTheBuiltInHandler) {
  const Lines input = {R"({"id":"a","fail":true})", R"({"id":"a"})", R"({"id":"a"})"};
  const Lines manual = replay(input, {"--guarantee", "manual"});
  EXPECT_EQ(manual, replay(input, {"--guarantee", "effectively_once"}));
  EXPECT_EQ(manual.size(), 4u);
  EXPECT_EQ(manual[3], R"({"type":"decision","line":3,"id":"a","action":"ack","reason":"duplicate"})");
}

}  // namespace
}  // namespace idem::testing

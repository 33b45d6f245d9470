// `idem replay` with --ordering and --machine (docs/design.md §8): the exact output for
// out-of-order versions, drains, gap policies, the watermark and the field's example.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "replay/run_idem.hpp"

namespace idem::testing {
namespace {

using Lines = std::vector<std::string>;

Lines replay(const Lines& input, Lines args) {
  args.insert(args.begin(), "replay");
  const RunResult r = run_idem(args, trace(input));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return lines_of(r.out);
}

std::string product_machine() { return std::string(IDEM_SOURCE_DIR) + "/examples/machines/product.yaml"; }

TEST(ReplayOrdering, TheFieldsOwnExampleWithTheProductMachine) {
  EXPECT_EQ(
      replay({R"({"id":"3","key":"p","event":"online"})", R"({"id":"1","key":"p","event":"online"})",
              R"({"id":"2","key":"p","event":"offline"})", R"({"id":"1","key":"p","event":"online"})",
              R"({"id":"3","key":"p","event":"online"})"},
             {"--machine", product_machine()}),
      (Lines{R"({"type":"effect","id":"3","key":"p","event":"online","from":"offline","to":"online"})",
             R"({"type":"decision","line":1,"id":"3","action":"ack","reason":"processed"})",
             R"({"type":"decision","line":2,"id":"1","action":"retry","reason":"invalid_transition","delay_ms":1000})",
             R"({"type":"effect","id":"2","key":"p","event":"offline","from":"online","to":"offline"})",
             R"({"type":"decision","line":3,"id":"2","action":"ack","reason":"processed"})",
             R"({"type":"effect","id":"1","key":"p","event":"online","from":"offline","to":"online"})",
             R"({"type":"decision","line":4,"id":"1","action":"ack","reason":"processed"})",
             R"({"type":"decision","line":5,"id":"3","action":"ack","reason":"duplicate"})"}));
}

TEST(ReplayOrdering, AnInvalidTransitionGetsMaxRetriesThenDeadLetter) {
  Lines in{R"({"id":"a","key":"p","event":"online"})"};
  for (int i = 0; i < 6; ++i) in.push_back(R"({"id":"b","key":"p","event":"online"})");
  const Lines out = replay(in, {"--machine", product_machine(), "--max-retries", "2"});
  ASSERT_EQ(out.size(), 8u);
  EXPECT_NE(out[2].find(R"("action":"retry","reason":"invalid_transition")"), std::string::npos) << out[2];
  EXPECT_NE(out[3].find(R"("action":"retry","reason":"invalid_transition")"), std::string::npos) << out[3];
  EXPECT_EQ(out[4], R"({"type":"decision","line":4,"id":"b","action":"dead_letter","reason":"retries_exhausted"})");
  EXPECT_EQ(out[5], R"({"type":"decision","line":5,"id":"b","action":"ack","reason":"duplicate"})");
}

TEST(ReplayOrdering, StrictOnADurableStoreBuffersThenDrainsInOrder) {
  TempDir dir;
  EXPECT_EQ(
      replay({R"({"id":"c","key":"k","version":3})", R"({"id":"b","key":"k","version":2})",
              R"({"id":"a","key":"k","version":1})", R"({"id":"a2","key":"k","version":2})"},
             {"--ordering", "strict", "--store", "sqlite:" + dir.path() + "/s.db"}),
      (Lines{R"({"type":"decision","line":1,"id":"c","action":"ack","reason":"buffered"})",
             R"({"type":"decision","line":2,"id":"b","action":"ack","reason":"buffered"})",
             R"({"type":"effect","id":"a","key":"k","version":1})", R"({"type":"effect","id":"b","key":"k","version":2})",
             R"({"type":"effect","id":"c","key":"k","version":3})",
             R"({"type":"decision","line":3,"id":"a","action":"ack","reason":"processed"})",
             R"({"type":"decision","line":4,"id":"a2","action":"ack","reason":"stale"})"}));
}

TEST(ReplayOrdering, StrictOnTheMemoryStoreHoldsEarlyVersions) {
  const Lines out = replay({R"({"id":"b","key":"k","version":2})"}, {"--ordering", "strict"});
  EXPECT_EQ(out, (Lines{R"({"type":"decision","line":1,"id":"b","action":"hold","reason":"buffered"})"}));
}

TEST(ReplayOrdering, ASecondRunDrainsWhatTheFirstBuffered) {
  TempDir dir;
  const std::string store = "sqlite:" + dir.path() + "/s.db";
  replay({R"({"id":"b","key":"k","version":2})"}, {"--ordering", "strict", "--store", store});
  EXPECT_EQ(replay({R"({"id":"a","key":"k","version":1})"}, {"--ordering", "strict", "--store", store}),
            (Lines{R"({"type":"effect","id":"a","key":"k","version":1})",
                   R"({"type":"effect","id":"b","key":"k","version":2})",
                   R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"processed"})"}));
}

TEST(ReplayOrdering, GapPolicySkipRunsTheBufferedVersionAfterTheTimeout) {
  TempDir dir;
  EXPECT_EQ(replay({R"({"id":"c","key":"k","version":3,"at_ms":0})", R"({"id":"x","key":"other","version":1,"at_ms":600})"},
                   {"--ordering", "strict", "--store", "sqlite:" + dir.path() + "/s.db", "--gap-timeout-ms", "500",
                    "--gap-policy", "skip"}),
            (Lines{R"({"type":"decision","line":1,"id":"c","action":"ack","reason":"buffered"})",
                   R"({"type":"effect","id":"c","key":"k","version":3})",
                   R"({"type":"effect","id":"x","key":"other","version":1})",
                   R"({"type":"decision","line":2,"id":"x","action":"ack","reason":"processed"})"}));
}

TEST(ReplayOrdering, BufferLimitLeavesTheMessageWithTheBroker) {
  TempDir dir;
  const Lines out = replay({R"({"id":"c","key":"k","version":3})", R"({"id":"d","key":"k","version":4})"},
                           {"--ordering", "strict", "--store", "sqlite:" + dir.path() + "/s.db", "--buffer-limit", "1"});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NE(out[1].find(R"("action":"retry","reason":"buffer_full")"), std::string::npos) << out[1];
}

TEST(ReplayOrdering, MonotonicDropsStaleVersions) {
  EXPECT_EQ(replay({R"({"id":"b","key":"k","version":5})", R"({"id":"a","key":"k","version":4})"},
                   {"--ordering", "monotonic"}),
            (Lines{R"({"type":"effect","id":"b","key":"k","version":5})",
                   R"({"type":"decision","line":1,"id":"b","action":"ack","reason":"processed"})",
                   R"({"type":"decision","line":2,"id":"a","action":"ack","reason":"stale"})"}));
}

TEST(ReplayOrdering, WatermarkDropsOldPositionsUntilAReset) {
  EXPECT_EQ(replay({R"({"id":"a","stream":"p0","position":5})", R"({"id":"b","stream":"p0","position":4})",
                    R"({"stream":"p0","position":3,"reset":true})", R"({"id":"b","stream":"p0","position":4})"},
                   {"--ordering", "watermark"}),
            (Lines{R"({"type":"effect","id":"a"})",
                   R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"processed"})",
                   R"({"type":"decision","line":2,"id":"b","action":"ack","reason":"duplicate"})",
                   R"({"type":"decision","line":3,"action":"ack","reason":"reset"})",
                   R"({"type":"effect","id":"b"})",
                   R"({"type":"decision","line":4,"id":"b","action":"ack","reason":"processed"})"}));
}

TEST(ReplayOrdering, BadVersionsAreBadMessages) {
  const Lines out = replay({R"({"id":"a","key":"k","version":"seven"})", R"({"id":"b","key":"k","version":0})",
                            R"({"id":"c","version":1})"},
                           {"--ordering", "strict"});
  ASSERT_EQ(out.size(), 3u);
  for (const std::string& line : out)
    EXPECT_NE(line.find(R"("action":"dead_letter","reason":"bad_message")"), std::string::npos) << line;
  EXPECT_NE(out[0].find("version"), std::string::npos) << out[0];
  EXPECT_NE(out[1].find("version 0"), std::string::npos) << out[1];
  EXPECT_NE(out[2].find("no key"), std::string::npos) << out[2];
}

TEST(ReplayOrdering, IdemInspectShowsWhatWaits) {
  TempDir dir;
  const std::string store = "sqlite:" + dir.path() + "/s.db";
  replay({R"({"id":"c","key":"k","version":3,"at_ms":7})", R"({"id":"a","key":"j","version":1})"},
         {"--ordering", "strict", "--store", store});
  RunResult show = run_idem({"inspect", "--store", store, "--key", "k", "--json"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  const Lines lines = lines_of(show.out);
  ASSERT_EQ(lines.size(), 2u) << show.out;
  EXPECT_EQ(lines[0], R"({"type":"entity","key":"k","revision":0,"version":0})");
  EXPECT_EQ(lines[1].rfind(R"({"type":"buffered","version":3,"id":"c","buffered_at_ms":7,)", 0), 0u) << lines[1];
  RunResult list = run_idem({"inspect", "--store", store, "--json"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(lines_of(list.out).size(), 4u) << list.out;  // records, buffer, one key, the outbox
  EXPECT_NE(list.out.find(R"("key":"k","count":1,"lowest_version":3,"oldest_at_ms":7)"), std::string::npos) << list.out;
  RunResult unknown = run_idem({"inspect", "--store", "nosuch:"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("nosuch"), std::string::npos) << unknown.err;
}

}  // namespace
}  // namespace idem::testing

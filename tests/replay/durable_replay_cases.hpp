// The replay contract's cases for a durable store, shared by the SQLite and
// PostgreSQL replay tests: each takes the store's URI (a fresh store).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "idem/open_store.hpp"
#include "replay/run_idem.hpp"

namespace idem::testing {

using Lines = std::vector<std::string>;

// `idem replay --store uri args…` over `input`; expects a clean exit and returns stdout.
inline Lines replay_on(const std::string& uri, const Lines& input, Lines args = {}) {
  args.insert(args.begin(), {"replay", "--store", uri});
  const RunResult r = run_idem(args, trace(input));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return lines_of(r.out);
}

// A second run continues from the state the first left: results, retry counts.
inline void expect_a_second_run_continues(const std::string& uri) {
  EXPECT_EQ(
      replay_on(uri,
                {R"({"id":"a"})", R"({"id":"b","fail":true})", R"({"id":"b","fail":true})", R"({"id":"p","fail":true})",
                 R"({"id":"p","fail":true})"},
                {"--max-retries", "3"}),
      (Lines{R"({"type":"effect","id":"a"})",
             R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"processed"})",
             R"({"type":"decision","line":2,"id":"b","action":"retry","reason":"handler_failed","delay_ms":1000})",
             R"({"type":"decision","line":3,"id":"b","action":"retry","reason":"handler_failed","delay_ms":2000})",
             R"({"type":"decision","line":4,"id":"p","action":"retry","reason":"handler_failed","delay_ms":1000})",
             R"({"type":"decision","line":5,"id":"p","action":"retry","reason":"handler_failed","delay_ms":2000})"}));
  // The retry counts of b and p carry over: one more retry each, then the cap.
  EXPECT_EQ(
      replay_on(uri,
                {R"({"id":"a"})", R"({"id":"b","fail":true})", R"({"id":"b"})", R"({"id":"p","fail":true})",
                 R"({"id":"p","fail":true})"},
                {"--max-retries", "3"}),
      (Lines{R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"duplicate"})",
             R"({"type":"decision","line":2,"id":"b","action":"retry","reason":"handler_failed","delay_ms":4000})",
             R"({"type":"effect","id":"b"})",
             R"({"type":"decision","line":3,"id":"b","action":"ack","reason":"processed"})",
             R"({"type":"decision","line":4,"id":"p","action":"retry","reason":"handler_failed","delay_ms":4000})",
             R"({"type":"decision","line":5,"id":"p","action":"dead_letter","reason":"retries_exhausted"})"}));
  EXPECT_EQ(replay_on(uri, {R"({"id":"a"})", R"({"id":"b"})", R"({"id":"p"})", R"({"id":"c"})"}),
            (Lines{R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"duplicate"})",
                   R"({"type":"decision","line":2,"id":"b","action":"ack","reason":"duplicate"})",
                   R"({"type":"decision","line":3,"id":"p","action":"ack","reason":"duplicate"})",
                   R"({"type":"effect","id":"c"})",
                   R"({"type":"decision","line":4,"id":"c","action":"ack","reason":"processed"})"}));
}

// A lease left by a crashed run blocks its id until it expires. REQUIRES: a store whose
// leases outlive the process that took them.
inline void expect_a_crashed_runs_lease_to_block_until_it_expires(const std::string& uri) {
  {
    // A replay that died while its handler ran for "a" at at_ms 0 with a 30 s lease.
    auto store = open_store(uri);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    auto claim = (*store)->claim({"a", "idem-replay", Duration(30'000), std::nullopt, from_unix_ms(0)});
    ASSERT_TRUE(claim.ok()) << claim.status().to_string();
    ASSERT_EQ(claim->status, ClaimStatus::kNew);
  }
  EXPECT_EQ(replay_on(uri, {R"({"id":"a","at_ms":10000})", R"({"id":"b"})", R"({"id":"a","at_ms":29999})",
                            R"({"id":"a","at_ms":30000})"}),
            (Lines{R"({"type":"decision","line":1,"id":"a","action":"retry","reason":"in_progress","delay_ms":20000})",
                   R"({"type":"effect","id":"b"})",
                   R"({"type":"decision","line":2,"id":"b","action":"ack","reason":"processed"})",
                   R"({"type":"decision","line":3,"id":"a","action":"retry","reason":"in_progress","delay_ms":1})",
                   R"({"type":"effect","id":"a"})",
                   R"({"type":"decision","line":4,"id":"a","action":"ack","reason":"processed"})"}));
}

}  // namespace idem::testing

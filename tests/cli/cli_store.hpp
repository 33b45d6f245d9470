// A SQLite store prepared by `idem replay` for the operator tests: done, pending and
// buffered records at known times.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "replay/run_idem.hpp"

namespace idem::testing {

using Lines = std::vector<std::string>;

// at_ms at which the prepared records are judged: after every line of the traces, long
// before the default 7-day ttl.
inline constexpr const char* kAt = "5000";
// After every record's ttl (7 days after at_ms 2000): all of them are expired.
inline constexpr const char* kAfterTtl = "700000000";

// Replays `input` into `uri` (extra replay options in `args`) and expects it to run.
inline void replay_into(const std::string& uri, const Lines& input, Lines args = {}) {
  args.insert(args.begin(), {"replay", "--store", uri});
  const RunResult r = run_idem(args, trace(input));
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

// sqlite:DIR/ops.db with: "a" done (payload x), "b" pending with 1 retry, "d" pending
// with 2 retries, entity "p" at version 1 with version 3 buffered (id k3).
inline std::string prepared_store(const TempDir& dir) {
  const std::string uri = "sqlite:" + dir.path() + "/ops.db";
  replay_into(uri, {R"({"id":"a","at_ms":1000,"payload":"x"})", R"({"id":"b","fail":true,"at_ms":2000})",
                    R"({"id":"d","fail":true,"at_ms":2000})", R"({"id":"d","fail":true,"at_ms":2000})"});
  replay_into(
      uri, {R"({"id":"k1","key":"p","version":1,"at_ms":3000})", R"({"id":"k3","key":"p","version":3,"at_ms":3000})"},
      {"--ordering", "strict"});
  return uri;
}

// Runs idem and expects exit status `code`, nothing on stdout, and one line on stderr
// that contains `needle`.
inline void expect_one_line_error(const Lines& args, int code, const std::string& needle) {
  const RunResult r = run_idem(args);
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

}  // namespace idem::testing

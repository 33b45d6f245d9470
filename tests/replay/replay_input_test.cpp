// `idem replay`: malformed lines, input from a file or stdin, options and exit codes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "replay/run_idem.hpp"

namespace idem::testing {
namespace {

using Lines = std::vector<std::string>;

TEST(ReplayInput, MalformedLinesGetBadMessageAndReplayGoesOn) {
  const Lines input = {
      R"({"id":"ok1"})",
      R"(not json)",
      R"([1,2])",
      R"({"id":5})",
      R"({"id":"a","at_ms":-1})",
      R"({"id":"a","at_ms":1.5})",
      R"({"id":"a","at_ms":"10"})",
      R"({"id":"a","fail":"yes"})",
      R"({"id":"a","payload":7})",
      R"({"id":"a","version":-2})",
      R"({"id":"a","reset":true})",
      R"({})",
      R"({"id":""})",
      "",
      R"({"id":"ok2"})",
  };
  const RunResult r = run_idem({"replay"}, trace(input));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Lines out = lines_of(r.out);
  ASSERT_EQ(out.size(), 17u) << r.out;
  EXPECT_EQ(out[0], R"({"type":"effect","id":"ok1"})");
  EXPECT_EQ(out[1], R"({"type":"decision","line":1,"id":"ok1","action":"ack","reason":"processed"})");
  // The parser's wording is nlohmann-json's; the start is ours.
  EXPECT_EQ(
      out[2].rfind(
          R"({"type":"decision","line":2,"action":"dead_letter","reason":"bad_message","error":"invalid JSON: )", 0),
      0u)
      << out[2];
  EXPECT_EQ(
      out[3],
      R"({"type":"decision","line":3,"action":"dead_letter","reason":"bad_message","error":"a line must be a JSON object, got array"})");
  EXPECT_EQ(
      out[4],
      R"({"type":"decision","line":4,"action":"dead_letter","reason":"bad_message","error":"\"id\" must be a string, got number"})");
  EXPECT_EQ(
      out[5],
      R"({"type":"decision","line":5,"id":"a","action":"dead_letter","reason":"bad_message","error":"\"at_ms\" must be a non-negative integer, got number"})");
  EXPECT_EQ(
      out[6],
      R"({"type":"decision","line":6,"id":"a","action":"dead_letter","reason":"bad_message","error":"\"at_ms\" must be a non-negative integer, got number"})");
  EXPECT_EQ(
      out[7],
      R"({"type":"decision","line":7,"id":"a","action":"dead_letter","reason":"bad_message","error":"\"at_ms\" must be a non-negative integer, got string"})");
  EXPECT_EQ(
      out[8],
      R"({"type":"decision","line":8,"id":"a","action":"dead_letter","reason":"bad_message","error":"\"fail\" must be a boolean, got string"})");
  EXPECT_EQ(
      out[9],
      R"({"type":"decision","line":9,"id":"a","action":"dead_letter","reason":"bad_message","error":"\"payload\" must be a string, got number"})");
  EXPECT_EQ(
      out[10],
      R"({"type":"decision","line":10,"id":"a","action":"dead_letter","reason":"bad_message","error":"\"version\" must be a non-negative integer, got number"})");
  EXPECT_EQ(
      out[11],
      R"({"type":"decision","line":11,"id":"a","action":"dead_letter","reason":"bad_message","error":"a reset line needs \"stream\" and \"position\""})");
  EXPECT_EQ(
      out[12],
      R"j({"type":"decision","line":12,"action":"dead_letter","reason":"bad_message","error":"message has no id (required by guarantee effectively_once)"})j");
  EXPECT_EQ(
      out[13],
      R"({"type":"decision","line":13,"id":"","action":"dead_letter","reason":"bad_message","error":"message id is empty"})");
  EXPECT_EQ(
      out[14],
      R"j({"type":"decision","line":14,"action":"dead_letter","reason":"bad_message","error":"empty line (each line must be one JSON object)"})j");
  EXPECT_EQ(out[15], R"({"type":"effect","id":"ok2"})");
  EXPECT_EQ(out[16], R"({"type":"decision","line":15,"id":"ok2","action":"ack","reason":"processed"})");
}

TEST(ReplayInput, InvalidUtf8IsABadMessageAndTheOutputStaysValid) {
  const RunResult r = run_idem({"replay"}, "{\"id\":\"\xff\"}\n\xfe\n{\"id\":\"ok\"}\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Lines out = lines_of(r.out);
  ASSERT_EQ(out.size(), 4u) << r.out;
  for (int i = 0; i < 2; ++i) {
    const std::string start = R"({"type":"decision","line":)" + std::to_string(i + 1) +
                              R"(,"action":"dead_letter","reason":"bad_message","error":"invalid JSON: )";
    EXPECT_EQ(out[i].rfind(start, 0), 0u) << out[i];
    // The parser quotes the bad byte; the output replaces it, so every line is UTF-8.
    EXPECT_EQ(out[i].find('\xff'), std::string::npos);
    EXPECT_EQ(out[i].find('\xfe'), std::string::npos);
  }
  EXPECT_EQ(out[3], R"({"type":"decision","line":3,"id":"ok","action":"ack","reason":"processed"})");
}

TEST(ReplayInput, AMalformedLineChangesNothing) {
  // Neither its at_ms (which would expire "a") nor its id (which would be claimed).
  const RunResult r =
      run_idem({"replay", "--ttl-ms", "1000"},
               trace({R"({"id":"a"})", R"({"id":"b","at_ms":5000,"fail":1})", R"({"id":"a"})", R"({"id":"b"})"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(
      lines_of(r.out),
      (Lines{
          R"({"type":"effect","id":"a"})",
          R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"processed"})",
          R"({"type":"decision","line":2,"id":"b","action":"dead_letter","reason":"bad_message","error":"\"fail\" must be a boolean, got number"})",
          R"({"type":"decision","line":3,"id":"a","action":"ack","reason":"duplicate"})",
          R"({"type":"effect","id":"b"})",
          R"({"type":"decision","line":4,"id":"b","action":"ack","reason":"processed"})"}));
}

TEST(ReplayInput, AtMsIsLimitedToTheYear2100) {
  const RunResult r =
      run_idem({"replay"}, trace({R"({"id":"a","at_ms":4102444800000})", R"({"id":"b","at_ms":4102444800001})"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(
      lines_of(r.out),
      (Lines{
          R"({"type":"effect","id":"a"})",
          R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"processed"})",
          R"({"type":"decision","line":2,"id":"b","action":"dead_letter","reason":"bad_message","error":"\"at_ms\" must be at most 4102444800000, got 4102444800001"})"}));
}

TEST(ReplayInput, CrLfLineEndingsAndALastLineWithoutNewline) {
  const RunResult r = run_idem({"replay"}, "{\"id\":\"a\"}\r\n{\"id\":\"a\"}");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out), (Lines{R"({"type":"effect","id":"a"})",
                                    R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"processed"})",
                                    R"({"type":"decision","line":2,"id":"a","action":"ack","reason":"duplicate"})"}));
}

TEST(ReplayInput, StdinDashAndAFileGiveTheSameOutput) {
  const std::string t = trace({R"({"id":"a","fail":true})", R"({"id":"a"})", R"({"id":"a"})"});
  TempDir dir;
  const std::string file = dir.write("trace.jsonl", t);
  const RunResult from_stdin = run_idem({"replay"}, t);
  const RunResult from_dash = run_idem({"replay", "-"}, t);
  const RunResult from_file = run_idem({"replay", file}, "{\"id\":\"ignored\"}\n");
  for (const RunResult* r : {&from_stdin, &from_dash, &from_file}) EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_EQ(lines_of(from_stdin.out).size(), 4u);
  EXPECT_EQ(from_stdin.out, from_dash.out);
  EXPECT_EQ(from_stdin.out, from_file.out);
}

TEST(ReplayInput, EmptyInputIsAnEmptyRun) {
  const RunResult r = run_idem({"replay"}, "");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
}

// Expects exit status `code`, nothing on stdout and `needle` on stderr.
void expect_run_fails(const Lines& args, int code, const std::string& needle) {
  const RunResult r = run_idem(args, trace({R"({"id":"a"})"}));
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
}

TEST(ReplayOptions, InvalidOptionsExitWithStatus2) {
  expect_run_fails({}, 2, "subcommand");
  expect_run_fails({"replay", "--no-such-option"}, 2, "--no-such-option");
  expect_run_fails({"replay", "--guarantee", "exactly_once"}, 2, "--guarantee");
  expect_run_fails({"replay", "--ordering", "sideways"}, 2, "--ordering");
  expect_run_fails({"replay", "--max-retries", "-1"}, 2, "--max-retries");
  expect_run_fails({"replay", "--max-retries", "many"}, 2, "--max-retries");
  expect_run_fails({"replay", "--backoff-ms", "-5"}, 2, "--backoff-ms");
  expect_run_fails({"replay", "--lease-ms", "0"}, 2, "--lease-ms");
  expect_run_fails({"replay", "--ttl-ms", "0"}, 2, "--ttl-ms");
  expect_run_fails({"replay", "--store", "nosuch:"}, 2, "unknown store scheme");
  expect_run_fails({"replay", "--store", "memory:?max_records=0"}, 2, "max_records");
  expect_run_fails({"replay", "--guarantee", "at_least_once", "--store", "memory:"}, 2, "--store");
}

TEST(ReplayOptions, OrderingAndMachineOptionsThatCannotApplyAreRejectedClearly) {
  TempDir dir;
  expect_run_fails({"replay", "--machine", dir.path() + "/door.yaml"}, 2, "--machine");
  const std::string bad = dir.write("bad.yaml", "name: door\ninitial: shut\ntransitions: []\nextra: 1\n");
  expect_run_fails({"replay", "--machine", bad}, 2, "bad.yaml:");
  expect_run_fails({"replay", "--gap-policy", "skip"}, 2, "--gap-policy applies to --ordering strict");
  expect_run_fails({"replay", "--gap-timeout-ms", "5"}, 2, "--gap-timeout-ms applies to --ordering strict");
  expect_run_fails({"replay", "--ordering", "monotonic", "--buffer-limit", "5"}, 2,
                   "--buffer-limit applies to --ordering strict");
  expect_run_fails({"replay", "--ordering", "strict", "--gap-policy", "drop"}, 2, "--gap-policy");
  expect_run_fails({"replay", "--ordering", "strict", "--buffer-limit", "0"}, 2, "--buffer-limit");
  expect_run_fails({"replay", "--ordering", "strict", "--guarantee", "at_least_once"}, 2, "effectively_once");
}

TEST(ReplayOptions, OrderingNoneIsAccepted) {
  const RunResult r = run_idem({"replay", "--ordering", "none"}, trace({R"({"id":"a"})"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 2u);
}

TEST(ReplayOptions, AnUnreadableTraceExitsWithStatus1) {
  TempDir dir;
  expect_run_fails({"replay", dir.path() + "/missing.jsonl"}, 1, "cannot read trace");
  expect_run_fails({"replay", dir.path()}, 1, "is a directory");
}

TEST(ReplayOptions, HelpDescribesTheContract) {
  const RunResult r = run_idem({"replay", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word :
       {"--store", "--guarantee", "--max-retries", "--backoff-ms", "--lease-ms", "--ttl-ms", "TRACE", "Exit status"})
    EXPECT_NE(r.out.find(word), std::string::npos) << word;
}

}  // namespace
}  // namespace idem::testing

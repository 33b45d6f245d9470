// `idem purge` against a SQLite store prepared by `idem replay`: --id and --key are dry
// runs unless --yes; --expired removes what has expired and says how much.
#include <gtest/gtest.h>

#include <string>

#include "cli/cli_store.hpp"

namespace idem::testing {
namespace {

int exit_of(const Lines& args) { return run_idem(args).exit_code; }

TEST(IdemPurge, AnIdIsADryRunUnlessYes) {
  TempDir dir;
  const std::string uri = prepared_store(dir);
  RunResult r = run_idem({"purge", "--store", uri, "--at-ms", kAt, "--id", "a", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(lines_of(r.out).size(), 2u) << r.out;
  EXPECT_EQ(lines_of(r.out)[1], R"({"type":"dry_run","removed":false})");
  EXPECT_EQ(exit_of({"inspect", "--store", uri, "--at-ms", kAt, "--id", "a"}), 0) << "the dry run kept it";

  r = run_idem({"purge", "--store", uri, "--at-ms", kAt, "--id", "a", "--yes"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).back(), R"(removed id "a")");
  EXPECT_EQ(exit_of({"inspect", "--store", uri, "--at-ms", kAt, "--id", "a"}), 3);
  expect_one_line_error({"purge", "--store", uri, "--at-ms", kAt, "--id", "a", "--yes"}, 3, R"(id "a")");
  // A removed id is new again: a redelivery is processed.
  const RunResult again = run_idem({"replay", "--store", uri}, trace({R"({"id":"a","at_ms":6000,"payload":"x"})"}));
  EXPECT_EQ(lines_of(again.out),
            (Lines{R"({"type":"effect","id":"a"})",
                   R"({"type":"decision","line":1,"id":"a","action":"ack","reason":"processed"})"}));
  EXPECT_EQ(exit_of({"inspect", "--store", uri, "--at-ms", kAt, "--id", "b"}), 0) << "other ids are kept";
}

TEST(IdemPurge, AKeyIsADryRunUnlessYes) {
  TempDir dir;
  const std::string uri = prepared_store(dir);
  RunResult r = run_idem({"purge", "--store", uri, "--at-ms", kAt, "--key", "p"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("dry run: nothing removed"), std::string::npos) << r.out;
  EXPECT_EQ(exit_of({"inspect", "--store", uri, "--key", "p"}), 0);

  r = run_idem({"purge", "--store", uri, "--at-ms", kAt, "--key", "p", "--yes", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).back(), R"({"type":"removed","key":"p","removed":true})");
  expect_one_line_error({"inspect", "--store", uri, "--key", "p"}, 3, R"(key "p" has no entity record)");
  r = run_idem({"inspect", "--store", uri, "--at-ms", kAt, "--json"});
  EXPECT_NE(r.out.find(R"({"type":"buffer","kept":true,"count":0,"bytes":0})"), std::string::npos) << r.out;
  expect_one_line_error({"purge", "--store", uri, "--key", "p", "--yes"}, 3, R"(key "p")");
}

TEST(IdemPurge, ExpiredRemovesWhatHasExpiredAndSaysHowMuch) {
  TempDir dir;
  const std::string uri = prepared_store(dir);
  RunResult r = run_idem({"purge", "--store", uri, "--at-ms", kAt, "--expired", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, R"({"type":"purge","removed":0,"steps":1,"expired_before":0})"
                   "\n");
  r = run_idem({"purge", "--store", uri, "--at-ms", kAfterTtl, "--expired", "--batch", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out), (Lines{"removed 4 expired records in 4 steps of at most 1"}));
  r = run_idem({"inspect", "--store", uri, "--at-ms", kAfterTtl, "--json"});
  EXPECT_EQ(lines_of(r.out)[0],
            R"({"type":"records","counted":true,"at_ms":700000000,"pending":0,"in_progress":0,"done":0,)"
            R"("dead_lettered":0,"expired":0})");
  EXPECT_NE(r.out.find(R"("count":1)"), std::string::npos) << "buffered messages do not expire: " << r.out;
}

TEST(IdemPurge, BadOptionsAndStores) {
  TempDir dir;
  const std::string uri = prepared_store(dir);
  expect_one_line_error({"purge", "--store", uri}, 2, "give exactly one of --expired, --id, --key");
  expect_one_line_error({"purge", "--store", uri, "--expired", "--id", "a"}, 2, "exactly one");
  expect_one_line_error({"purge", "--store", uri, "--key", "", "--yes"}, 2, "must not be empty");
  expect_one_line_error({"purge", "--store", "nosuch:", "--expired"}, 2, "unknown store scheme");
  expect_one_line_error({"purge", "--store", "sqlite:" + dir.path() + "/no/such/dir/x.db", "--expired"}, 1,
                        "UNAVAILABLE");
  EXPECT_EQ(exit_of({"purge", "--store", uri, "--expired", "--batch", "0"}), 2);
}

TEST(IdemPurge, HelpNamesTheOptionsAndExitStatuses) {
  const RunResult r = run_idem({"purge", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word : {"--store", "--expired", "--id", "--key", "--yes", "--batch", "Exit status", "3 no such"})
    EXPECT_NE(r.out.find(word), std::string::npos) << word << " in\n" << r.out;
}

}  // namespace
}  // namespace idem::testing

// `idem replay` on sqlite:PATH: a second run continues from the state the first left;
// a lease left by a crashed run blocks its id until it expires; an unusable store
// stops the run with exit status 1.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "idem/open_store.hpp"
#include "replay/durable_replay_cases.hpp"
#include "replay/run_idem.hpp"

namespace idem::testing {
namespace {

TEST(ReplaySqlite, ASecondRunContinuesFromTheFirstRunsState) {
  TempDir dir;
  const std::string uri = "sqlite:" + dir.path() + "/replay.db";
  ASSERT_NO_FATAL_FAILURE(expect_a_second_run_continues(uri));
}

TEST(ReplaySqlite, ALeaseLeftByACrashedRunBlocksItsIdUntilItExpires) {
  TempDir dir;
  const std::string uri = "sqlite:" + dir.path() + "/replay.db?leases=shared";
  ASSERT_NO_FATAL_FAILURE(expect_a_crashed_runs_lease_to_block_until_it_expires(uri));
}

TEST(ReplaySqlite, AStoreThatCannotBeOpenedExitsWithStatus1) {
  TempDir dir;
  const std::string not_a_db = dir.write("garbage.db", std::string(4096, 'x'));
  for (const std::string& uri : {"sqlite:" + not_a_db, "sqlite:" + dir.path() + "/no/such/dir/x.db"}) {
    const RunResult r = run_idem({"replay", "--store", uri}, trace({R"({"id":"a"})"}));
    EXPECT_EQ(r.exit_code, 1) << uri << ": " << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("cannot open store"), std::string::npos) << r.err;
  }
}

TEST(ReplaySqlite, AStoreLockedByAnotherConsumerExitsWithStatus1) {
  TempDir dir;
  const std::string uri = "sqlite:" + dir.path() + "/replay.db?busy_timeout_ms=50";
  auto holder = open_store(uri);  // local leases: this process locks the file
  ASSERT_TRUE(holder.ok()) << holder.status().to_string();
  const RunResult r = run_idem({"replay", "--store", uri}, trace({R"({"id":"a"})"}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("idem replay:"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace idem::testing

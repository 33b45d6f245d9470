// `idem replay --store postgres://…` on a private server: a second run continues from
// the state the first left; a lease left by a crashed run blocks its id until it
// expires. The replay contract (docs/design.md §8) holds on PostgreSQL as on SQLite.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "idem/open_store.hpp"
#include "replay/durable_replay_cases.hpp"
#include "replay/run_idem.hpp"
#include "support/postgres_server.hpp"

namespace idem::testing {
namespace {

// A schema of its own on the binary's private server.
std::string fresh_uri() {
  auto* server = postgres_test::shared_server();
  return server ? server->uri("?schema=replay-" + postgres_test::fresh_schema()) : "postgres://idem@127.0.0.1:1/x";
}

TEST(ReplayPostgres, ASecondRunContinuesFromTheFirstRunsState) {
  ASSERT_NE(postgres_test::shared_server(), nullptr) << "no private PostgreSQL server";
  const std::string uri = fresh_uri();
  ASSERT_NO_FATAL_FAILURE(expect_a_second_run_continues(uri));
}

TEST(ReplayPostgres, ALeaseLeftByACrashedRunBlocksItsIdUntilItExpires) {
  ASSERT_NE(postgres_test::shared_server(), nullptr) << "no private PostgreSQL server";
  const std::string uri = fresh_uri();
  ASSERT_NO_FATAL_FAILURE(expect_a_crashed_runs_lease_to_block_until_it_expires(uri));
}

}  // namespace
}  // namespace idem::testing

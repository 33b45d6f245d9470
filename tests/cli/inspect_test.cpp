// `idem inspect` and `idem --version` against a SQLite store prepared by `idem replay`.
#include <gtest/gtest.h>

#include <string>

#include "cli/cli_store.hpp"
#include "idem/open_store.hpp"

namespace idem::testing {
namespace {

TEST(IdemVersion, PrintsTheProjectVersion) {
  const RunResult r = run_idem({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string("idem ") + IDEM_PROJECT_VERSION + "\n");
  EXPECT_EQ(r.err, "");
}

TEST(IdemInspect, ARecordByIdAsJson) {
  TempDir dir;
  const std::string uri = prepared_store(dir);
  RunResult r = run_idem({"inspect", "--store", uri, "--at-ms", kAt, "--id", "a", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, R"({"type":"record","id":"a","status":"done","retries":0,"fingerprint":"eaf06c6480b2cd11",)"
                   R"("expires_at_ms":604801000})"
                   "\n");
  r = run_idem({"inspect", "--store", uri, "--at-ms", kAt, "--id", "d", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, R"({"type":"record","id":"d","status":"pending","retries":2,"expires_at_ms":604802000})"
                   "\n");
}

TEST(IdemInspect, ARecordByIdAsText) {
  TempDir dir;
  const std::string uri = prepared_store(dir);
  const RunResult r = run_idem({"inspect", "--store", uri, "--at-ms", kAt, "--id", "a"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out),
            (Lines{R"(id:          "a")", "status:      done", "retries:     0", "fingerprint: eaf06c6480b2cd11",
                   "expires:     1970-01-08T00:00:01.000Z (in 6 d 23 h)"}));
}

TEST(IdemInspect, ALeaseShowsItsHolderAndTimeLeft) {
  TempDir dir;
  const std::string uri = "sqlite:" + dir.path() + "/leases.db?leases=shared";
  {
    auto store = open_store(uri);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    auto claim = (*store)->claim({"m", "worker-7", Duration(30'000), std::nullopt, from_unix_ms(1000)});
    ASSERT_TRUE(claim.ok() && claim->status == ClaimStatus::kNew);
  }
  RunResult r = run_idem({"inspect", "--store", uri, "--at-ms", kAt, "--id", "m", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, R"({"type":"record","id":"m","status":"in_progress","owner":"worker-7","lease_until_ms":31000,)"
                   R"("lease_left_ms":26000,"retries":0,"expires_at_ms":31000})"
                   "\n");
  r = run_idem({"inspect", "--store", uri, "--at-ms", kAt});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1 in progress"), std::string::npos) << r.out;
}

TEST(IdemInspect, AnIdWithoutALiveRecordExitsWith3) {
  TempDir dir;
  const std::string uri = prepared_store(dir);
  expect_one_line_error({"inspect", "--store", uri, "--at-ms", kAt, "--id", "never-seen"}, 3,
                        R"(no live record for id "never-seen")");
  expect_one_line_error({"inspect", "--store", uri, "--at-ms", kAfterTtl, "--id", "a"}, 3, R"(id "a")");
}

TEST(IdemInspect, AnEntityByKey) {
  TempDir dir;
  const std::string uri = prepared_store(dir);
  RunResult r = run_idem({"inspect", "--store", uri, "--at-ms", kAt, "--key", "p", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out), (Lines{R"({"type":"entity","key":"p","revision":1,"version":1})",
                                    R"({"type":"buffered","version":3,"id":"k3","buffered_at_ms":3000,"bytes":58})"}));
  r = run_idem({"inspect", "--store", uri, "--at-ms", kAt, "--key", "p"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("applied version: 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("buffered:        1 message\n  version 3  id \"k3\""), std::string::npos) << r.out;
  expect_one_line_error({"inspect", "--store", uri, "--key", "q"}, 3, R"(key "q" has no entity record)");
}

TEST(IdemInspect, TheStoreAsAWhole) {
  TempDir dir;
  const std::string uri = prepared_store(dir);
  RunResult r = run_idem({"inspect", "--store", uri, "--at-ms", kAt, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out),
            (Lines{R"({"type":"records","counted":true,"at_ms":5000,"pending":2,"in_progress":0,"done":2,)"
                   R"("dead_lettered":0,"expired":0})",
                   R"({"type":"buffer","kept":true,"count":1,"bytes":58})",
                   R"({"type":"key","key":"p","count":1,"lowest_version":3,"oldest_at_ms":3000})",
                   R"({"type":"outbox","kept":true,"unsent":0,"more":false})"}));
  r = run_idem({"inspect", "--store", uri, "--at-ms", kAfterTtl});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out)[0], "store:    " + uri);
  EXPECT_NE(r.out.find("records:  0 done, 0 dead-lettered, 0 in progress, 0 pending"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expired:  4 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("outbox:   0 unsent outgoing messages"), std::string::npos) << r.out;
}

TEST(IdemInspect, UnsentOutgoingMessagesAreListedWithTheirIds) {
  TempDir dir;
  const std::string uri = "sqlite:" + dir.path() + "/outbox.db";
  {
    auto store = open_store(uri);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    ASSERT_EQ((*store)->claim({"in-1", "w", Duration(30'000), std::nullopt, from_unix_ms(1000)})->status,
              ClaimStatus::kNew);
    std::vector<OutboxEntry> out(2);
    for (std::uint32_t i = 0; i < 2; ++i) {
      out[i].incoming_id = "in-1";
      out[i].position = i;
      out[i].destination = "redis-stream://:s3cret@mq:6379/out";
      out[i].message = {outgoing_id("in-1", i), "body", {}};
      out[i].created_at = from_unix_ms(2000);
    }
    CommitRequest c{"in-1", "w", std::nullopt, from_unix_ms(2000), Duration(60'000)};
    c.outbox = out;
    ASSERT_TRUE((*store)->commit(c).ok());
  }
  RunResult r = run_idem({"inspect", "--store", uri, "--at-ms", kAt, "--json", "--limit", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const Lines lines = lines_of(r.out);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[lines.size() - 2], R"({"type":"outbox","kept":true,"unsent":1,"more":true})");
  EXPECT_EQ(lines.back(), R"({"type":"outgoing","id":"in-1#0","incoming_id":"in-1","position":0,)"
                          R"("to":"redis-stream://:***@mq:6379/out","bytes":4,"created_at_ms":2000})");
  r = run_idem({"inspect", "--store", uri, "--at-ms", kAt, "--id", "in-1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("outbox:   2 unsent outgoing messages\n  \"in-1#0\" to redis-stream://:***@mq:6379/out"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("s3cret"), std::string::npos) << r.out;
}

#ifdef IDEM_CLI_WITH_BLOOM
TEST(IdemInspect, AStoreThatCannotCountSaysSo) {
  const RunResult r = run_idem({"inspect", "--store", "bloom:?capacity=1000"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("this store cannot count them (counting records: not supported by this store)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("keeps no entity records or reorder buffer"), std::string::npos) << r.out;
}
#endif

TEST(IdemInspect, BadOptionsAndStores) {
  TempDir dir;
  expect_one_line_error({"inspect", "--store", "nosuch:"}, 2, "unknown store scheme");
  expect_one_line_error({"inspect", "--store", "sqlite:" + dir.path() + "/x.db?bogus=1"}, 2, "bogus");
  expect_one_line_error({"inspect", "--store", "sqlite:" + dir.path() + "/no/such/dir/x.db"}, 1, "UNAVAILABLE");
  expect_one_line_error({"inspect", "--store", "memory:", "--id", ""}, 2, "must not be empty");
  const RunResult both = run_idem({"inspect", "--store", "memory:", "--id", "a", "--key", "b"});
  EXPECT_EQ(both.exit_code, 2);
  const RunResult no_store = run_idem({"inspect"});
  EXPECT_EQ(no_store.exit_code, 2);
  EXPECT_NE(no_store.err.find("--store is required"), std::string::npos) << no_store.err;
}

TEST(IdemInspect, HelpNamesTheOptionsAndExitStatuses) {
  const RunResult r = run_idem({"inspect", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word : {"--store", "--id", "--key", "--json", "--at-ms", "--limit", "Exit status", "3 no such"})
    EXPECT_NE(r.out.find(word), std::string::npos) << word << " in\n" << r.out;
}

}  // namespace
}  // namespace idem::testing

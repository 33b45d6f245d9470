// The Bloom front filter over RocksDB: negatives skip durable reads, positives never
// drop a message, the filter warms from the durable store, transactional mode keeps
// the backend's batch, and an overloaded filter stops vouching instead of lying.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "idem/bloom_rocksdb.hpp"
#include "idem/idem.hpp"
#include "idem/open_store.hpp"
#include "support/temp_dir.hpp"
#include "stats_of.hpp"

namespace idem {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

const TimePoint kT0 = from_unix_ms(1'700'000'000'000);
constexpr Duration kLease{10'000};
constexpr Duration kTtl{3'600'000};

using idem::testing::TempDir;

ClaimResult claim(Store& s, std::string_view id, TimePoint now, std::string_view owner = "A") {
  auto c = s.claim({id, owner, kLease, std::nullopt, now});
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? *c : ClaimResult::conflict();
}

TEST(BloomFront, WarmsFromTheDurableStoreAndSkipsReadsForNewIds) {
  TempDir dir{"front"};
  const std::string path = dir.sub("db");
  {
    auto plain = open_store("rocksdb:" + path);
    ASSERT_TRUE(plain.ok());
    for (int i = 0; i < 500; ++i)
      ASSERT_TRUE((*plain)->commit({"old-" + std::to_string(i), "A", std::nullopt, kT0, kTtl, "r"}).ok());
    ASSERT_TRUE((*plain)->release({"failing", "A", true, kT0, kTtl}).ok());
  }
  auto s = open_store("bloom+rocksdb:" + path + "?capacity=10000&fp=0.001&sync=false");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_FALSE((*s)->capabilities().probabilistic);
  EXPECT_TRUE((*s)->capabilities().durable);
  const TimePoint t1 = kT0 + milliseconds(10);
  for (int i = 0; i < 500; ++i) {
    ClaimResult c = claim(**s, "old-" + std::to_string(i), t1);
    ASSERT_EQ(c.status, ClaimStatus::kCompleted) << i;
    EXPECT_EQ(c.result, std::optional<std::string>("r"));
  }
  EXPECT_EQ(claim(**s, "failing", t1).retries, 1u) << "retry counts are in the filter too";
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(claim(**s, "new-" + std::to_string(i), t1).status, ClaimStatus::kNew);
  auto st = bloom_test::stats_of(**s);
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->vouching);
  EXPECT_GE(st->skipped_reads, 990u) << "new ids skip the durable read";
  EXPECT_GE(st->durable_claims, 501u) << "known ids read the durable store";
}

TEST(BloomFront, FalsePositivesGoToTheDurableStoreAndNeverDropAMessage) {
  TempDir dir{"front"};
  // A tiny, leaky filter: 1000 ids at 50%.
  auto s = bloom_rocksdb::open(
      {.durable = {.path = dir.sub("db")}, .filter = {.capacity = 1000, .fp = 0.5, .generations = 1}});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  for (int i = 0; i < 1000; ++i)
    ASSERT_TRUE((*s)->commit({"c-" + std::to_string(i), "A", std::nullopt, kT0, kTtl, std::nullopt}).ok());
  int is_new = 0;
  for (int i = 0; i < 5000; ++i) is_new += claim(**s, "fresh-" + std::to_string(i), kT0).status == ClaimStatus::kNew;
  EXPECT_EQ(is_new, 5000) << "every fresh id is new, whatever the filter says";
  auto st = bloom_test::stats_of(**s);
  EXPECT_GT(st->durable_claims, 500u) << "the leaky filter sent positives to the durable store";
  EXPECT_GT(st->skipped_reads, 500u);
}

TEST(BloomFront, OverloadedFilterStopsVouchingUntilDroppedRecordsExpire) {
  TempDir dir{"front"};
  auto s =
      bloom_rocksdb::open({.durable = {.path = dir.sub("db")},
                           .filter = {.capacity = 1000, .fp = 0.01, .window = milliseconds(60'000), .generations = 1}});
  ASSERT_TRUE(s.ok());
  // 3000 commits into a filter sized for 1000 ids in 2 filters: early drops.
  for (int i = 0; i < 3000; ++i)
    ASSERT_TRUE((*s)->commit({"c-" + std::to_string(i), "A", std::nullopt, kT0, kTtl, std::nullopt}).ok());
  auto st = bloom_test::stats_of(**s);
  EXPECT_GT(st->early_drops, 0u);
  EXPECT_FALSE(st->vouching);
  // The oldest ids are gone from the filter but not from the store: still duplicates.
  for (int i = 0; i < 3000; i += 7)
    EXPECT_EQ(claim(**s, "c-" + std::to_string(i), kT0, "B").status, ClaimStatus::kCompleted) << i;
  const auto skipped_before = bloom_test::stats_of(**s)->skipped_reads;
  EXPECT_EQ(claim(**s, "fresh", kT0).status, ClaimStatus::kNew);
  EXPECT_EQ(bloom_test::stats_of(**s)->skipped_reads, skipped_before) << "no vouching while dropped records live";
  // Once every dropped record has expired, negatives skip reads again.
  const TimePoint later = kT0 + kTtl + milliseconds(1);
  EXPECT_EQ(claim(**s, "fresh-2", later).status, ClaimStatus::kNew);
  EXPECT_EQ(bloom_test::stats_of(**s)->skipped_reads, skipped_before + 1);
}

TEST(BloomFront, TransactionalModeKeepsTheRocksdbBatchAndTeachesTheFilter) {
  TempDir dir{"front"};
  auto s = bloom_rocksdb::open({.durable = {.path = dir.sub("db"), .user_column_families = {"orders"}},
                                .filter = {.capacity = 10'000, .fp = 0.001}});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE((*s)->capabilities().transactional);
  struct Msg {
    std::string id;
  };
  ConsumerOptions opts;
  opts.store = *s;
  opts.transactional = true;
  Extractors<Msg> ex;
  ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  int runs = 0;
  auto consumer = Consumer<Msg>::create(opts, ex, [&](const Msg& m, HandlerContext& ctx) {
    rocksdb::Batch* b = rocksdb::batch(ctx);
    if (b == nullptr) return HandlerResult::fail("no rocksdb batch behind the front filter");
    ++runs;
    if (!b->put("orders", m.id, "paid").ok()) return HandlerResult::fail("put");
    return HandlerResult::ok();
  });
  ASSERT_TRUE(consumer.ok());
  EXPECT_EQ(consumer->process({"o-1"}).reason, Reason::kProcessed);
  EXPECT_EQ(consumer->process({"o-1"}).reason, Reason::kDuplicate) << "the filter learnt o-1 in the transaction";
  EXPECT_EQ(runs, 1);
}

TEST(BloomFront, BatchesMixSkippedAndReadClaimsInOrder) {
  TempDir dir{"front"};
  auto s = open_store("bloom+rocksdb:" + dir.sub("db") + "?capacity=10000");
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->commit({"done", "B", std::nullopt, kT0, kTtl, "r"}).ok());
  const std::vector<ClaimRequest> batch = {{"a", "A", kLease, std::nullopt, kT0},
                                           {"done", "A", kLease, std::nullopt, kT0},
                                           {"a", "A", kLease, std::nullopt, kT0},
                                           {"b", "A", kLease, std::nullopt, kT0}};
  auto out = (*s)->claim_batch(batch);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0]->status, ClaimStatus::kNew);
  EXPECT_EQ(out[1]->status, ClaimStatus::kCompleted);
  EXPECT_EQ(out[1]->result, std::optional<std::string>("r"));
  EXPECT_EQ(out[2]->status, ClaimStatus::kInProgress);
  EXPECT_EQ(out[3]->status, ClaimStatus::kNew);
  const auto st = bloom_test::stats_of(**s);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->skipped_reads, 3u) << "both copies of a, and b: certainly absent, no durable read";
  EXPECT_EQ(st->durable_claims, 1u) << "done: a positive goes to the durable store";
  auto commits = (*s)->commit_batch(std::vector<CommitRequest>{{"a", "A", std::nullopt, kT0, kTtl, std::nullopt},
                                                               {"b", "A", std::nullopt, kT0, kTtl, std::nullopt}});
  EXPECT_TRUE(commits[0].ok() && commits[1].ok());
  EXPECT_EQ(claim(**s, "a", kT0, "C").status, ClaimStatus::kCompleted);
}

}  // namespace
}  // namespace idem

#ifdef IDEM_TEST_WITH_SQLITE
namespace idem {
namespace {

// sqlite: offers the filter no claim-without-read and no record scan, so the front
// filter is correct but never vouches: every claim reads the durable store.
TEST(BloomFront, OverSqliteIsCorrectAndReadsEveryClaim) {
  TempDir dir{"front"};
  const std::string path = dir.sub("idem.db");
  {
    auto s = open_store("bloom+sqlite:" + path + "?capacity=10000&fp=0.01");
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_TRUE((*s)->capabilities().durable);
    EXPECT_FALSE((*s)->capabilities().probabilistic);
    ASSERT_EQ(claim(**s, "a", kT0).status, ClaimStatus::kNew);
    ASSERT_TRUE((*s)->commit({"a", "A", std::nullopt, kT0, kTtl, "r"}).ok());
    for (int i = 0; i < 100; ++i) ASSERT_EQ(claim(**s, "n-" + std::to_string(i), kT0).status, ClaimStatus::kNew);
    auto st = bloom_test::stats_of(**s);
    ASSERT_TRUE(st.ok());
    EXPECT_FALSE(st->vouching);
    EXPECT_EQ(st->skipped_reads, 0u);
    EXPECT_EQ(st->durable_claims, 101u);
  }
  auto s = open_store("bloom+sqlite:" + path + "?capacity=10000");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ClaimResult dup = claim(**s, "a", kT0 + milliseconds(1), "B");
  EXPECT_EQ(dup.status, ClaimStatus::kCompleted) << "durable across reopen, through the filter";
  EXPECT_EQ(dup.result, std::optional<std::string>("r"));
}

}  // namespace
}  // namespace idem
#endif

// What memory: promises beyond the store contract: bounded by a record count, and
// expired records make room before live ones are evicted; entity records and the
// reorder buffer are outside that bound; requests that break a REQUIRES are refused;
// batches, which memory: runs shard by shard, answer as one call per request does.
#include "idem/memory_store.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace idem {
namespace {

using std::chrono::milliseconds;

CommitRequest commit(std::string_view id, TimePoint now, Duration ttl) {
  CommitRequest c;
  c.id = id;
  c.owner = "A";
  c.now = now;
  c.ttl = ttl;
  return c;
}

TEST(MemoryStore, RejectsZeroLimits) {
  EXPECT_EQ(memory::open({.max_records = 0, .shards = 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(memory::open({.max_records = 10, .shards = 0}).status().code(), StatusCode::kInvalidArgument);
}

TEST(MemoryStore, EvictsTheOldestWhenFull) {
  auto store = memory::open({.max_records = 3, .shards = 1}).value();
  const TimePoint t0 = ManualClock().now();
  for (const char* id : {"a", "b", "c", "d"}) ASSERT_TRUE(store->commit(commit(id, t0, milliseconds(60'000))).ok());
  auto a = store->claim({"a", "B", milliseconds(1000), std::nullopt, t0, std::nullopt});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->status, ClaimStatus::kNew) << "the oldest record was evicted and forgotten";
  auto d = store->claim({"d", "B", milliseconds(1000), std::nullopt, t0, std::nullopt});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->status, ClaimStatus::kCompleted);
}

TEST(MemoryStore, ExpiredRecordsMakeRoomBeforeLiveOnesAreEvicted) {
  auto store = memory::open({.max_records = 4, .shards = 1}).value();
  const TimePoint t0 = ManualClock().now();
  ASSERT_TRUE(store->commit(commit("live", t0, milliseconds(3'600'000))).ok());
  for (const char* id : {"x", "y", "z"}) ASSERT_TRUE(store->commit(commit(id, t0, milliseconds(1000))).ok());
  const TimePoint t1 = t0 + milliseconds(2000);
  for (const char* id : {"n1", "n2", "n3"}) ASSERT_TRUE(store->commit(commit(id, t1, milliseconds(3'600'000))).ok());
  for (const char* id : {"live", "n1", "n2", "n3"}) {
    auto c = store->claim({id, "B", milliseconds(1000), std::nullopt, t1, std::nullopt});
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->status, ClaimStatus::kCompleted) << id;
  }
}

TEST(MemoryStore, ManyShortLivedRecordsBehindALiveOneStayBounded) {
  auto store = memory::open({.max_records = 100, .shards = 1}).value();
  TimePoint t = ManualClock().now();
  ASSERT_TRUE(store->commit(commit("live", t, milliseconds(3'600'000'000))).ok());
  for (int i = 0; i < 100'000; ++i) {
    t += milliseconds(1);
    ASSERT_TRUE(store->commit(commit("tmp-" + std::to_string(i), t, milliseconds(5))).ok());
    if (i % 10 == 0) {
      ASSERT_TRUE(store->purge_expired(t, 16).ok());
    }
  }
  auto c = store->claim({"live", "B", milliseconds(1000), std::nullopt, t, std::nullopt});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, ClaimStatus::kCompleted) << "100k expired records never pushed the live one out";
}

TEST(MemoryStore, EntityRecordsAndBufferAreNotEvictedByTheRecordBound) {
  auto store = memory::open({.max_records = 2, .shards = 1}).value();
  const TimePoint t0 = ManualClock().now();
  ASSERT_TRUE(store->entities()->write_entity({.key = "k", .expect_revision = 0, .version = 1, .state = {}, .unbuffer = {}}).ok());
  ASSERT_TRUE(store->entities()->buffer_put({.key = "k", .version = 3, .id = "m3", .message = "x", .now = t0, .limits = {}}).ok());
  for (int i = 0; i < 100; ++i) {
    const std::string id = "id-" + std::to_string(i);
    CommitRequest c = commit(id, t0, milliseconds(60'000));
    c.entity = EntityWrite{
        .key = "k", .expect_revision = static_cast<std::uint64_t>(i + 1), .version = {}, .state = {}, .unbuffer = {}};
    ASSERT_TRUE(store->commit(c).ok()) << i;
  }
  auto r = store->entities()->read_entity("k");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->revision, 101u);
  EXPECT_EQ(r->version, 1u);
  auto b = store->entities()->buffer_read("k", 10);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->size(), 1u);
  EXPECT_EQ(b->front().id, "m3");
  auto first = store->claim({"id-0", "B", milliseconds(1000), std::nullopt, t0, std::nullopt});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->status, ClaimStatus::kNew) << "dedup records are still bounded";
}

TEST(MemoryStore, EntityRequestsBreakingARequiresAreRefused) {
  auto store = memory::open().value();
  const TimePoint t0 = ManualClock().now();
  auto code = [](const Status& s) { return s.code(); };
  EXPECT_EQ(store->entities()->read_entity("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(store->entities()->write_entity({.key = "", .expect_revision = 0, .version = 1, .state = {}, .unbuffer = {}})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(store->entities()->write_entity({.key = "k", .expect_revision = 0, .version = {}, .state = "", .unbuffer = {}})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(store->entities()->buffer_put({.key = "", .version = 1, .id = "m", .message = "", .now = t0, .limits = {}})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(store->entities()->buffer_put({.key = "k", .version = 0, .id = "m", .message = "", .now = t0, .limits = {}})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(store->entities()->buffer_put({.key = "k", .version = 1, .id = "", .message = "", .now = t0, .limits = {}})),
            StatusCode::kInvalidArgument);
  ClaimRequest q{"m", "A", milliseconds(1000), std::nullopt, t0, ""};
  EXPECT_EQ(store->claim(q).status().code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(store->claim({"m", "A", milliseconds(1000), std::nullopt, t0, std::nullopt}).value().status,
            ClaimStatus::kNew);
  CommitRequest c = commit("m", t0, milliseconds(1000));
  c.entity = EntityWrite{.key = "", .expect_revision = 0, .version = 1, .state = {}, .unbuffer = {}};
  EXPECT_EQ(store->commit(c).code(), StatusCode::kInvalidArgument);
  // Nothing was written by any of them.
  EXPECT_EQ(store->entities()->read_entity("k").value().revision, 0u);
  EXPECT_EQ(store->entities()->buffer_summary(10).value().count, 0u);
  EXPECT_EQ(store->inspect("m", t0).value()->state, RecordState::kInProgress);
}

// A batch far longer than the store's look-ahead, spread over every shard, with repeats
// of ids in the batch, ids claimed or done before it and refused requests: each answer
// equals the one a second store gives to the same requests one call at a time.
TEST(MemoryStore, BatchesAcrossShardsAnswerAsOneCallPerRequest) {
  auto batched = memory::open({.max_records = 1000, .shards = 4}).value();
  auto single = memory::open({.max_records = 1000, .shards = 4}).value();
  const TimePoint t0 = ManualClock().now();
  std::vector<std::string> ids;
  for (int i = 0; i < 60; ++i) ids.push_back("id-" + std::to_string(i));
  for (Store* s : {batched.get(), single.get()}) {
    for (int i = 0; i < 60; i += 3) {  // every sixth id done, the others of these held by B
      if (i % 2 == 0) {
        ASSERT_TRUE(s->commit(commit(ids[i], t0, milliseconds(60'000))).ok());
      } else {
        ASSERT_TRUE(s->claim({ids[i], "B", milliseconds(1000), std::nullopt, t0, std::nullopt}).ok());
      }
    }
  }
  const TimePoint t1 = t0 + milliseconds(10);
  std::vector<ClaimRequest> claims;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 60; ++i) claims.push_back({ids[i], "A", milliseconds(1000), std::nullopt, t1, std::nullopt});
    claims.push_back({"", "A", milliseconds(1000), std::nullopt, t1, std::nullopt});
  }
  const auto got = batched->claim_batch(claims);
  ASSERT_EQ(got.size(), claims.size());
  for (std::size_t i = 0; i < claims.size(); ++i) {
    const auto want = single->claim(claims[i]);
    ASSERT_EQ(got[i].ok(), want.ok()) << i;
    if (!want.ok()) {
      EXPECT_EQ(got[i].status().code(), want.status().code()) << i;
      continue;
    }
    EXPECT_EQ(got[i]->status, want->status) << i;
    EXPECT_EQ(got[i]->owner, want->owner) << i;
  }
  std::vector<CommitRequest> commits;
  for (int i = 0; i < 60; ++i) commits.push_back(commit(ids[i], t1, milliseconds(60'000)));
  commits.push_back(commit(ids[1], t1, milliseconds(60'000)));  // done by the batch itself
  commits.push_back(commit("", t1, milliseconds(60'000)));
  const auto statuses = batched->commit_batch(commits);
  ASSERT_EQ(statuses.size(), commits.size());
  for (std::size_t i = 0; i < commits.size(); ++i)
    EXPECT_EQ(statuses[i].code(), single->commit(commits[i]).code()) << i;
  for (const std::string& id : ids) {
    const auto a = batched->inspect(id, t1).value();
    const auto b = single->inspect(id, t1).value();
    ASSERT_EQ(a.has_value(), b.has_value()) << id;
    if (a) {
      EXPECT_EQ(a->state, b->state) << id;
    }
  }
}

}  // namespace
}  // namespace idem

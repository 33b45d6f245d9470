// What memory: promises beyond the store contract: bounded by a record count, and
// expired records make room before live ones are evicted.
#include "idem/memory_store.hpp"

#include <gtest/gtest.h>

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
  EXPECT_EQ(open_memory_store({.max_records = 0, .shards = 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(open_memory_store({.max_records = 10, .shards = 0}).status().code(), StatusCode::kInvalidArgument);
}

TEST(MemoryStore, EvictsTheOldestWhenFull) {
  auto store = open_memory_store({.max_records = 3, .shards = 1}).value();
  const TimePoint t0 = ManualClock().now();
  for (const char* id : {"a", "b", "c", "d"}) ASSERT_TRUE(store->commit(commit(id, t0, milliseconds(60'000))).is_ok());
  auto a = store->claim({"a", "B", milliseconds(1000), std::nullopt, t0});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->status, ClaimStatus::kNew) << "the oldest record was evicted and forgotten";
  auto d = store->claim({"d", "B", milliseconds(1000), std::nullopt, t0});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->status, ClaimStatus::kCompleted);
}

TEST(MemoryStore, ExpiredRecordsMakeRoomBeforeLiveOnesAreEvicted) {
  auto store = open_memory_store({.max_records = 4, .shards = 1}).value();
  const TimePoint t0 = ManualClock().now();
  ASSERT_TRUE(store->commit(commit("live", t0, milliseconds(3'600'000))).is_ok());
  for (const char* id : {"x", "y", "z"}) ASSERT_TRUE(store->commit(commit(id, t0, milliseconds(1000))).is_ok());
  const TimePoint t1 = t0 + milliseconds(2000);
  for (const char* id : {"n1", "n2", "n3"}) ASSERT_TRUE(store->commit(commit(id, t1, milliseconds(3'600'000))).is_ok());
  for (const char* id : {"live", "n1", "n2", "n3"}) {
    auto c = store->claim({id, "B", milliseconds(1000), std::nullopt, t1});
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->status, ClaimStatus::kCompleted) << id;
  }
}

TEST(MemoryStore, ManyShortLivedRecordsBehindALiveOneStayBounded) {
  auto store = open_memory_store({.max_records = 100, .shards = 1}).value();
  TimePoint t = ManualClock().now();
  ASSERT_TRUE(store->commit(commit("live", t, milliseconds(3'600'000'000))).is_ok());
  for (int i = 0; i < 100'000; ++i) {
    t += milliseconds(1);
    ASSERT_TRUE(store->commit(commit("tmp-" + std::to_string(i), t, milliseconds(5))).is_ok());
    if (i % 10 == 0) {
      ASSERT_TRUE(store->purge_expired(t, 16).ok());
    }
  }
  auto c = store->claim({"live", "B", milliseconds(1000), std::nullopt, t});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, ClaimStatus::kCompleted) << "100k expired records never pushed the live one out";
}

}  // namespace
}  // namespace idem

// The entity extension of idem::redis on one real redis-server: the key layout (one
// hash tag per entity, binary keys with braces, no collision with id keys), the
// atomic commit with unbuffer, exact totals and limits under concurrent puts.
#include <atomic>
#include <barrier>
#include <set>
#include <thread>

#include "cluster/key_slot.hpp"
#include "entity_layout.hpp"
#include "support/entity_requests.hpp"
#include "test_util.hpp"

namespace idem::redis_test {
namespace {

using namespace std::string_literals;
using redis::detail::entity_id_key;
using redis::detail::entity_keys;
using redis::detail::key_slot;
using std::chrono::milliseconds;

const std::vector<std::string>& awkward_keys() {
  static const std::vector<std::string> keys = {"k",
                                                "}",
                                                "{",
                                                "}{",
                                                "{}",
                                                "a}b",
                                                "a%7Db",
                                                "%",
                                                "%25",
                                                "%7D",
                                                "\0"s,
                                                "\0}\xff{"s,
                                                "}}",
                                                "{{}",
                                                "x{y}",
                                                "order-17",
                                                std::string(512, '}'),
                                                std::string(600, '\xfe')};
  return keys;
}

TEST(RedisEntityLayout, EveryKeyOfAnEntityIsInTheEntitysSlot) {
  for (const std::string& k : awkward_keys()) {
    const auto ks = entity_keys("p:", k);
    const int slot = key_slot(ks.record);
    EXPECT_EQ(key_slot(ks.buffer), slot) << "key of " << k.size() << " bytes";
    EXPECT_EQ(key_slot(ks.times), slot);
    for (const std::string& id : {"m1"s, "}"s, "{x}"s, "\0\xff"s, std::string(300, '}')})
      EXPECT_EQ(key_slot(entity_id_key("p:", k, id)), slot);
    // The tag is the escaped key: non-empty and brace-free, so the slot is its CRC.
    EXPECT_EQ(slot, redis::detail::crc16(redis::detail::escape_tag(k)) % redis::detail::kSlotCount);
  }
}

TEST(RedisEntityLayout, LayoutsOfDistinctKeysAndIdsNeverCollide) {
  std::set<std::string> all;
  std::size_t n = 0;
  const std::vector<std::string> ids = {"m", "}", "%7D", "e", ":e", "d:m", "\0"s};
  for (const std::string& k : awkward_keys()) {
    const auto ks = entity_keys("p:", k);
    for (const std::string* key : {&ks.record, &ks.buffer, &ks.times}) {
      EXPECT_NE(key->back(), '}');
      all.insert(*key);
      ++n;
    }
    for (const std::string& id : ids) {
      const std::string key = entity_id_key("p:", k, id);
      EXPECT_NE(key.back(), '}') << "an id key without entity always ends in '}'";
      all.insert(key);
      ++n;
    }
  }
  all.insert(redis::detail::buffer_totals_key("p:"));
  all.insert(redis::detail::buffer_index_key("p:"));
  n += 2;
  EXPECT_EQ(all.size(), n);
}

class RedisEntities : public WithRedisServer {
 protected:
  static EntityWrite write(std::string_view key, std::uint64_t expect, std::uint64_t version,
                           std::optional<std::uint64_t> unbuffer = std::nullopt) {
    return testing::ew(key, expect, version, std::nullopt, unbuffer);
  }
  BufferPut put(std::string_view key, std::uint64_t version, std::string_view id, BufferLimits limits = {}) const {
    return testing::bp(key, version, id, "payload", t0_, limits);
  }
  bool exists(const std::string& key) const {
    auto r = server_->command({"EXISTS", key});
    EXPECT_TRUE(r.ok());
    return r.ok() && r->integer == 1;
  }

  ManualClock clock_;
  const TimePoint t0_ = clock_.now();
};

TEST_F(RedisEntities, KeysWithBracesAndTheirEscapesAreDistinctEntities) {
  for (const std::string& k : {"a}b"s, "a%7Db"s, "}"s, "%7D"s}) {
    ASSERT_TRUE(store_->entities()->buffer_put(put(k, 1, "m-" + k)).ok()) << k;
    auto rec = store_->entities()->read_entity(k);
    ASSERT_TRUE(rec.ok());
    ASSERT_TRUE(store_->entities()->write_entity(write(k, rec->revision, 7)).ok());
  }
  for (const std::string& k : {"a}b"s, "a%7Db"s, "}"s, "%7D"s}) {
    auto rec = store_->entities()->read_entity(k);
    ASSERT_TRUE(rec.ok());
    EXPECT_EQ(rec->revision, 1u) << k;
    auto b = store_->entities()->buffer_read(k, 10);
    ASSERT_TRUE(b.ok());
    ASSERT_EQ(b->size(), 1u);
    EXPECT_EQ((*b)[0].id, "m-" + k);
    EXPECT_EQ((*b)[0].key, k);
  }
  const auto ks = entity_keys(options_.prefix, "a}b");
  EXPECT_EQ(ks.record, options_.prefix + "{a%7Db}:e");
  EXPECT_TRUE(exists(ks.record));
  EXPECT_TRUE(exists(ks.buffer));
  EXPECT_TRUE(exists(ks.times));
}

TEST_F(RedisEntities, CommitWithUnbufferMovesRecordEntryAndTotalsTogether) {
  ASSERT_TRUE(store_->entities()->buffer_put(put("k", 2, "m2")).ok());
  ASSERT_TRUE(store_->entities()->buffer_put(put("k", 3, "m3")).ok());
  ClaimRequest q{"m2", "A", Duration(10'000), std::nullopt, t0_, std::nullopt};
  q.entity_key = "k";
  auto granted = store_->claim(q);
  ASSERT_TRUE(granted.ok());
  ASSERT_EQ(granted->status, ClaimStatus::kNew);
  EXPECT_EQ(granted->entity.revision, 0u);

  CommitRequest c;
  c.id = "m2";
  c.owner = "A";
  c.now = t0_;
  c.ttl = Duration(3'600'000);
  c.entity = write("k", 5, 2, 2);  // stale revision: nothing moves
  EXPECT_EQ(store_->commit(c).code(), StatusCode::kAborted);
  auto sum = store_->entities()->buffer_summary(10);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, 2u);
  auto info = store_->inspect("m2", t0_);
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->state, RecordState::kInProgress);

  c.entity = write("k", 0, 2, 2);
  ASSERT_TRUE(store_->commit(c).ok());
  sum = store_->entities()->buffer_summary(10);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, 1u);
  EXPECT_EQ(sum->bytes, std::string("k").size() + 2 + std::string("payload").size());
  ASSERT_EQ(sum->keys.size(), 1u);
  EXPECT_EQ(sum->keys[0].lowest_version, 3u);
  info = store_->inspect("m2", t0_);
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->state, RecordState::kCompleted);
  auto rec = store_->entities()->read_entity("k");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->version, 2u);

  // The last entry gone: the key leaves the index (standalone keeps it exact).
  ASSERT_TRUE(store_->entities()->buffer_remove("k", 3).ok());
  auto z = server_->command({"ZCARD", redis::detail::buffer_index_key(options_.prefix)});
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->integer, 0);
  sum = store_->entities()->buffer_summary(10);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, 0u);
  EXPECT_EQ(sum->bytes, 0u);
  EXPECT_TRUE(sum->keys.empty());
}

TEST_F(RedisEntities, ConcurrentPutsNeverExceedTheTotalOrPerKeyLimit) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 30;
  BufferLimits limits;
  limits.total = 50;
  limits.per_key = 7;
  std::atomic<int> stored{0}, refused{0}, other{0};
  std::barrier sync(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      sync.arrive_and_wait();
      for (int i = 0; i < kPerThread; ++i) {
        const std::string key = "key-" + std::to_string(i % 10);  // 10 keys, 7 each at most
        const std::string id = "m-" + std::to_string(t) + "-" + std::to_string(i);
        Status s = store_->entities()->buffer_put(put(key, static_cast<std::uint64_t>(t * 1000 + i + 1), id, limits));
        if (s.ok()) {
          ++stored;
        } else if (s.code() == StatusCode::kResourceExhausted) {
          ++refused;
        } else {
          ++other;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(stored.load(), 50);
  EXPECT_EQ(refused.load(), kThreads * kPerThread - 50);
  auto sum = store_->entities()->buffer_summary(100);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, 50u);
  std::size_t listed = 0;
  for (const auto& k : sum->keys) {
    EXPECT_LE(k.count, 7u);
    listed += k.count;
  }
  EXPECT_EQ(listed, 50u);
}

}  // namespace
}  // namespace idem::redis_test

// The entity extension of idem::redis on the shared Redis Cluster (cluster_test.cpp):
// every key of an entity, and the record of every id claimed with its key, on the
// master of the entity's slot; in-order processing across slots; buffer totals, the
// index kept in another slot, its stale members dropped lazily; exact per-key limit.
#include <atomic>
#include <barrier>
#include <set>
#include <thread>

#include "cluster/key_slot.hpp"
#include "entity_layout.hpp"
#include "support/entity_requests.hpp"
#include "support/redis_cluster.hpp"
#include "test_util.hpp"

namespace idem::redis_test {

RedisCluster* shared_cluster();

namespace {

using namespace std::string_literals;
using redis::detail::key_slot;

class RedisClusterEntities : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = shared_cluster();
    ASSERT_NE(cluster_, nullptr);
    options_ = options_for(cluster_->uri());
    store_ = open_or_die(options_);
    ASSERT_NE(store_, nullptr);
  }

  ClaimRequest claim(std::string_view id, std::string_view key, TimePoint now) const {
    ClaimRequest q{id, "A", Duration(10'000), std::nullopt, now, std::nullopt};
    q.entity_key = key;
    return q;
  }
  CommitRequest commit(std::string_view id, TimePoint now, EntityWrite w) const {
    CommitRequest c;
    c.id = id;
    c.owner = "A";
    c.now = now;
    c.ttl = Duration(3'600'000);
    c.result = id;
    c.entity = w;
    return c;
  }
  static EntityWrite write(std::string_view key, std::uint64_t expect, std::uint64_t version,
                           std::optional<std::uint64_t> unbuffer = std::nullopt) {
    return testing::ew(key, expect, version, std::nullopt, unbuffer);
  }
  BufferPut put(std::string_view key, std::uint64_t version, std::string_view id, TimePoint now,
                BufferLimits limits = {}) const {
    return testing::bp(key, version, id, "msg", now, limits);
  }
  // True iff `key` exists on the master that serves its slot.
  bool on_its_master(const std::string& key) {
    RedisServer* m = cluster_->master_of(key_slot(key));
    if (m == nullptr) return false;
    auto r = m->command({"EXISTS", key});
    return r.ok() && r->integer == 1;
  }

  ManualClock clock_;
  RedisCluster* cluster_ = nullptr;
  redis::Options options_;
  std::shared_ptr<redis::RedisStore> store_;
};

TEST_F(RedisClusterEntities, InOrderMessagesOfAKeyCommitInItsSlot) {
  const std::string key = "order-{17}\0}"s;
  const TimePoint t0 = clock_.now();
  ASSERT_TRUE(store_->entities()->buffer_put(put(key, 3, "m3", t0)).ok());
  for (std::uint64_t v = 1; v <= 3; ++v) {
    const std::string id = "m" + std::to_string(v);
    auto c = store_->claim(claim(id, key, t0));
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    ASSERT_EQ(c->status, ClaimStatus::kNew);
    EXPECT_EQ(c->entity.revision, v - 1);
    EXPECT_EQ(c->entity.version, v - 1);
    std::optional<std::uint64_t> unbuffer;
    if (v == 3) unbuffer = 3;
    Status s = store_->commit(commit(id, t0, write(key, c->entity.revision, v, unbuffer)));
    ASSERT_TRUE(s.ok()) << s.to_string();
    auto dup = store_->claim(claim(id, key, t0));
    ASSERT_TRUE(dup.ok());
    EXPECT_EQ(dup->status, ClaimStatus::kCompleted);
    EXPECT_EQ(dup->result, std::optional<std::string>(id));
  }
  auto info = store_->inspect_with_entity("m2", key, t0);
  ASSERT_TRUE(info.ok());
  ASSERT_TRUE(info->has_value());
  EXPECT_EQ((*info)->state, RecordState::kCompleted);

  const auto ks = redis::detail::entity_keys(options_.prefix, key);
  const int slot = key_slot(ks.record);
  EXPECT_TRUE(on_its_master(ks.record));
  EXPECT_EQ(key_slot(key_of(*store_, "m1", key)), slot);
  EXPECT_TRUE(on_its_master(key_of(*store_, "m1", key)));
  EXPECT_FALSE(on_its_master(key_of(*store_, "m1"))) << "no record at the id's own key";
  auto b = store_->entities()->buffer_read(key, 10);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->empty());
  auto sum = store_->entities()->buffer_summary(10);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, 0u);
}

TEST_F(RedisClusterEntities, SummaryAcrossSlotsAndStaleIndexMembersDropped) {
  const TimePoint t0 = clock_.now();
  const std::vector<std::string> keys = {"a", "b", "c", "d", "e", "f"};
  std::set<int> slots;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    slots.insert(key_slot(redis::detail::entity_keys(options_.prefix, keys[i]).record));
    // Older keys later in the list: the summary must sort by oldest_at.
    const TimePoint at = t0 - std::chrono::milliseconds(static_cast<int>(i) * 10);
    ASSERT_TRUE(store_->entities()->buffer_put(put(keys[i], 5, "x" + keys[i], at)).ok());
    ASSERT_TRUE(store_->entities()->buffer_put(put(keys[i], 7, "y" + keys[i], t0)).ok());
  }
  EXPECT_GT(slots.size(), 1u);
  auto sum = store_->entities()->buffer_summary(3);
  ASSERT_TRUE(sum.ok()) << sum.status().to_string();
  EXPECT_EQ(sum->count, 12u);
  EXPECT_EQ(sum->bytes, 12u * (1 + 2 + 3));
  ASSERT_EQ(sum->keys.size(), 3u);
  EXPECT_EQ(sum->keys[0].key, "f");
  EXPECT_EQ(sum->keys[1].key, "e");
  EXPECT_EQ(sum->keys[2].key, "d");
  EXPECT_EQ(sum->keys[0].count, 2u);
  EXPECT_EQ(sum->keys[0].lowest_version, 5u);
  EXPECT_EQ(sum->keys[0].oldest_at, t0 - std::chrono::milliseconds(50));

  // Empty "f" and "e": their index members go stale and are dropped by the summary.
  for (const std::string k : {"f", "e"}) {
    ASSERT_TRUE(store_->entities()->buffer_remove(k, 5).ok());
    ASSERT_TRUE(store_->entities()->write_entity(write(k, 0, 7, 7)).ok());
  }
  sum = store_->entities()->buffer_summary(3);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, 8u);
  ASSERT_EQ(sum->keys.size(), 3u);
  EXPECT_EQ(sum->keys[0].key, "d");
  EXPECT_EQ(sum->keys[1].key, "c");
  EXPECT_EQ(sum->keys[2].key, "b");
  const std::string index = redis::detail::buffer_index_key(options_.prefix);
  RedisServer* m = cluster_->master_of(key_slot(index));
  ASSERT_NE(m, nullptr);
  auto n = m->command({"ZCARD", index});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->integer, 4) << "the stale members are gone";
}

TEST_F(RedisClusterEntities, TotalLimitHoldsSequentiallyAndPerKeyLimitUnderRaces) {
  const TimePoint t0 = clock_.now();
  BufferLimits small;
  small.total = 3;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store_->entities()->buffer_put(put("t" + std::to_string(i), 1, "m", t0, small)).ok());
  Status over = store_->entities()->buffer_put(put("t9", 1, "m", t0, small));
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("total=3"), std::string::npos) << over.to_string();
  EXPECT_TRUE(store_->entities()->buffer_put(put("t0", 1, "m", t0, small)).ok()) << "a repeat stays idempotent when full";
  EXPECT_EQ(store_->entities()->buffer_put(put("t0", 1, "other", t0, small)).code(), StatusCode::kFailedPrecondition);
  auto sum = store_->entities()->buffer_summary(0);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, 3u) << "refused puts gave their reservation back";

  constexpr int kThreads = 8;
  BufferLimits per_key;
  per_key.per_key = 5;
  std::atomic<int> stored{0};
  std::barrier sync(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      sync.arrive_and_wait();
      for (int i = 0; i < 4; ++i) {
        if (store_->entities()->buffer_put(put("hot", static_cast<std::uint64_t>(t * 10 + i + 1), "m", t0, per_key)).ok()) ++stored;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(stored.load(), 5);
  auto hot = store_->entities()->buffer_read("hot", 100);
  ASSERT_TRUE(hot.ok());
  EXPECT_EQ(hot->size(), 5u);
  sum = store_->entities()->buffer_summary(0);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, 8u);
}

}  // namespace
}  // namespace idem::redis_test

// idem::redis against a real 6-node Redis Cluster (3 masters, 1 replica each), shared
// by every test of this binary: the conformance suite, then a slot migration during a
// run (ASK while the slot moves, MOVED after).
#include <gtest/gtest.h>

#include <set>

#include "cluster/key_slot.hpp"
#include "entity_layout.hpp"
#include "redis_conformance.hpp"
#include "support/redis_cluster.hpp"
#include "test_util.hpp"

namespace idem::redis_test {

RedisCluster* shared_cluster() {
  static std::unique_ptr<RedisCluster> cluster = [] {
    auto c = RedisCluster::start(3, 1);
    if (!c.ok()) {
      ADD_FAILURE() << c.status().to_string();
      return std::unique_ptr<RedisCluster>();
    }
    return std::move(c).value();
  }();
  return cluster.get();
}

std::string cluster_uri() { return shared_cluster() ? shared_cluster()->uri() : "redis://127.0.0.1:1?cluster=1"; }

namespace {

using redis::detail::key_slot;

// `n` ids whose keys under `prefix` all hash to one slot (found by counting up).
std::vector<std::string> ids_in_one_slot(const std::string& prefix, std::size_t n, int* slot) {
  *slot = key_slot(prefix + "{mig-0}");
  std::vector<std::string> ids = {"mig-0"};
  for (int i = 1; ids.size() < n; ++i) {
    const std::string id = "mig-" + std::to_string(i);
    if (key_slot(prefix + "{" + id + "}") == *slot) ids.push_back(id);
  }
  return ids;
}

std::string error_word(const StatusOr<redis::detail::Reply>& r) {
  if (!r.ok() || !r->is_error()) return "";
  return r->str.substr(0, r->str.find(' '));
}

TEST(RedisCluster, SlotMigrationDuringARunIsFollowedThroughAskAndMoved) {
  RedisCluster* cluster = shared_cluster();
  ASSERT_NE(cluster, nullptr);
  redis::Options o = options_for(cluster->uri());
  auto store = open_or_die(o);  // reads the slot map before the migration
  ASSERT_NE(store, nullptr);
  const TimePoint t0 = ManualClock().now();
  auto claim = [&](const std::string& id) {
    return ClaimRequest{id, "A", Duration(10'000), std::nullopt, t0, std::nullopt};
  };
  auto commit = [&](const std::string& id) {
    CommitRequest c;
    c.id = id;
    c.owner = "A";
    c.now = t0;
    c.ttl = Duration(3'600'000);
    c.result = id;
    return c;
  };

  int slot = 0;
  const std::vector<std::string> ids = ids_in_one_slot(o.prefix, 60, &slot);
  RedisServer* src = cluster->master_of(slot);
  ASSERT_NE(src, nullptr);
  RedisServer* dst = nullptr;
  for (int other = 0; other < redis::detail::kSlotCount && dst == nullptr; other += 1000) {
    RedisServer* m = cluster->master_of(other);
    if (m != nullptr && m != src) dst = m;
  }
  ASSERT_NE(dst, nullptr);
  const std::string src_id = *cluster->id_of(*src);
  const std::string dst_id = *cluster->id_of(*dst);
  const std::string slot_s = std::to_string(slot);

  // Before: ids 0..19 committed on the source.
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(store->claim(claim(ids[i]))->status, ClaimStatus::kNew);
    ASSERT_TRUE(store->commit(commit(ids[i])).ok());
  }

  // During: the slot is migrating; ids 0..9 already moved.
  ASSERT_TRUE(dst->command({"CLUSTER", "SETSLOT", slot_s, "IMPORTING", src_id}).ok());
  ASSERT_TRUE(src->command({"CLUSTER", "SETSLOT", slot_s, "MIGRATING", dst_id}).ok());
  std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(dst->port()), "", "0", "5000", "KEYS"};
  for (int i = 0; i < 10; ++i) migrate.push_back(key_of(*store, ids[i]));
  auto moved = src->command(migrate);
  ASSERT_TRUE(moved.ok() && !moved->is_error()) << (moved.ok() ? moved->str : moved.status().to_string());
  EXPECT_EQ(error_word(src->command({"HGET", key_of(*store, ids[0]), "s"})), "ASK") << "the source redirects";

  std::vector<ClaimRequest> batch;
  for (int i = 0; i < 40; ++i) batch.push_back(claim(ids[i]));
  auto during = store->claim_batch(batch);
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(during[i].ok()) << i << ": " << during[i].status().to_string();
    EXPECT_EQ(during[i]->status, i < 20 ? ClaimStatus::kCompleted : ClaimStatus::kNew) << i;
    if (i < 20) {
      EXPECT_EQ(during[i]->result, std::optional<std::string>(ids[i])) << i;
    }
  }
  for (int i = 20; i < 30; ++i) ASSERT_TRUE(store->commit(commit(ids[i])).ok()) << i;
  std::vector<CommitRequest> commits;
  for (int i = 30; i < 40; ++i) commits.push_back(commit(ids[i]));
  for (const Status& s : store->commit_batch(commits)) EXPECT_TRUE(s.ok()) << s.to_string();
  auto new_keys_went = dst->command({"CLUSTER", "COUNTKEYSINSLOT", slot_s});
  EXPECT_GE(new_keys_went->integer, 30) << "keys created during the migration live on the target (via ASK)";

  // After: the rest moves, the slot is assigned to the target.
  while (true) {
    auto keys = src->command({"CLUSTER", "GETKEYSINSLOT", slot_s, "100"});
    ASSERT_TRUE(keys.ok());
    if (keys->elements.empty()) break;
    std::vector<std::string> m = {"MIGRATE", "127.0.0.1", std::to_string(dst->port()), "", "0", "5000", "KEYS"};
    for (const auto& k : keys->elements) m.push_back(k.str);
    ASSERT_TRUE(src->command(m).ok());
  }
  for (auto& node : cluster->nodes()) {
    auto role = node->command({"ROLE"});
    if (role.ok() && !role->elements.empty() && role->elements[0].str == "master") {
      ASSERT_TRUE(node->command({"CLUSTER", "SETSLOT", slot_s, "NODE", dst_id}).ok());
    }
  }
  EXPECT_EQ(error_word(src->command({"HGET", key_of(*store, ids[0]), "s"})), "MOVED") << "the source redirects";

  // The store still has the old map: MOVED → refresh → retry.
  batch.clear();
  for (int i = 0; i < 60; ++i) batch.push_back(claim(ids[i]));
  auto after = store->claim_batch(batch);
  for (int i = 0; i < 60; ++i) {
    ASSERT_TRUE(after[i].ok()) << i << ": " << after[i].status().to_string();
    EXPECT_EQ(after[i]->status, i < 40 ? ClaimStatus::kCompleted : ClaimStatus::kNew) << i;
  }
  for (int i = 40; i < 60; ++i) EXPECT_TRUE(store->commit(commit(ids[i])).ok());
  // A second store opened now reads the new map directly and agrees.
  auto fresh = open_or_die(o);
  for (int i = 0; i < 60; ++i) EXPECT_EQ(fresh->claim(claim(ids[i]))->status, ClaimStatus::kCompleted) << i;
  ASSERT_TRUE(cluster->wait_ok(10'000).ok());
}

TEST(RedisCluster, CommitThenClaimAcrossSlotsAndInOneSlot) {
  ASSERT_NE(shared_cluster(), nullptr);
  auto store = open_or_die(options_for(cluster_uri()));
  const TimePoint t0 = ManualClock().now();
  // "a" and "b" hash to different slots (on different masters, as it happens).
  ASSERT_NE(key_slot(key_of(*store, "a")), key_slot(key_of(*store, "b")));
  ASSERT_EQ(store->claim({"a", "A", Duration(1000), std::nullopt, t0, std::nullopt})->status, ClaimStatus::kNew);
  CommitRequest c;
  c.id = "a";
  c.owner = "A";
  c.now = t0;
  c.ttl = Duration(60'000);
  auto r = store->commit_then_claim(c, {"b", "A", Duration(1000), std::nullopt, t0});
  EXPECT_TRUE(r.commit.ok()) << r.commit.to_string();
  ASSERT_TRUE(r.claim.ok()) << r.claim.status().to_string();
  EXPECT_EQ(r.claim->status, ClaimStatus::kNew);
  c.id = "b";
  auto same = store->commit_then_claim(c, {"b", "B", Duration(1000), std::nullopt, t0});
  EXPECT_TRUE(same.commit.ok());
  EXPECT_EQ(same.claim->status, ClaimStatus::kCompleted) << "one slot: one script, commit first";
}

// A batch of commits, some of ids claimed with an entity key (their records live in
// the entity's slot) and some without, each lands on its own record: the ids are
// completed for the next claim, whichever way they were claimed.
TEST(RedisCluster, CommitBatchesWriteEachRecordWhereItsClaimPutIt) {
  ASSERT_NE(shared_cluster(), nullptr);
  auto store = open_or_die(options_for(cluster_uri()));
  const TimePoint t0 = ManualClock().now();
  std::vector<std::string> ids, entities;  // one entity per id: an entity admits one claim at a time
  for (int i = 0; i < 12; ++i) {
    ids.push_back("cb-" + std::to_string(i));
    entities.push_back("order-" + std::to_string(i));
  }
  std::vector<ClaimRequest> claims;
  for (int i = 0; i < 12; ++i) {
    ClaimRequest q{ids[i], "A", Duration(10'000), std::nullopt, t0, std::nullopt};
    if (i % 2 == 0) q.entity_key = entities[i];
    claims.push_back(q);
  }
  const auto granted = store->claim_batch(claims);
  for (std::size_t i = 0; i < granted.size(); ++i) {
    ASSERT_TRUE(granted[i].ok()) << granted[i].status().to_string();
    ASSERT_EQ(granted[i]->status, ClaimStatus::kNew) << claims[i].id;
  }
  std::vector<CommitRequest> commits;
  for (const ClaimRequest& q : claims) {
    CommitRequest c;
    c.id = q.id;
    c.owner = "A";
    c.now = t0;
    c.ttl = Duration(60'000);
    c.entity_key = q.entity_key;
    commits.push_back(c);
  }
  for (const Status& s : store->commit_batch(commits)) EXPECT_TRUE(s.ok()) << s.to_string();
  for (const ClaimRequest& q : claims) {
    ClaimRequest again = q;
    again.owner = "B";
    auto c = store->claim(again);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->status, ClaimStatus::kCompleted) << q.id;
  }
}

// A URI that names one node of a cluster without cluster=1: open() asks the node
// (INFO cluster) and talks Redis Cluster anyway, so ids on every master work.
TEST(RedisCluster, ANodeNamedWithoutClusterParameterOpensAsACluster) {
  RedisCluster* cluster = shared_cluster();
  ASSERT_NE(cluster, nullptr);
  const std::string uri = cluster->nodes().front()->uri();
  ASSERT_EQ(uri.find("cluster=1"), std::string::npos) << uri;
  redis::Options o = options_for(uri);
  ASSERT_FALSE(o.cluster);
  auto store = open_or_die(o);
  ASSERT_NE(store, nullptr);
  // On a cluster an id claimed with an entity key lives in the entity's slot.
  EXPECT_EQ(key_of(*store, "id", "entity"), redis::detail::entity_id_key(o.prefix, "entity", "id"));
  const TimePoint t0 = ManualClock().now();
  std::set<RedisServer*> masters;
  for (int i = 0; i < 60; ++i) {
    const std::string id = "spread-" + std::to_string(i);
    masters.insert(cluster->master_of(key_slot(key_of(*store, id))));
    auto c = store->claim({id, "A", Duration(10'000), std::nullopt, t0, std::nullopt});
    ASSERT_TRUE(c.ok()) << id << ": " << c.status().to_string();
    EXPECT_EQ(c->status, ClaimStatus::kNew);
    CommitRequest q;
    q.id = id;
    q.owner = "A";
    q.now = t0;
    q.ttl = Duration(60'000);
    Status s = store->commit(q);
    EXPECT_TRUE(s.ok()) << id << ": " << s.to_string();
    EXPECT_EQ(store->claim({id, "B", Duration(10'000), std::nullopt, t0, std::nullopt})->status,
              ClaimStatus::kCompleted);
  }
  EXPECT_EQ(masters.size(), 3u) << "the ids reach every master";
  // A cluster node has only database 0: asking for another fails open, saying why.
  redis::Options db1 = o;
  db1.db = 1;
  auto refused = redis::open(db1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("is a Redis Cluster node"), std::string::npos)
      << refused.status().to_string();
  // The same through the URI entry point.
  auto by_uri = open_store_uri(uri + (uri.find('?') == std::string::npos ? "?" : "&") + "prefix=" + o.prefix);
  ASSERT_TRUE(by_uri.ok()) << by_uri.status().to_string();
  for (int i = 0; i < 60; ++i) {
    auto c = (*by_uri)->claim({"spread-" + std::to_string(i), "C", Duration(10'000), std::nullopt, t0, std::nullopt});
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->status, ClaimStatus::kCompleted);
  }
}

}  // namespace
}  // namespace idem::redis_test

namespace idem::conformance {
INSTANTIATE_TEST_SUITE_P(RedisCluster, StoreConformance,
                         ::testing::Values(redis_test::redis_factory("cluster", redis_test::cluster_uri)),
                         factory_name);
}  // namespace idem::conformance

// `idem consume` on a real 3-node Kafka cluster (KRaft, started once for this binary
// by scripts/broker.sh; topics with 3 replicas, min.insync.replicas=2) and SQLite:
// a group of three consumers under churn, and the leader of the topic's partitions
// killed twice mid-run. The topics are created by `idem publish` and `idem consume`
// themselves (partitions=6, replication_factor=3 in their URIs). Each run makes every
// check of the shared kill test (support/consume_kills.hpp).
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "support/consume_broker.hpp"
#include "support/consume_kills.hpp"
#include "support/kafka_server.hpp"

namespace idem::kafka_test {
namespace {

using consume_kills::Mode;

constexpr const char* kTopics = "partitions=6&replication_factor=3";

KafkaServer& cluster() { return KafkaServer::shared(3); }

// The kill test's options for `members` consumers of `topic`, killed `kills` times.
consume_kills::KillOptions options(const std::string& topic, int members, int kills) {
  consume_kills::KillOptions o;
  o.topic = topic;
  o.members = members;
  o.kills = kills;
  o.alive_min = std::chrono::milliseconds(1000);
  o.alive_spread = std::chrono::milliseconds(1500);
  return o;
}

// Three consumers of one group over a 6-partition topic; each round kills one at random
// and starts it again, so partitions move many times under load.
TEST(KafkaCluster, AGroupUnderChurnHasEveryEffectOnceInVersionOrder) {
  KafkaBroker broker(cluster(), kTopics);
  consume_kills::run_kill_test(broker, Mode{"strict", true, "1"}, options("churn", 3, 12));
  EXPECT_EQ(cluster().replicas("churn"), 3);
  EXPECT_EQ(cluster().replicas("churn.dlq"), 3);  // made by idem consume
}

// The node that leads partition 0 of the topic is SIGKILLed twice under two running
// consumers and started again a round later; the group, its offsets and the topics
// fail over to the other nodes.
TEST(KafkaCluster, TheLeaderKilledTwiceMidRunLosesNothing) {
  KafkaServer& c = cluster();
  KafkaBroker broker(c, kTopics);
  consume_kills::KillOptions o = options("leaders", 2, 8);
  int down = -1;
  int killed = 0;
  o.after_kill = [&](int round) {
    if (down > 0) {
      ASSERT_TRUE(c.start_node(down).ok());
      down = -1;
    } else if (round % 3 == 0 && killed < 2) {
      down = c.leader("leaders", 0);
      ASSERT_GT(down, 0);
      ASSERT_TRUE(c.kill_node(down).ok());
      ++killed;
    }
  };
  consume_kills::run_kill_test(broker, Mode{"strict", true, "1"}, o);
  EXPECT_EQ(killed, 2);
  if (down > 0) {
    EXPECT_TRUE(c.start_node(down).ok());
  }
}

}  // namespace
}  // namespace idem::kafka_test

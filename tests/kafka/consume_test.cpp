// `idem consume` end to end on librdkafka's mock cluster and SQLite: the shared kill
// test (support/consume_kills.hpp), and an unreachable broker.
//
// The mock cluster runs in this process; the `idem` children connect to its loopback
// port. A killed member keeps its place in the group until its session times out, so
// the consumers use a short session (1.5 s). The mock delays the first join of an
// empty group by 3 s (group.initial.rebalance.delay.ms), longer than a consumer lives
// between kills: an anchor member in this process (subscribed to a topic of its own,
// so it is assigned nothing the consumers need) keeps the group from ever being empty.
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>

#include "support/consume_kills.hpp"
#include "support/mock_cluster.hpp"
#include "support/temp_dir.hpp"

namespace idem::kafka_test {
namespace {

using consume_kills::Mode;
using consume_kills::spawn_idem;
using consume_kills::wait_exit;

constexpr const char* kSession = "session_timeout_ms=1500";

// A member of `group` that holds only `topic` and polls until destroyed.
class Anchor {
 public:
  Anchor(const MockCluster& c, const std::string& group, const std::string& topic) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    char err[256];
    for (const auto& [k, v] :
         std::vector<std::pair<std::string, std::string>>{{"bootstrap.servers", c.bootstraps()},
                                                          {"group.id", group},
                                                          {"session.timeout.ms", "1500"},
                                                          {"heartbeat.interval.ms", "300"},
                                                          {"partition.assignment.strategy", "cooperative-sticky"}}) {
      rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err);
    }
    rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    rd_kafka_poll_set_consumer(rk_);
    rd_kafka_topic_partition_list_t* t = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(t, topic.c_str(), RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(rk_, t);
    rd_kafka_topic_partition_list_destroy(t);
    thread_ = std::thread([this] {
      while (!stop_) {
        if (rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, 100)) rd_kafka_message_destroy(m);
      }
    });
  }
  ~Anchor() {
    stop_ = true;
    thread_.join();
    rd_kafka_destroy_flags(rk_, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  }

 private:
  rd_kafka_t* rk_ = nullptr;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class KafkaBroker final : public consume_kills::Broker {
 public:
  explicit KafkaBroker(MockCluster& c) : c_(c) {}

  std::string source_uri(const std::string& topic, const std::string& group) override {
    if (!anchor_) {
      EXPECT_TRUE(c_.create_topic(topic + ".anchor", 1).ok());
      anchor_ = std::make_unique<Anchor>(c_, group, topic + ".anchor");
    }
    return c_.uri(topic, group, kSession);
  }
  std::string publish_uri(const std::string& topic) override {
    EXPECT_TRUE(c_.create_topic(topic, 4).ok());
    EXPECT_TRUE(c_.create_topic(topic + ".retry", 2).ok());
    EXPECT_TRUE(c_.create_topic(topic + ".dlq", 1).ok());
    return c_.uri(topic, "");
  }
  // One body per origin: a consumer killed before a dead letter's offset was
  // committed dead-letters the redelivered message again, under the same key.
  std::multiset<std::string> dead_letter_bodies(const std::string& topic) override {
    std::multiset<std::string> out;
    const auto records = c_.records(topic + ".dlq");
    for (auto it = records.begin(); it != records.end(); it = records.upper_bound(it->first)) {
      EXPECT_FALSE(it->first.empty()) << "a dead letter without its origin as key";
      out.insert(it->second);
    }
    return out;
  }
  // Messages of the topic and its retry topic past the group's committed offsets.
  std::int64_t unsettled(const std::string& topic, const std::string& group) override {
    anchor_.reset();
    const std::int64_t a = c_.lag(topic, group), b = c_.lag(topic + ".retry", group);
    EXPECT_GE(a, 0);
    EXPECT_GE(b, 0);
    return a < 0 || b < 0 ? -2 : a + b;
  }

 private:
  MockCluster& c_;
  std::unique_ptr<Anchor> anchor_;
};

class KafkaConsumeKills : public ::testing::TestWithParam<Mode> {};

TEST_P(KafkaConsumeKills, SurviveRandomKillsWithEveryEffectExactlyOnce) {
  auto cluster = MockCluster::start();
  ASSERT_TRUE(cluster.ok()) << cluster.status().to_string();
  KafkaBroker broker(**cluster);
  consume_kills::KillOptions o;
  o.alive_min = std::chrono::milliseconds(2000);  // a join takes about a second on the mock
  o.alive_spread = std::chrono::milliseconds(1000);
  consume_kills::run_kill_test(broker, GetParam(), o);
}

INSTANTIATE_TEST_SUITE_P(Modes, KafkaConsumeKills, ::testing::Values(Mode{"strict", true, "1"}),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(i.param.name); });

TEST(KafkaConsume, UnreachableBrokerIsOneLineAndNonZero) {
  testing::TempDir dir("consume");
  const std::string out = dir.sub("bad.log");
  EXPECT_EQ(wait_exit(spawn_idem({"consume", "--source", "kafka://127.0.0.1:1/t?group=g&connect_timeout_ms=500"}, out),
                      std::chrono::seconds(30)),
            1);
  EXPECT_EQ(wait_exit(spawn_idem({"consume", "--source", "kafka://127.0.0.1:1/t"}, out), std::chrono::seconds(30)),
            2);  // no group: a usage error
  std::ifstream f(out);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("idem consume:"), std::string::npos) << text;
  EXPECT_NE(text.find("no broker of 127.0.0.1:1 answered"), std::string::npos) << text;
}

}  // namespace
}  // namespace idem::kafka_test

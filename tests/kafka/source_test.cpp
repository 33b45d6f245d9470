// The Kafka adapter against librdkafka's mock cluster: URIs, consuming, the committed
// prefix, retry through the retry topic, dead letters with their headers, partition
// moves told to the listener, an unreachable broker.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "idem/kafka_source.hpp"
#include "support/mock_cluster.hpp"

namespace idem::kafka {
namespace {

using kafka_test::MockCluster;
using namespace std::chrono_literals;

std::unique_ptr<MockCluster> cluster() {
  auto c = MockCluster::start();
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return std::move(c).value();
}

Options options(const MockCluster& c, const std::string& topic, const std::string& group) {
  auto o = parse_uri(c.uri(topic, group, "session_timeout_ms=4500"));
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  return *o;
}

void publish(const MockCluster& c, const std::string& topic, int n, const std::string& prefix = "m") {
  auto p = open_publisher(options(c, topic, ""));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<OutgoingMessage> msgs;
  for (int i = 0; i < n; ++i) msgs.push_back({.id = prefix + std::to_string(i), .body = prefix + std::to_string(i)});
  ASSERT_TRUE((*p)->publish(msgs).ok());
}

// Fetches until `n` deliveries came or `within` passed.
std::vector<Delivery> fetch_n(MessageSource& s, std::size_t n, std::chrono::milliseconds within = 15s) {
  std::vector<Delivery> out;
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    EXPECT_TRUE(s.fetch(n - out.size(), Duration(100), out).ok());
  }
  return out;
}

std::string header(const Delivery& d, const std::string& name) {
  for (const auto& [k, v] : d.headers)
    if (k == name) return v;
  return "<none>";
}

TEST(KafkaUri, ParsesBrokersTopicAndParameters) {
  auto o = parse_uri("kafka://a:9092,b:9093/orders?group=g&partitions=4&session_timeout_ms=3000&dlq=dead");
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->brokers, (std::vector<std::string>{"a:9092", "b:9093"}));
  EXPECT_EQ(o->topic, "orders");
  EXPECT_EQ(o->group, "g");
  EXPECT_EQ(o->partitions, 4);
  EXPECT_EQ(o->session_timeout, Duration(3000));
  EXPECT_EQ(o->dead_letter_topic, "dead");
  EXPECT_TRUE(o->retry_topic.empty());
  for (const char* bad : {"kafka://a:9092", "kafka://a:9092/", "kafka://a/t?group=g", "kafka://a:0/t", "kafka://a:1,/t",
                          "kafka://u:secret@a:1/t", "kafka://a:1/t?grup=g", "kafka://a:1/t?partitions=0",
                          "redis-stream://a:1/t", "kafka://a:1/t/x"}) {
    auto b = parse_uri(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(b.status().message().find("secret"), std::string::npos);
  }
}

TEST(KafkaSource, UnreachableBrokersFailOpenWithinTheConnectTimeout) {
  auto o = parse_uri("kafka://127.0.0.1:1/t?group=g&connect_timeout_ms=500");
  ASSERT_TRUE(o.ok());
  const auto start = std::chrono::steady_clock::now();
  auto s = open(*o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_FALSE(open_publisher(*o).ok());
}

TEST(KafkaSource, ConsumesFromTheStartAndCommitsOnlyTheDecidedPrefix) {
  auto c = cluster();
  ASSERT_TRUE(c->create_topic("t", 1).ok());
  publish(*c, "t", 10);  // before the group exists: consumed all the same
  {
    auto s = open(options(*c, "t", "g"));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    std::vector<Delivery> got = fetch_n(**s, 10);
    ASSERT_EQ(got.size(), 10u);
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(got[i].body, "m" + std::to_string(i));
      EXPECT_EQ(got[i].partition, "t/0");
      EXPECT_EQ(got[i].broker_id, "t/0@" + std::to_string(i));
      EXPECT_EQ(got[i].delivery_count, 0u);
      EXPECT_EQ(header(got[i], "idem-id"), "m" + std::to_string(i));
    }
    for (int i = 9; i >= 0; --i) {  // decided out of order; 3 held
      if (i != 3) {
        ASSERT_TRUE((*s)->ack(got[i]).ok());
      }
    }
    (*s)->hold(got[3]);
    EXPECT_FALSE(*(*s)->drained());
    (*s)->close();
  }
  EXPECT_EQ(c->lag("t", "g"), 7);  // committed 3: everything from the held one on comes again
  auto s = open(options(*c, "t", "g"));
  ASSERT_TRUE(s.ok());
  std::vector<Delivery> again = fetch_n(**s, 7);
  ASSERT_EQ(again.size(), 7u);
  EXPECT_EQ(again.front().body, "m3");
  for (const Delivery& d : again) ASSERT_TRUE((*s)->ack(d).ok());
  auto drained = (*s)->drained();
  ASSERT_TRUE(drained.ok());
  EXPECT_TRUE(*drained);
  EXPECT_EQ(c->lag("t", "g"), 0);
}

TEST(KafkaSource, RetryComesBackThroughTheRetryTopicOnceDue) {
  auto c = cluster();
  ASSERT_TRUE(c->create_topic("r", 1).ok());
  ASSERT_TRUE(c->create_topic("r.retry", 1).ok());
  publish(*c, "r", 1);
  auto s = open(options(*c, "r", "g"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  std::vector<Delivery> got = fetch_n(**s, 1);
  ASSERT_EQ(got.size(), 1u);
  const auto retried_at = std::chrono::steady_clock::now();
  ASSERT_TRUE((*s)->retry(got[0], Duration(800)).ok());
  std::vector<Delivery> again = fetch_n(**s, 1);
  const auto waited = std::chrono::steady_clock::now() - retried_at;
  ASSERT_EQ(again.size(), 1u);
  EXPECT_GE(waited, 750ms);  // held in the source until due
  EXPECT_EQ(again[0].body, "m0");
  EXPECT_EQ(again[0].partition, "r.retry/0");
  EXPECT_EQ(header(again[0], "idem-id"), "m0");
  EXPECT_EQ(header(again[0], "idem-origin"), "r/0@0");
  EXPECT_NE(header(again[0], "idem-due-ms"), "<none>");
  EXPECT_FALSE(*(*s)->drained());
  ASSERT_TRUE((*s)->ack(again[0]).ok());
  auto drained = (*s)->drained();
  ASSERT_TRUE(drained.ok());
  EXPECT_TRUE(*drained);
  EXPECT_EQ(c->lag("r", "g"), 0);
  EXPECT_EQ(c->lag("r.retry", "g"), 0);
}

TEST(KafkaSource, DeadLettersCarryTheReasonAndAreCommitted) {
  auto c = cluster();
  ASSERT_TRUE(c->create_topic("d", 1).ok());
  publish(*c, "d", 2);
  auto s = open(options(*c, "d", "g"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  std::vector<Delivery> got = fetch_n(**s, 2);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE((*s)->dead_letter(got[1], "malformed", "not JSON").ok());
  ASSERT_TRUE((*s)->ack(got[0]).ok());
  ASSERT_TRUE(*(*s)->drained());
  EXPECT_EQ(c->lag("d", "g"), 0);
  EXPECT_EQ(c->records("d.dlq"), (std::multimap<std::string, std::string>{{"d/0@1", "m1"}}));
  auto dlq = open(options(*c, "d.dlq", "reader"));
  ASSERT_TRUE(dlq.ok());
  std::vector<Delivery> dead = fetch_n(**dlq, 1);
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(header(dead[0], "idem-reason"), "malformed");
  EXPECT_EQ(header(dead[0], "idem-detail"), "not JSON");
  EXPECT_EQ(header(dead[0], "idem-origin"), "d/0@1");
  EXPECT_EQ(header(dead[0], "idem-id"), "m1");
}

// Plays the runtime: holds deliveries; on_revoked settles those of the partitions.
class Listener : public AssignmentListener {
 public:
  explicit Listener(MessageSource*& s) : source_(s) {}
  void on_assigned(std::span<const std::string> p) override {
    assigned.insert(p.begin(), p.end());
    ++assigns;
  }
  void on_revoked(std::span<const std::string> p) override {
    revoked.insert(p.begin(), p.end());
    for (auto it = held.begin(); it != held.end();) {
      if (std::find(p.begin(), p.end(), it->partition) == p.end()) {
        ++it;
        continue;
      }
      EXPECT_TRUE(source_->ack(*it).ok());
      ++settled_on_revoke;
      it = held.erase(it);
    }
  }
  std::vector<Delivery> held;
  std::set<std::string> assigned, revoked;
  int settled_on_revoke = 0;
  int assigns = 0;

 private:
  MessageSource*& source_;
};

TEST(KafkaSource, ARebalanceSettlesAndCommitsTheRevokedPartitionsFirst) {
  auto c = cluster();
  ASSERT_TRUE(c->create_topic("p", 2).ok());
  ASSERT_TRUE(c->create_topic("p.retry", 1).ok());
  publish(*c, "p", 40);
  auto a = open(options(*c, "p", "g"));
  ASSERT_TRUE(a.ok());
  MessageSource* src = a->get();
  Listener la(src);
  (*a)->set_assignment_listener(&la);
  la.held = fetch_n(**a, 40);
  ASSERT_EQ(la.held.size(), 40u);
  EXPECT_EQ(la.assigned, (std::set<std::string>{"p/0", "p/1", "p.retry/0"}));
  // A second member joins; the first learns of it on its next fetches.
  auto b = open(options(*c, "p", "g"));
  ASSERT_TRUE(b.ok());
  std::vector<Delivery> scratch;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (la.revoked.empty() && std::chrono::steady_clock::now() < deadline) {
    (void)(*b)->fetch(1, Duration(50), scratch);  // b joins while a polls
    std::vector<Delivery> more;
    (void)(*a)->fetch(1, Duration(50), more);
    la.held.insert(la.held.end(), more.begin(), more.end());
  }
  ASSERT_FALSE(la.revoked.empty()) << "no rebalance within 20 s";
  // Every held delivery of a revoked partition was settled before it went.
  for (const Delivery& d : la.held) EXPECT_EQ(la.revoked.count(d.partition), 0u) << d.broker_id;
  // The settled ones were committed when the partitions were given up: nobody reads
  // them again (b acked nothing).
  EXPECT_EQ(c->lag("p", "g"), 40 - la.settled_on_revoke);
  (*a)->set_assignment_listener(nullptr);
}

}  // namespace
}  // namespace idem::kafka

// The Kafka adapter where only librdkafka's mock cluster can take it: no broker at all,
// a broker that goes down mid-run, offset commits the broker refuses.
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <chrono>
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

constexpr int kOffsetCommit = 8;  // Kafka's API key of OffsetCommit

std::unique_ptr<MockCluster> cluster() {
  auto c = MockCluster::start();
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return std::move(c).value();
}

Options options(const MockCluster& c, const std::string& topic, const std::string& group) {
  auto o = parse_uri(c.uri(topic, group, "session_timeout_ms=4500&connect_timeout_ms=2000"));
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  return *o;
}

void publish(const MockCluster& c, const std::string& topic, int n) {
  auto p = open_publisher(options(c, topic, ""));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<OutgoingMessage> msgs;
  for (int i = 0; i < n; ++i) msgs.push_back({.id = "m" + std::to_string(i), .body = "m" + std::to_string(i)});
  ASSERT_TRUE((*p)->publish(msgs).ok());
}

std::vector<Delivery> fetch_n(MessageSource& s, std::size_t n, std::chrono::milliseconds within = 15s) {
  std::vector<Delivery> out;
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) (void)s.fetch(n - out.size(), Duration(100), out);
  return out;
}

// A topic "t" of 5 messages, all fetched by a member of group "g".
struct FiveFetched {
  std::unique_ptr<MockCluster> c;
  std::unique_ptr<MessageSource> s;
  std::vector<Delivery> got;

  void start() {
    c = cluster();
    ASSERT_TRUE(c->create_topic("t", 1).ok());
    publish(*c, "t", 5);
    auto opened = open(options(*c, "t", "g"));
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    s = std::move(opened).value();
    got = fetch_n(*s, 5);
    ASSERT_EQ(got.size(), 5u);
  }
};

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

// Refused commits leave the prefix uncommitted, and drained() says so, until a later
// commit lands.
TEST(KafkaSource, RefusedOffsetCommitsAreMadeAgainUntilTheyLand) {
  FiveFetched f;
  ASSERT_NO_FATAL_FAILURE(f.start());
  auto& [c, s, got] = f;
  c->fail_requests(kOffsetCommit, 3, RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE);
  for (const Delivery& d : got) ASSERT_TRUE(s->ack(d).ok());
  int refused = 0;
  bool drained = false;
  for (int i = 0; i < 20 && !drained; ++i) {
    auto r = s->drained();
    if (!r.ok()) {
      ++refused;
      continue;
    }
    drained = *r;
  }
  EXPECT_TRUE(drained);
  EXPECT_GE(refused, 1);
  EXPECT_EQ(c->lag("t", "g"), 0);
}

// An asynchronous commit (made by fetch as decisions come) that the broker refuses is
// not seen as it fails; drained() commits the offsets again, synchronously, and so
// reports the partition done only once the group's offset is really at its end.
TEST(KafkaSource, ARefusedAsynchronousCommitIsMadeAgainByDrained) {
  FiveFetched f;
  ASSERT_NO_FATAL_FAILURE(f.start());
  auto& [c, s, got] = f;
  for (const Delivery& d : got) ASSERT_TRUE(s->ack(d).ok());
  c->fail_requests(kOffsetCommit, 1, RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE);
  std::vector<Delivery> none;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(s->fetch(1, Duration(50), none).ok());  // the async commit, refused
  ASSERT_TRUE(none.empty());
  EXPECT_EQ(c->lag("t", "g"), 5) << "the injected error did not meet the asynchronous commit";
  bool drained = false;
  for (int i = 0; i < 20 && !drained; ++i) {
    auto r = s->drained();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    drained = *r;
  }
  EXPECT_TRUE(drained);
  EXPECT_EQ(c->lag("t", "g"), 0);
}

// While every broker is down, fetch reports it or returns nothing; once they are back,
// the consumer (acking whatever it is handed, as the runtime would) gets the rest and
// commits everything: nothing is lost.
TEST(KafkaSource, ABrokerDownMidRunLosesNothing) {
  auto c = cluster();
  ASSERT_TRUE(c->create_topic("t", 1).ok());
  publish(*c, "t", 10);
  auto s = open(options(*c, "t", "g"));
  ASSERT_TRUE(s.ok());
  std::vector<Delivery> got = fetch_n(**s, 4);
  ASSERT_EQ(got.size(), 4u);
  for (const Delivery& d : got) ASSERT_TRUE((*s)->ack(d).ok());
  c->set_down(true);
  std::vector<Delivery> during;
  for (int i = 0; i < 10; ++i) (void)(*s)->fetch(10, Duration(100), during);
  c->set_down(false);
  std::set<std::string> seen;
  for (const Delivery& d : got) seen.insert(d.body);
  bool drained = false;
  std::vector<Delivery> more = std::move(during);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!drained && std::chrono::steady_clock::now() < deadline) {
    for (const Delivery& d : more) {
      seen.insert(d.body);
      ASSERT_TRUE((*s)->ack(d).ok());
    }
    more.clear();
    (void)(*s)->fetch(10, Duration(100), more);
    auto r = (*s)->drained();
    drained = more.empty() && r.ok() && *r;
  }
  EXPECT_TRUE(drained);
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(c->lag("t", "g"), 0);
}

}  // namespace
}  // namespace idem::kafka

// The Pulsar adapter against a real Pulsar standalone (one per binary, started by
// scripts/broker.sh): consuming what was published before the subscription, permits,
// negative acks and delayed retries, dead letters with their properties, copies of a
// message still in flight, an unreachable broker, a broker restarted under a consumer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "idem/pulsar_source.hpp"
#include "support/pulsar_server.hpp"
#ifdef IDEM_TESTS_WITH_LEDGER_EXAMPLE
#include "support/ledger_example.hpp"
#include "support/temp_dir.hpp"
#endif

namespace idem::pulsar {
namespace {

using pulsar_test::PulsarServer;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

PulsarServer& broker() { return PulsarServer::shared(); }

// A topic (or subscription) name no other test of this binary uses: they share one broker.
std::string fresh(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(n.fetch_add(1));
}

Options options(const std::string& topic, const std::string& sub, const std::string& params = "") {
  auto o = parse_uri(broker().uri(topic, sub, params));
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  return *o;
}

std::unique_ptr<MessageSource> source(const std::string& topic, const std::string& sub, const std::string& params = "") {
  auto s = open(options(topic, sub, params));
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(s).value() : nullptr;
}

void publish(const std::string& topic, int n, const std::string& prefix = "m") {
  auto p = open_publisher(options(topic, ""));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<OutgoingMessage> msgs;
  for (int i = 0; i < n; ++i) {
    msgs.push_back({.id = prefix + std::to_string(i),
                    .body = prefix + std::to_string(i),
                    .headers = {{"origin-app", "test"}},
                    .key = "k" + std::to_string(i % 3)});
  }
  ASSERT_TRUE((*p)->publish(msgs).ok());
}

// Fetches until `n` deliveries came or `within` passed.
std::vector<Delivery> fetch_n(MessageSource& s, std::size_t n, std::chrono::milliseconds within = 20s) {
  std::vector<Delivery> out;
  const auto deadline = SteadyClock::now() + within;
  while (out.size() < n && SteadyClock::now() < deadline) {
    const std::size_t before = out.size();
    Status st = s.fetch(n - out.size(), Duration(100), out);
    EXPECT_TRUE(st.ok() || st.code() == StatusCode::kUnavailable) << st.to_string();
    EXPECT_LE(out.size() - before, n - before);
  }
  return out;
}

bool drained_within(MessageSource& s, std::chrono::milliseconds within) {
  const auto deadline = SteadyClock::now() + within;
  while (SteadyClock::now() < deadline) {
    auto d = s.drained();
    if (d.ok() && *d) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

std::string header(const Delivery& d, const std::string& name) {
  for (const auto& [n, v] : d.headers)
    if (n == name) return v;
  return "";
}

TEST(PulsarSource, ConsumesWhatWasPublishedBeforeTheSubscriptionInOrder) {
  const std::string topic = fresh("before");
  publish(topic, 50);
  auto s = source(topic, "sub");
  ASSERT_NE(s, nullptr);
  auto got = fetch_n(*s, 50);
  ASSERT_EQ(got.size(), 50u);
  for (int i = 0; i < 50; ++i) {
    const Delivery& d = got[i];
    EXPECT_EQ(d.body, "m" + std::to_string(i));
    EXPECT_EQ(d.key, "k" + std::to_string(i % 3));
    EXPECT_EQ(header(d, "idem-id"), "m" + std::to_string(i));
    EXPECT_EQ(header(d, "origin-app"), "test");
    EXPECT_EQ(d.delivery_count, 1u);
    EXPECT_EQ(d.partition, topic);
    EXPECT_GT(d.position, 0u);
    if (i > 0) {
      EXPECT_GT(d.position, got[i - 1].position) << "positions follow the topic's order";
    }
  }
  auto d = s->drained();
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_FALSE(*d) << "50 messages are not acked yet";
  for (const Delivery& x : got) ASSERT_TRUE(s->ack(x).ok());
  EXPECT_TRUE(drained_within(*s, 10s));
  EXPECT_EQ(broker().backlog(topic, "sub").first, 0);
}

TEST(PulsarSource, NeverHandsOutMoreThanFetchAsks) {
  const std::string topic = fresh("permits");
  publish(topic, 30);
  auto s = source(topic, "sub", "receiver_queue=5");
  ASSERT_NE(s, nullptr);
  std::vector<Delivery> all;
  const auto deadline = SteadyClock::now() + 20s;
  while (all.size() < 30 && SteadyClock::now() < deadline) {
    std::vector<Delivery> some;
    ASSERT_TRUE(s->fetch(4, Duration(200), some).ok());
    EXPECT_LE(some.size(), 4u);
    for (Delivery& d : some) {
      ASSERT_TRUE(s->ack(d).ok());
      all.push_back(std::move(d));
    }
  }
  EXPECT_EQ(all.size(), 30u);
}

TEST(PulsarSource, RetryIsANegativeAckRedeliveredAfterTheNackDelay) {
  const std::string topic = fresh("nack");
  publish(topic, 1);
  auto s = source(topic, "sub", "nack_delay_ms=400");
  ASSERT_NE(s, nullptr);
  auto first = fetch_n(*s, 1);
  ASSERT_EQ(first.size(), 1u);
  const auto at = SteadyClock::now();
  ASSERT_TRUE(s->retry(first[0], Duration(100)).ok());
  auto again = fetch_n(*s, 1, 15s);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_GE(SteadyClock::now() - at, 300ms);
  EXPECT_EQ(again[0].body, "m0");
  EXPECT_EQ(again[0].delivery_count, 2u);
  EXPECT_EQ(again[0].position, first[0].position) << "the same message, not a copy";
  ASSERT_TRUE(s->ack(again[0]).ok());
  EXPECT_TRUE(drained_within(*s, 10s));
}

TEST(PulsarSource, ALongerRetryDelayIsADelayedCopyThatKeepsItsOrigin) {
  const std::string topic = fresh("delayed");
  publish(topic, 1);
  auto s = source(topic, "sub", "nack_delay_ms=200");
  ASSERT_NE(s, nullptr);
  auto first = fetch_n(*s, 1);
  ASSERT_EQ(first.size(), 1u);
  const auto at = SteadyClock::now();
  ASSERT_TRUE(s->retry(first[0], Duration(2000)).ok());
  auto d = s->drained();
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(*d) << "the delayed copy waits in the topic";
  auto again = fetch_n(*s, 1, 15s);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_GE(SteadyClock::now() - at, 1800ms);
  EXPECT_EQ(again[0].body, "m0");
  EXPECT_EQ(again[0].key, "k0");
  EXPECT_EQ(again[0].delivery_count, 2u);
  EXPECT_FALSE(header(again[0], "idem-origin").empty());
  EXPECT_EQ(header(again[0], "idem-id"), "m0");
  ASSERT_TRUE(s->ack(again[0]).ok());
  EXPECT_TRUE(drained_within(*s, 10s));
}

TEST(PulsarSource, FailoverRetriesAreNegativeAcksWhateverTheDelay) {
  const std::string topic = fresh("failover-retry");
  publish(topic, 1);
  auto s = source(topic, "sub", "type=failover&nack_delay_ms=300");
  ASSERT_NE(s, nullptr);
  auto first = fetch_n(*s, 1);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(s->retry(first[0], Duration(60'000)).ok());
  auto again = fetch_n(*s, 1, 10s);
  ASSERT_EQ(again.size(), 1u) << "a Failover subscription cannot delay a copy: the nack delay bounds it";
  EXPECT_TRUE(header(again[0], "idem-origin").empty());
  ASSERT_TRUE(s->ack(again[0]).ok());
}

TEST(PulsarSource, DeadLetterIsPublishedWithItsReasonThenAcked) {
  const std::string topic = fresh("dlq");
  publish(topic, 2);
  auto s = source(topic, "sub");
  ASSERT_NE(s, nullptr);
  auto got = fetch_n(*s, 2);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(s->dead_letter(got[0], "bad_message", "not JSON").ok());
  ASSERT_TRUE(s->ack(got[1]).ok());
  EXPECT_TRUE(drained_within(*s, 10s));
  auto dead = broker().read_all(topic + "-DLQ");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].payload, "m0");
  EXPECT_EQ(dead[0].key, "k0");
  EXPECT_EQ(dead[0].properties["idem-reason"], "bad_message");
  EXPECT_EQ(dead[0].properties["idem-detail"], "not JSON");
  EXPECT_EQ(dead[0].properties["idem-id"], "m0");
  EXPECT_FALSE(dead[0].properties["idem-origin"].empty());
}

TEST(PulsarSource, ACopyOfAMessageInFlightIsNotHandedOutTwice) {
  const std::string topic = fresh("acktimeout");
  publish(topic, 3);
  auto s = source(topic, "sub", "ack_timeout_ms=1000");
  ASSERT_NE(s, nullptr);
  auto got = fetch_n(*s, 3);
  ASSERT_EQ(got.size(), 3u);
  // The ack timeout passes twice while the three wait here: the broker sends copies.
  std::vector<Delivery> more;
  const auto until = SteadyClock::now() + 2500ms;
  while (SteadyClock::now() < until) ASSERT_TRUE(s->fetch(10, Duration(100), more).ok());
  EXPECT_TRUE(more.empty()) << more.size() << " copies handed out while the first deliveries were in flight";
  for (const Delivery& d : got) ASSERT_TRUE(s->ack(d).ok());
  EXPECT_TRUE(drained_within(*s, 10s));
}

TEST(PulsarSource, AnUnreachableBrokerIsUnavailableQuickly) {
  Options o = options("t", "s", "connect_timeout_ms=2000&token=tok-SECRET-9");
  o.port = 1;
  const auto at = SteadyClock::now();
  auto s = open(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  // A refused connection answers at once; an open that retried or hung would pass the
  // 2 s connect timeout several times over. 5 times it tells the two apart on a loaded
  // machine.
  EXPECT_LT(SteadyClock::now() - at, 5 * 2s);
  EXPECT_EQ(s.status().message().find("tok-SECRET-9"), std::string::npos);
}

TEST(PulsarSource, AnUnknownNamespaceIsRefused) {
  auto o = parse_uri("pulsar-ws://127.0.0.1:" + std::to_string(broker().web_port()) +
                     "/public/no-such-namespace/t?subscription=s");
  ASSERT_TRUE(o.ok());
  auto s = open(*o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition) << s.status().to_string();
}

// Last: the broker goes away under a consumer and comes back.
#ifdef IDEM_TESTS_WITH_LEDGER_EXAMPLE
// examples/ledger on this broker: every payment applied once, in order, one event each.
TEST(PulsarSource, TheLedgerExampleAppliesEachPaymentOnceInOrder) {
  idem::testing::TempDir dir("pulsar-ledger");
  ledger_example::run({.payments_to = broker().uri("ledger-payments", ""),
                       .payments_from = broker().uri("ledger-payments", "ledger"),
                       .events_to = broker().uri("ledger-credited", ""),
                       .events_from = broker().uri("ledger-credited", "check")},
                      dir.str());
}

#endif

TEST(PulsarSource, ConnectsAgainAfterTheBrokerRestarts) {
  const std::string topic = fresh("restart");
  publish(topic, 10);
  auto s = source(topic, "sub");
  ASSERT_NE(s, nullptr);
  auto got = fetch_n(*s, 4);
  ASSERT_EQ(got.size(), 4u);
  for (const Delivery& d : got) ASSERT_TRUE(s->ack(d).ok());
  ASSERT_TRUE(broker().restart().ok());
  // Acks the broker had not yet written down come again, so m0..m3 may too.
  std::set<std::string> bodies;
  const auto deadline = SteadyClock::now() + 60s;
  bool unavailable_seen = false;
  auto has_the_rest = [&] {
    for (int i = 4; i < 10; ++i)
      if (bodies.count("m" + std::to_string(i)) == 0) return false;
    return true;
  };
  while (!has_the_rest() && SteadyClock::now() < deadline) {
    std::vector<Delivery> out;
    Status st = s->fetch(10, Duration(200), out);
    if (st.code() == StatusCode::kUnavailable) unavailable_seen = true;
    for (const Delivery& d : out) {
      if (s->ack(d).ok()) bodies.insert(d.body);
    }
  }
  EXPECT_TRUE(unavailable_seen) << "the first fetch after the restart finds the connection gone";
  for (int i = 4; i < 10; ++i) EXPECT_TRUE(bodies.count("m" + std::to_string(i))) << "m" << i;
  EXPECT_TRUE(drained_within(*s, 20s));
}

}  // namespace
}  // namespace idem::pulsar

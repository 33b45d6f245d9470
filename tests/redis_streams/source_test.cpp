// The Redis Streams source on a real server: the group at the stream's start, the
// four decisions, delivery counts, claims of a dead consumer's entries, reconnects,
// URIs without leaked secrets.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>

#include "idem/redis_stream_source.hpp"
#include "support/redis_server.hpp"
#ifdef IDEM_TESTS_WITH_LEDGER_EXAMPLE
#include "support/ledger_example.hpp"
#include "support/temp_dir.hpp"
#endif

namespace idem::redis_streams {
namespace {

using redis_test::RedisServer;

class StreamSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = RedisServer::start({});
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value();
  }

  Options options(const std::string& consumer) const {
    Options o;
    o.port = server_->port();
    o.stream = "orders";
    o.group = "g";
    o.consumer = consumer;
    o.lease = Duration(300);
    o.claim_every = Duration(50);
    return o;
  }

  void publish(std::vector<std::string> bodies) {
    auto p = open_publisher(options("publisher"));
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    std::vector<OutgoingMessage> messages;
    for (std::string& b : bodies) messages.push_back({.body = std::move(b)});
    ASSERT_TRUE((*p)->publish(messages).ok());
  }

  // Like the runtime: the decisions so far are flushed before each fetch.
  std::vector<Delivery> fetch(MessageSource& s, std::size_t max, Duration timeout = Duration(100)) {
    EXPECT_TRUE(s.flush().ok());
    std::vector<Delivery> out;
    EXPECT_TRUE(s.fetch(max, timeout, out).ok());
    return out;
  }

  // Like the runtime: flush, then ask.
  bool drained(MessageSource& s) {
    EXPECT_TRUE(s.flush().ok());
    auto d = s.drained();
    EXPECT_TRUE(d.ok()) << d.status().to_string();
    return d.ok() && *d;
  }

  std::size_t pending() {
    auto r = server_->command({"XPENDING", "orders", "g"});
    EXPECT_TRUE(r.ok());
    return r.ok() && !r->elements.empty() ? static_cast<std::size_t>(r->elements.at(0).integer) : 0;
  }

  std::unique_ptr<RedisServer> server_;
};

TEST_F(StreamSourceTest, ConsumesWhatWasPublishedBeforeTheGroupExisted) {
  publish({"one", "two"});
  auto src = open(options("c1"));
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  auto got = fetch(**src, 10);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].body, "one");
  EXPECT_EQ(got[1].body, "two");
  EXPECT_EQ(got[0].delivery_count, 1u);
  EXPECT_EQ(got[0].partition, "orders");
  EXPECT_FALSE(drained(**src));
  ASSERT_TRUE((*src)->ack(got[0]).ok());
  ASSERT_TRUE((*src)->ack(got[1]).ok());
  EXPECT_TRUE(drained(**src));
}

TEST_F(StreamSourceTest, AcksAreOneXackAtFlush) {
  publish({"a", "b"});
  auto src = open(options("c1")).value();
  auto got = fetch(*src, 10);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(src->ack(got[0]).ok());
  ASSERT_TRUE(src->ack(got[1]).ok());
  EXPECT_EQ(pending(), 2u);  // deferred
  std::vector<Delivery> out;
  ASSERT_TRUE(src->fetch(10, Duration(0), out).ok());
  EXPECT_EQ(pending(), 2u);  // a fetch does not send them
  ASSERT_TRUE(src->flush().ok());
  EXPECT_EQ(pending(), 0u);
}

TEST_F(StreamSourceTest, RetryComesBackAfterItsDelayWithAHigherCount) {
  publish({"m"});
  auto src = open(options("c1")).value();
  auto got = fetch(*src, 10);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(src->retry(got[0], Duration(200)).ok());
  EXPECT_TRUE(fetch(*src, 10, Duration(0)).empty());  // not before its delay
  EXPECT_FALSE(drained(*src));
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  auto again = fetch(*src, 10, Duration(0));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].broker_id, got[0].broker_id);
  EXPECT_EQ(again[0].delivery_count, 2u);
  ASSERT_TRUE(src->ack(again[0]).ok());
  EXPECT_TRUE(drained(*src));
}

TEST_F(StreamSourceTest, DeadLetterWritesTheDlqAndAcks) {
  publish({"poison"});
  auto src = open(options("c1")).value();
  auto got = fetch(*src, 10);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(src->dead_letter(got[0], "bad_message", "not JSON").ok());
  EXPECT_TRUE(drained(*src));
  auto dlq = server_->command({"XRANGE", "orders:dlq", "-", "+"});
  ASSERT_TRUE(dlq.ok());
  ASSERT_EQ(dlq->elements.size(), 1u);
  const auto& fields = dlq->elements.at(0).elements.at(1).elements;
  std::map<std::string, std::string> f;
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) f[fields.at(i).str] = fields.at(i + 1).str;
  EXPECT_EQ(f["body"], "poison");
  EXPECT_EQ(f["reason"], "bad_message");
  EXPECT_EQ(f["detail"], "not JSON");
  EXPECT_EQ(f["id"], got[0].broker_id);
}

// A dead-letter stream that cannot be written (its key holds a string) fails the
// dead letter and leaves the entry pending, never acked without its copy.
TEST_F(StreamSourceTest, ADeadLetterThatCannotBeWrittenLeavesTheEntryPending) {
  publish({"poison"});
  ASSERT_TRUE(server_->command({"SET", "orders:dlq", "not a stream"}).ok());
  auto src = open(options("c1")).value();
  auto got = fetch(*src, 10);
  ASSERT_EQ(got.size(), 1u);
  const Status s = src->dead_letter(got[0], "bad_message", "not JSON");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("WRONGTYPE"), std::string::npos) << s.to_string();
  EXPECT_EQ(pending(), 1u) << "the entry was acked without its dead letter";
  ASSERT_TRUE(server_->command({"DEL", "orders:dlq"}).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // past the lease: claimed again
  got = fetch(*src, 10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_GE(got[0].delivery_count, 2u);
  ASSERT_TRUE(src->dead_letter(got[0], "bad_message", "not JSON").ok());
  EXPECT_EQ(pending(), 0u);
}

// A consumer cut off past the lease whose dead letter runs late, after another
// consumer claimed the entry: only the holder writes it, so the dead-letter stream
// gets one copy, not two.
TEST_F(StreamSourceTest, ALateDeadLetterOfAnEntryClaimedByAnotherConsumerWritesNothing) {
  publish({"poison"});
  auto cut = open(options("cut")).value();
  auto other = open(options("other")).value();
  auto got = fetch(*cut, 10);
  ASSERT_EQ(got.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(350));  // past the lease
  auto claimed = fetch(*other, 10);
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(cut->dead_letter(got[0], "bad_message", "not JSON").ok());  // the late one
  EXPECT_EQ(pending(), 1u) << "the holder's entry was acked by the consumer that lost it";
  ASSERT_TRUE(other->dead_letter(claimed[0], "bad_message", "not JSON").ok());
  EXPECT_EQ(pending(), 0u);
  auto dlq = server_->command({"XLEN", "orders:dlq"});
  ASSERT_TRUE(dlq.ok());
  EXPECT_EQ(dlq->integer, 1) << "a dead letter written by both consumers";
}

TEST_F(StreamSourceTest, ADeadConsumersEntriesAreClaimedAfterTheLease) {
  publish({"a", "b", "c"});
  auto dead = open(options("dead")).value();
  ASSERT_EQ(fetch(*dead, 10).size(), 3u);  // then it "dies": never acks
  auto alive = open(options("alive")).value();
  EXPECT_TRUE(fetch(*alive, 10, Duration(0)).empty());  // still leased
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  auto claimed = fetch(*alive, 10, Duration(0));
  ASSERT_EQ(claimed.size(), 3u);
  for (const Delivery& d : claimed) {
    EXPECT_EQ(d.delivery_count, 2u);
    ASSERT_TRUE(alive->ack(d).ok());
  }
  EXPECT_TRUE(drained(*alive));
}

// A delivery whose handler runs past the lease stays with its consumer while the
// runtime calls keep_alive(); once that stops, another consumer claims it.
TEST_F(StreamSourceTest, KeepAliveHoldsADeliveryPastTheLease) {
  publish({"slow"});
  auto a = open(options("a")).value();
  auto b = open(options("b")).value();
  auto got = fetch(*a, 10);
  ASSERT_EQ(got.size(), 1u);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1200);  // 4 leases
  while (std::chrono::steady_clock::now() < until) {
    a->keep_alive();
    EXPECT_TRUE(fetch(*b, 10, Duration(20)).empty()) << "claimed from a running handler";
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // no keep_alive: past the lease
  const auto taken = fetch(*b, 10);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].delivery_count, 2u) << "keep_alive does not count as a delivery";
}

TEST_F(StreamSourceTest, ARestartedConsumerOfTheSameNameGetsItsPendingEntriesFirst) {
  publish({"a"});
  {
    auto first = open(options("same")).value();
    ASSERT_EQ(fetch(*first, 10).size(), 1u);
  }
  auto second = open(options("same")).value();
  auto got = fetch(*second, 10, Duration(0));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, "a");
  EXPECT_EQ(got[0].delivery_count, 2u);
}

TEST_F(StreamSourceTest, ReconnectsAfterTheServerRestarts) {
  auto src = open(options("c1")).value();
  server_->kill();
  std::vector<Delivery> out;
  EXPECT_EQ(src->fetch(10, Duration(0), out).code(), StatusCode::kUnavailable);
  ASSERT_TRUE(server_->restart().ok());
  publish({"after"});  // the group is gone with the data (no persistence): made again
  ASSERT_TRUE(src->fetch(10, Duration(100), out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].body, "after");
}

#ifdef IDEM_TESTS_WITH_LEDGER_EXAMPLE
// examples/ledger on this broker: every payment applied once, in order, one event each.
TEST_F(StreamSourceTest, TheLedgerExampleAppliesEachPaymentOnceInOrder) {
  idem::testing::TempDir dir("stream-ledger");
  const std::string base = "redis-stream://127.0.0.1:" + std::to_string(server_->port());
  ledger_example::run({.payments_to = base + "/payments",
                       .payments_from = base + "/payments?group=ledger",
                       .events_to = base + "/credited",
                       .events_from = base + "/credited?group=check"},
                      dir.str());
}

#endif

TEST(StreamSourceUri, ParsesEveryPartAndNeverEchoesThePassword) {
  auto o = parse_uri("redis-stream://app:s3cret@127.0.0.1:6380/orders?group=g&consumer=c&db=2&dlq=dead");
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->user, "app");
  EXPECT_EQ(o->password, "s3cret");
  EXPECT_EQ(o->port, 6380);
  EXPECT_EQ(o->stream, "orders");
  EXPECT_EQ(o->group, "g");
  EXPECT_EQ(o->consumer, "c");
  EXPECT_EQ(o->db, 2);
  EXPECT_EQ(o->dead_letter_stream, "dead");
  for (const char* bad :
       {"redis-stream://:s3cret@127.0.0.1:99999/orders?group=g", "redis-stream://:s3cret@127.0.0.1:6379?group=g",
        "redis://:s3cret@127.0.0.1:6379/x", "redis-stream://:s3cret@127.0.0.1:6379/x?group=g&nope=1"}) {
    auto r = parse_uri(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().find("s3cret"), std::string::npos) << r.status().message();
  }
}

TEST(StreamSourceOpen, AnUnreachableServerIsUnavailableQuickly) {
  Options o;
  o.port = 1;
  o.stream = "s";
  o.group = "g";
  o.password = "s3cret";
  const auto start = std::chrono::steady_clock::now();
  auto src = open(o);
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(src.status().message().find("s3cret"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
}  // namespace idem::redis_streams

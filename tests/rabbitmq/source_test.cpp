// The RabbitMQ source on a private node: queues declared when absent, the four
// decisions, delivery counts (classic and quorum queues), retry buckets, a closed
// consumer's deliveries redelivered, reconnects across a node restart, errors without
// the password. One node for the whole binary; each test has its own queue.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "idem/rabbitmq_source.hpp"
#include "support/rabbitmq_server.hpp"
#ifdef IDEM_TESTS_WITH_LEDGER_EXAMPLE
#include "support/ledger_example.hpp"
#include "support/temp_dir.hpp"
#endif

namespace idem::rabbitmq {
namespace {

using rabbitmq_test::RabbitServer;
using Clock = std::chrono::steady_clock;

class QueueSourceTest : public ::testing::Test {
 protected:
  RabbitServer& server() { return RabbitServer::shared(); }

  Options options(const std::string& queue) {
    auto o = parse_uri(server().uri(queue));
    EXPECT_TRUE(o.ok()) << o.status().to_string();
    o->connect_timeout = Duration(10'000);  // a loaded CI machine
    return *o;
  }

  void publish(const Options& o, std::vector<std::string> bodies) {
    auto p = open_publisher(o);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    std::vector<OutgoingMessage> messages;
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      messages.push_back({.id = "id-" + bodies[i], .body = std::move(bodies[i]), .headers = {{"h", "v"}}});
    }
    ASSERT_TRUE((*p)->publish(messages).ok());
  }

  std::unique_ptr<MessageSource> source(const Options& o) {
    auto s = open(o);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // Like the runtime: the decisions so far are flushed before each fetch. Returns as
  // soon as a delivery came (the long default only matters on a loaded machine).
  std::vector<Delivery> fetch(MessageSource& s, std::size_t max, Duration timeout = Duration(5000)) {
    EXPECT_TRUE(s.flush().ok());
    std::vector<Delivery> out;
    const Status st = s.fetch(max, timeout, out);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return out;
  }

  // Fetches until `n` deliveries came or `timeout` passed.
  std::vector<Delivery> fetch_n(MessageSource& s, std::size_t n, Duration timeout) {
    EXPECT_TRUE(s.flush().ok());
    std::vector<Delivery> out;
    const auto deadline = Clock::now() + timeout;
    while (out.size() < n && Clock::now() < deadline) {
      EXPECT_TRUE(s.fetch(n - out.size(), Duration(50), out).ok());
    }
    return out;
  }

  // Like the runtime: flush, then ask.
  bool drained(MessageSource& s) {
    EXPECT_TRUE(s.flush().ok());
    auto d = s.drained();
    EXPECT_TRUE(d.ok()) << d.status().to_string();
    return d.ok() && *d;
  }
};

TEST_F(QueueSourceTest, ConsumesWhatWasPublishedBeforeTheConsumerExisted) {
  const Options o = options("before");
  publish(o, {"one", "two"});
  auto src = source(o);
  ASSERT_TRUE(src);
  auto got = fetch_n(*src, 2, Duration(2000));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].body, "one");
  EXPECT_EQ(got[1].body, "two");
  EXPECT_EQ(got[0].delivery_count, 1u);
  EXPECT_EQ(got[0].partition, "before");
  ASSERT_EQ(got[0].headers.size(), 1u);
  EXPECT_EQ(got[0].headers[0], (std::pair<std::string, std::string>("h", "v")));
  EXPECT_FALSE(drained(*src));
  ASSERT_TRUE(src->ack(got[0]).ok());
  ASSERT_TRUE(src->ack(got[1]).ok());
  EXPECT_TRUE(drained(*src));
  src->close();
  EXPECT_EQ(*server().ready("before"), 0u);  // the acks were committed
}

TEST_F(QueueSourceTest, PrefetchIsTheFirstFetchsMax) {
  const Options o = options("prefetch");
  publish(o, {"a", "b", "c", "d", "e"});
  auto src = source(o);
  ASSERT_TRUE(src);
  ASSERT_EQ(fetch(*src, 2).size(), 2u);
  EXPECT_TRUE(fetch(*src, 10, Duration(200)).empty());  // two unacked: the broker sends no more
  EXPECT_EQ(*server().ready("prefetch"), 3u);
}

TEST_F(QueueSourceTest, AcksWaitForFlushAndCountAgainstThePrefetchUntilThen) {
  const Options o = options("deferred");
  publish(o, {"a", "b", "c"});
  auto src = source(o);
  ASSERT_TRUE(src);
  auto got = fetch_n(*src, 2, Duration(2000));  // the prefetch is 2
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(src->ack(got[0]).ok());
  ASSERT_TRUE(src->ack(got[1]).ok());
  std::vector<Delivery> out;
  ASSERT_TRUE(src->fetch(10, Duration(300), out).ok());
  EXPECT_TRUE(out.empty());  // the acks are not sent yet: the broker sends nothing more
  ASSERT_TRUE(src->flush().ok());
  ASSERT_TRUE(src->fetch(10, Duration(2000), out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].body, "c");
}

TEST_F(QueueSourceTest, AcksAroundAnUnsettledDeliveryLeaveItWithTheBroker) {
  const Options o = options("coalesce");
  publish(o, {"a", "b", "c", "d", "e", "f"});
  auto src = source(o);
  auto got = fetch_n(*src, 6, Duration(2000));
  ASSERT_EQ(got.size(), 6u);
  for (int i : {0, 1, 3, 4}) ASSERT_TRUE(src->ack(got[i]).ok());
  src->hold(got[5]);
  EXPECT_FALSE(drained(*src));  // commits; c is undecided
  src->close();
  auto left = server().take_all("coalesce");
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->size(), 2u);
  EXPECT_EQ(left->at(0).body, "c");
  EXPECT_EQ(left->at(1).body, "f");
}

// Acks above an undecided delivery are kept back (they still count against the
// prefetch) until it is decided; then one `multiple` ack settles them all.
TEST_F(QueueSourceTest, AcksAboveAnUndecidedDeliveryWaitForItThenGoAsOne) {
  const Options o = options("fold");
  publish(o, {"a", "b", "c", "d", "e"});
  auto src = source(o);
  auto got = fetch_n(*src, 4, Duration(2000));  // the prefetch is 4
  ASSERT_EQ(got.size(), 4u);
  for (int i : {1, 2, 3}) ASSERT_TRUE(src->ack(got[i]).ok());
  EXPECT_TRUE(fetch(*src, 10, Duration(300)).empty());  // b, c, d wait for a: nothing more comes
  ASSERT_TRUE(src->ack(got[0]).ok());
  auto next = fetch(*src, 10);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].body, "e");
  ASSERT_TRUE(src->ack(next[0]).ok());
  EXPECT_TRUE(drained(*src));
  src->close();
  EXPECT_EQ(*server().ready("fold"), 0u);
}

TEST_F(QueueSourceTest, RetryWithoutDelayRequeuesItRedelivered) {
  const Options o = options("nack");
  publish(o, {"m"});
  auto src = source(o);
  auto got = fetch(*src, 10);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(src->retry(got[0], Duration(0)).ok());
  auto again = fetch(*src, 10);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].body, "m");
  EXPECT_EQ(again[0].delivery_count, 2u);
  ASSERT_TRUE(src->ack(again[0]).ok());
  EXPECT_TRUE(drained(*src));
}

TEST_F(QueueSourceTest, RetryWithADelayComesBackThroughItsBucketNoSooner) {
  const Options o = options("delay");
  publish(o, {"m"});
  auto src = source(o);
  auto got = fetch(*src, 10);
  ASSERT_EQ(got.size(), 1u);
  const auto retried_at = Clock::now();
  ASSERT_TRUE(src->retry(got[0], Duration(300)).ok());
  EXPECT_EQ(*server().ready("delay.retry.512ms"), 1u);
  EXPECT_FALSE(drained(*src));
  auto again = fetch_n(*src, 1, Duration(5000));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_GE(Clock::now() - retried_at, std::chrono::milliseconds(300));
  EXPECT_EQ(again[0].body, "m");
  EXPECT_EQ(again[0].delivery_count, 1u);  // a new message: idem's store counts retries
  ASSERT_TRUE(src->ack(again[0]).ok());
  EXPECT_TRUE(drained(*src));
}

TEST_F(QueueSourceTest, AShortRetryDoesNotWaitBehindALongOne) {
  const Options o = options("buckets");
  publish(o, {"long", "short"});
  auto src = source(o);
  auto got = fetch_n(*src, 2, Duration(2000));
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(src->retry(got[0], Duration(60'000)).ok());
  const auto retried_at = Clock::now();
  ASSERT_TRUE(src->retry(got[1], Duration(200)).ok());
  auto again = fetch_n(*src, 1, Duration(5000));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].body, "short");
  // Behind the long one it would have come after 60 s: half of that tells the two
  // apart on a machine however loaded.
  EXPECT_LT(Clock::now() - retried_at, std::chrono::milliseconds(30'000));
  EXPECT_EQ(*server().ready("buckets.retry.65536ms"), 1u);
}

TEST_F(QueueSourceTest, DeadLetterPublishesWithReasonAndDetailThenAcks) {
  const Options o = options("poison");
  publish(o, {"bad"});
  auto src = source(o);
  auto got = fetch(*src, 10);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(src->dead_letter(got[0], "bad_message", "not JSON").ok());
  EXPECT_TRUE(drained(*src));
  auto dlq = server().take_all("poison.dlq");
  ASSERT_TRUE(dlq.ok()) << dlq.status().to_string();
  ASSERT_EQ(dlq->size(), 1u);
  EXPECT_EQ(dlq->at(0).body, "bad");
  EXPECT_EQ(dlq->at(0).message_id, "id-bad");
  EXPECT_EQ(dlq->at(0).headers.at("reason"), "bad_message");
  EXPECT_EQ(dlq->at(0).headers.at("detail"), "not JSON");
  EXPECT_EQ(dlq->at(0).headers.at("h"), "v");
}

// flush() does not wait for the broker's commit-ok: several commits are in flight
// while the consumer goes on fetching. A dead letter waits for them and for its own,
// and close() for the last; a second consumer then finds nothing redelivered.
TEST_F(QueueSourceTest, PipelinedCommitsAllTakeEffect) {
  Options o = options("pipelined");
  o.prefetch = 50;
  std::vector<std::string> bodies;
  for (int i = 0; i < 400; ++i) bodies.push_back("m" + std::to_string(i));
  publish(o, bodies);
  auto src = source(o);
  std::size_t seen = 0;
  Delivery last;
  while (seen < bodies.size()) {
    auto got = fetch(*src, 25);  // flushes the acks so far: one commit per round
    ASSERT_FALSE(got.empty()) << "after " << seen;
    for (const Delivery& d : got) {
      if (++seen == bodies.size()) {
        last = d;
      } else {
        ASSERT_TRUE(src->ack(d).ok());
      }
    }
  }
  ASSERT_TRUE(src->dead_letter(last, "bad_message", "the last one").ok());
  src->close();
  EXPECT_EQ(*server().ready("pipelined"), 0u);
  EXPECT_EQ(*server().ready("pipelined.dlq"), 1u);
  auto second = source(o);
  EXPECT_TRUE(fetch(*second, 10, Duration(300)).empty()) << "every ack was committed";
}

TEST_F(QueueSourceTest, AClosedConsumersUndecidedDeliveriesGoToTheNext) {
  const Options o = options("handover");
  publish(o, {"a", "b"});
  {
    auto first = source(o);
    auto got = fetch_n(*first, 2, Duration(2000));
    ASSERT_EQ(got.size(), 2u);
    first->hold(got[0]);  // and b: never decided
    first->close();
  }
  auto second = source(o);
  auto got = fetch_n(*second, 2, Duration(2000));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].delivery_count, 2u);
  EXPECT_EQ(got[1].delivery_count, 2u);
}

TEST_F(QueueSourceTest, AQuorumQueueCountsDeliveries) {
  Options o = options("quorum");
  o.queue_type = "quorum";
  publish(o, {"q"});
  auto src = source(o);
  for (std::uint32_t n = 1; n <= 3; ++n) {
    auto got = fetch(*src, 10);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].delivery_count, n);
    const Status s = n < 3 ? src->retry(got[0], Duration(0)) : src->dead_letter(got[0], "retries_exhausted", "");
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  EXPECT_TRUE(drained(*src));
  EXPECT_EQ(*server().ready("quorum.dlq"), 1u);
}

TEST_F(QueueSourceTest, WrongCredentialsAreAClearErrorWithoutThePassword) {
  Options o = options("creds");
  o.password = "s3cret-wrong";
  auto src = open(o);
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(src.status().message().find("guest"), std::string::npos) << src.status().message();
  EXPECT_EQ(src.status().message().find("s3cret"), std::string::npos) << src.status().message();
  auto pub = open_publisher(o);
  ASSERT_FALSE(pub.ok());
  EXPECT_EQ(pub.status().message().find("s3cret"), std::string::npos);
}

// Last: restarts the shared node.
#ifdef IDEM_TESTS_WITH_LEDGER_EXAMPLE
// examples/ledger on this broker: every payment applied once, in order, one event each.
TEST_F(QueueSourceTest, TheLedgerExampleAppliesEachPaymentOnceInOrder) {
  idem::testing::TempDir dir("rabbitmq-ledger");
  ledger_example::run({.payments_to = server().uri("ledger-payments"),
                       .payments_from = server().uri("ledger-payments"),
                       .events_to = server().uri("ledger-credited"),
                       .events_from = server().uri("ledger-credited")},
                      dir.str());
}

#endif

TEST_F(QueueSourceTest, ZReconnectsAfterTheNodeRestarts) {
  const Options o = options("restart");
  publish(o, {"kept"});
  auto src = source(o);
  auto got = fetch(*src, 10);
  ASSERT_EQ(got.size(), 1u);
  server().kill();
  std::vector<Delivery> out;
  EXPECT_EQ(src->fetch(10, Duration(0), out).code(), StatusCode::kUnavailable);
  EXPECT_FALSE(src->ack(got[0]).ok());  // its channel is gone: the broker redelivers it
  const Status restarted = server().restart();
  ASSERT_TRUE(restarted.ok()) << restarted.to_string();
  auto again = fetch_n(*src, 1, Duration(5000));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].body, "kept");  // durable queue, persistent message
  ASSERT_TRUE(src->ack(again[0]).ok());
  EXPECT_TRUE(drained(*src));
}

TEST(QueueSourceUri, ParsesEveryPartAndNeverEchoesThePassword) {
  auto o = parse_uri("amqp://app:s3%2Fcret@rabbit.local:5673/%2F?queue=orders&queue_type=quorum&dlq=dead&prefetch=64");
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->user, "app");
  EXPECT_EQ(o->password, "s3/cret");
  EXPECT_EQ(o->host, "rabbit.local");
  EXPECT_EQ(o->port, 5673);
  EXPECT_EQ(o->vhost, "/");
  EXPECT_EQ(o->queue, "orders");
  EXPECT_EQ(o->queue_type, "quorum");
  EXPECT_EQ(o->dead_letter_queue, "dead");
  EXPECT_EQ(o->prefetch, 64);
  auto d = parse_uri("amqp://h/prod?queue=q");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->port, 5672);
  EXPECT_EQ(d->vhost, "prod");
  EXPECT_EQ(d->user, "guest");
  EXPECT_FALSE(d->tls.enabled);
  auto t = parse_uri("amqps://h/prod?queue=q&tls_insecure=1");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->port, 5671) << "AMQP over TLS's port";
  EXPECT_TRUE(t->tls.enabled);
  EXPECT_TRUE(t->tls.insecure);
  for (const char* bad :
       {"amqp://u:s3cret@h:99999/%2F?queue=q", "amqp://u:s3cret@h:5672/%2F", "amqps://u:s3cret@h/%2F?queue=q&tls=0",
        "amqp://u:s3cret@h:5672/%2F?queue=q&nope=1", "amqp://u:s3cret@h:5672/%2F?queue=q&queue_type=stream",
        "amqp://u:s3cret@h:5672/%zz?queue=q"}) {
    auto r = parse_uri(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().find("s3cret"), std::string::npos) << r.status().message();
  }
}

TEST(QueueSourceOpen, AnUnreachableBrokerIsUnavailableQuickly) {
  auto o = parse_uri("amqp://guest:s3cret@127.0.0.1:1/%2F?queue=q");
  ASSERT_TRUE(o.ok());
  const auto start = Clock::now();
  auto src = open(*o);
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(src.status().message().find("s3cret"), std::string::npos);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace idem::rabbitmq

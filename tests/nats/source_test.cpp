// The NATS JetStream source on a real nats-server: what it declares, the four
// decisions, delivery counts, a dead consumer's deliveries after AckWait, InProgress
// for slow work, reconnects, the publisher's Nats-Msg-Id, URIs and credentials without
// leaked secrets.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "idem/nats_source.hpp"
#include "support/nats_server.hpp"
#ifdef IDEM_TESTS_WITH_LEDGER_EXAMPLE
#include "support/ledger_example.hpp"
#include "support/temp_dir.hpp"
#endif

namespace idem::nats {
namespace {

using nats_test::NatsServer;
using std::chrono::milliseconds;

class NatsSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = NatsServer::start();
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value();
  }

  Options options(Duration lease = Duration(300)) const {
    Options o;
    o.port = server_->port();
    o.stream = "orders";
    o.durable = "d";
    o.lease = lease;
    return o;
  }

  void publish(std::vector<OutgoingMessage> messages) {
    auto p = open_publisher(options());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    ASSERT_TRUE((*p)->publish(messages).ok());
  }
  void publish_bodies(const std::vector<std::string>& bodies) {
    std::vector<OutgoingMessage> messages;
    for (const std::string& b : bodies) messages.push_back({.body = b});
    publish(std::move(messages));
  }

  static std::vector<Delivery> fetch(MessageSource& s, std::size_t max, Duration timeout = Duration(200)) {
    std::vector<Delivery> out;
    const Status st = s.fetch(max, timeout, out);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return out;
  }

  // Fetches until `want` deliveries came (each fetch waiting up to `timeout`) or 5 s
  // passed: a loaded machine may hand them over in more than one fetch.
  static std::vector<Delivery> fetch_count(MessageSource& s, std::size_t want, Duration timeout = Duration(200)) {
    std::vector<Delivery> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (out.size() < want && std::chrono::steady_clock::now() < deadline) {
      const Status st = s.fetch(want - out.size(), timeout, out);
      EXPECT_TRUE(st.ok()) << st.to_string();
      if (!st.ok()) break;
    }
    return out;
  }

  // drained() once the server has applied the acks sent before it (they are async).
  static bool eventually_drained(MessageSource& s) {
    for (int i = 0; i < 50; ++i) {
      auto d = s.drained();
      if (d.ok() && *d) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }

  std::unique_ptr<NatsServer> server_;
};

TEST_F(NatsSourceTest, DeclaresWhatItConsumesAndConsumesWhatCameBefore) {
  publish_bodies({"one", "two"});
  auto src = open(options());
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  auto consumer = server_->consumer("orders", "d");
  ASSERT_TRUE(consumer.ok()) << consumer.status().to_string();
  EXPECT_EQ(consumer->ack_wait_ms, 300);  // AckWait is the lease
  ASSERT_TRUE(server_->messages("orders_DLQ").ok());
  auto got = fetch_count(**src, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].body, "one");
  EXPECT_EQ(got[1].body, "two");
  EXPECT_EQ(got[0].delivery_count, 1u);
  EXPECT_EQ(got[0].partition, "orders");
  EXPECT_EQ(got[0].broker_id, "1");
  auto drained = (*src)->drained();
  ASSERT_TRUE(drained.ok());
  EXPECT_FALSE(*drained);
  ASSERT_TRUE((*src)->ack(got[0]).ok());
  ASSERT_TRUE((*src)->ack(got[1]).ok());
  EXPECT_TRUE(eventually_drained(**src));
  EXPECT_TRUE(fetch(**src, 10, Duration(0)).empty());
}

TEST_F(NatsSourceTest, AnExistingDurableTakesTheNewLease) {
  { ASSERT_TRUE(open(options(Duration(300))).ok()); }
  auto src = open(options(Duration(700)));
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_EQ(server_->consumer("orders", "d")->ack_wait_ms, 700);
}

TEST_F(NatsSourceTest, RetryComesBackAfterItsDelayWithAHigherCount) {
  publish_bodies({"m"});
  auto src = open(options(Duration(5000))).value();
  auto got = fetch_count(*src, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(src->retry(got[0], Duration(300)).ok());
  EXPECT_TRUE(fetch(*src, 10, Duration(0)).empty());  // not before its delay
  EXPECT_FALSE(*src->drained());
  std::this_thread::sleep_for(milliseconds(350));
  auto again = fetch_count(*src, 1, Duration(500));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].broker_id, got[0].broker_id);
  EXPECT_EQ(again[0].delivery_count, 2u);
  ASSERT_TRUE(src->ack(again[0]).ok());
  EXPECT_TRUE(eventually_drained(*src));
}

TEST_F(NatsSourceTest, DeadLetterPublishesWithReasonHeadersThenTerms) {
  publish_bodies({"poison"});
  auto src = open(options()).value();
  auto got = fetch_count(*src, 1);
  ASSERT_EQ(got.size(), 1u);
  const Status dl = src->dead_letter(got[0], "bad_message", "not JSON\nat all");
  ASSERT_TRUE(dl.ok()) << dl.to_string();
  EXPECT_TRUE(eventually_drained(*src));
  auto dlq = server_->messages("orders_DLQ");
  ASSERT_TRUE(dlq.ok());
  ASSERT_EQ(dlq->size(), 1u);
  const nats_test::StoredMessage& m = dlq->at(0);
  EXPECT_EQ(m.subject, "orders.dlq");
  EXPECT_EQ(m.body, "poison");
  EXPECT_EQ(m.headers.at("Idem-Reason"), "bad_message");
  EXPECT_EQ(m.headers.at("Idem-Detail"), "not JSON at all");
  EXPECT_EQ(m.headers.at("Idem-Stream-Seq"), "1");
  EXPECT_EQ(m.headers.at("Nats-Msg-Id"), "orders:1");
  std::this_thread::sleep_for(milliseconds(400));  // past AckWait: Term means never again
  EXPECT_TRUE(fetch(*src, 10, Duration(0)).empty());
}

TEST_F(NatsSourceTest, ADeadConsumersDeliveriesComeBackAfterAckWait) {
  publish_bodies({"a", "b", "c"});
  auto dead = open(options()).value();
  ASSERT_EQ(fetch_count(*dead, 3).size(), 3u);  // then it "dies": never acks
  auto alive = open(options()).value();
  EXPECT_TRUE(fetch(*alive, 10, Duration(0)).empty());  // still within AckWait
  std::this_thread::sleep_for(milliseconds(350));
  auto back = fetch_count(*alive, 3, Duration(500));
  ASSERT_EQ(back.size(), 3u);
  for (const Delivery& d : back) {
    EXPECT_EQ(d.delivery_count, 2u);
    ASSERT_TRUE(alive->ack(d).ok());
  }
  EXPECT_TRUE(eventually_drained(*alive));
}

TEST_F(NatsSourceTest, KeepAliveHoldsASlowDeliveryPastAckWait) {
  publish_bodies({"slow"});
  auto worker = open(options()).value();
  auto got = fetch_count(*worker, 1);
  ASSERT_EQ(got.size(), 1u);
  auto other = open(options()).value();
  const auto until = std::chrono::steady_clock::now() + milliseconds(1000);  // three AckWaits
  while (std::chrono::steady_clock::now() < until) {
    worker->keep_alive();
    EXPECT_TRUE(fetch(*other, 10, Duration(0)).empty());
    std::this_thread::sleep_for(milliseconds(30));
  }
  ASSERT_TRUE(worker->ack(got[0]).ok());
  EXPECT_TRUE(eventually_drained(*other));
}

TEST_F(NatsSourceTest, HoldLeavesTheDeliveryToAckWait) {
  publish_bodies({"h"});
  auto src = open(options()).value();
  auto got = fetch_count(*src, 1);
  ASSERT_EQ(got.size(), 1u);
  src->hold(got[0]);
  src->keep_alive();  // nothing to keep alive any more
  std::this_thread::sleep_for(milliseconds(350));
  auto again = fetch_count(*src, 1, Duration(500));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].delivery_count, 2u);
}

TEST_F(NatsSourceTest, ReconnectsAfterTheServerRestarts) {
  auto src = open(options()).value();
  server_->kill();
  Status s;
  for (int i = 0; i < 100 && s.code() != StatusCode::kUnavailable; ++i) {
    std::vector<Delivery> out;
    s = src->fetch(10, Duration(20), out);
  }
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.to_string();
  ASSERT_TRUE(server_->restart().ok());
  publish_bodies({"after"});
  std::vector<Delivery> out;
  for (int i = 0; i < 100 && out.empty(); ++i) {
    if (!src->fetch(10, Duration(50), out).ok()) std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].body, "after");
  EXPECT_TRUE(src->ack(out[0]).ok());
}

TEST_F(NatsSourceTest, ThePublisherSetsNatsMsgIdAndHeaders) {
  publish({{.id = "x1", .body = "first", .headers = {{"Trace", "t1"}}},
           {.id = "x1", .body = "resent"},  // dropped by the duplicate window
           {.id = "", .body = "no id"}});
  auto stored = server_->messages("orders");
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ(stored->at(0).body, "first");
  EXPECT_EQ(stored->at(0).headers.at("Nats-Msg-Id"), "x1");
  EXPECT_EQ(stored->at(0).headers.at("Trace"), "t1");
  EXPECT_EQ(stored->at(1).body, "no id");
  EXPECT_EQ(stored->at(1).headers.count("Nats-Msg-Id"), 0u);
  auto src = open(options()).value();
  auto got = fetch_count(*src, 2);
  ASSERT_EQ(got.size(), 2u);
  bool has_trace = false;
  for (const auto& [k, v] : got[0].headers) has_trace |= k == "Trace" && v == "t1";
  EXPECT_TRUE(has_trace);
}

TEST_F(NatsSourceTest, UnreachableAndWrongCredentialsAreClearAndSecretFree) {
  Options o = options();
  o.port = 1;
  o.user = "app";
  o.password = "s3cret";
  auto none = open(o);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(none.status().message().find("s3cret"), std::string::npos) << none.status().to_string();

  auto guarded = NatsServer::start({.user = "app", .password = "right"});
  ASSERT_TRUE(guarded.ok()) << guarded.status().to_string();
  o.port = (*guarded)->port();
  auto refused = open(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << refused.status().to_string();
  EXPECT_EQ(refused.status().message().find("s3cret"), std::string::npos) << refused.status().to_string();
  o.password = "right";
  EXPECT_TRUE(open(o).ok());
}

#ifdef IDEM_TESTS_WITH_LEDGER_EXAMPLE
// examples/ledger on this broker: every payment applied once, in order, one event each.
TEST_F(NatsSourceTest, TheLedgerExampleAppliesEachPaymentOnceInOrder) {
  idem::testing::TempDir dir("nats-ledger");
  const std::string payments = server_->uri() + "?stream=PAYMENTS&subject=payments";
  const std::string events = server_->uri() + "?stream=CREDITED&subject=credited";
  ledger_example::run({.payments_to = payments,
                       .payments_from = payments + "&durable=ledger",
                       .events_to = events,
                       .events_from = events + "&durable=check"},
                      dir.str());
}

#endif

TEST(NatsSourceUri, ParsesEveryPartAndNeverEchoesThePassword) {
  auto o = parse_uri(
      "nats://app:s3cret@127.0.0.1:4223?stream=orders&durable=d1&subject=orders.eu&dlq=dead.eu&dlq_stream=DEAD&"
      "max_ack_pending=500&connect_timeout_ms=700");
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->user, "app");
  EXPECT_EQ(o->password, "s3cret");
  EXPECT_EQ(o->host, "127.0.0.1");
  EXPECT_EQ(o->port, 4223);
  EXPECT_EQ(o->stream, "orders");
  EXPECT_EQ(o->durable, "d1");
  EXPECT_EQ(o->subject, "orders.eu");
  EXPECT_EQ(o->dead_letter_subject, "dead.eu");
  EXPECT_EQ(o->dead_letter_stream, "DEAD");
  EXPECT_EQ(o->max_ack_pending, 500);
  EXPECT_EQ(o->connect_timeout, Duration(700));

  for (const char* bad :
       {"nats://app:s3cret@127.0.0.1:4222", "nats://app:s3cret@127.0.0.1?stream=s",
        "nats://app:s3cret@127.0.0.1:0?stream=s", "nats://app:s3cret@127.0.0.1:4222?stream=s&x=1",
        "nats://app:s3cret@127.0.0.1:4222/s?stream=s", "redis://app:s3cret@127.0.0.1:4222?stream=s",
        "nats://:s3cret@127.0.0.1:4222?stream=s", "nats://app:s3cret@127.0.0.1:4222?stream=s&max_ack_pending=0"}) {
    auto r = parse_uri(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(r.status().message().find("s3cret"), std::string::npos) << r.status().to_string();
  }
  Options wild;
  wild.stream = "s";
  wild.durable = "d";
  wild.subject = "orders.*";
  EXPECT_EQ(open(wild).status().code(), StatusCode::kInvalidArgument);  // needs a dead-letter subject
}

}  // namespace
}  // namespace idem::nats

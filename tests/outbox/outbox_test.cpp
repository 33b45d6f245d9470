// The transactional outbox (docs/outbox.md): outgoing ids and the header codec; what
// Consumer::create and ctx.publish refuse; on SQLite, RocksDB and PostgreSQL, the outbox records
// (written with the commit, listed, marked sent, purged) and every crash point of
// dispatch: the process gone after the commit and before the publish, after the
// publish and before the "sent" update, a publish that fails, a duplicate whose
// outgoing messages are unsent. After each, the downstream sees every outgoing id
// at least once and no id it should not: exactly the right set after dedup. And the
// dead letters of buffered messages (ordering.dead_letter_to), which ride the same
// outbox: never lost to a crash after their commit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "idem/backend/store_wrapper.hpp"
#include "idem/consumer.hpp"
#include "idem/memory_store.hpp"
#include "support/entity_messages.hpp"
#include "support/temp_dir.hpp"
#ifdef IDEM_TEST_SQLITE
#include "idem/sqlite_store.hpp"
#endif
#ifdef IDEM_TEST_ROCKSDB
#include "idem/rocksdb_store.hpp"
#endif
#ifdef IDEM_TEST_POSTGRES
#include "idem/postgres_store.hpp"
#include "support/postgres_server.hpp"
#endif

namespace idem {
namespace {

using ::testing::HasSubstr;

// --- the downstream broker: what a publisher sent, by id -------------------------

struct Downstream {
  std::mutex mu;
  bool up = true;                         // false: opening a publisher fails (the broker is down)
  int fail_publishes = 0;                 // this many publish() calls fail (after sending nothing)
  int publish_calls = 0;                  // publish() calls that succeeded
  std::vector<OutgoingMessage> received;  // in arrival order, copies included
  std::vector<std::string> destinations;  // of each received message

  std::multiset<std::string> ids() {
    std::lock_guard lock(mu);
    std::multiset<std::string> out;
    for (const auto& m : received) out.insert(m.id);
    return out;
  }
  std::set<std::string> distinct() {
    auto all = ids();
    return {all.begin(), all.end()};
  }
};

class FakePublisher final : public Publisher {
 public:
  FakePublisher(std::shared_ptr<Downstream> d, std::string destination)
      : d_(std::move(d)), to_(std::move(destination)) {}
  Status publish(std::span<const OutgoingMessage> messages) override {
    std::lock_guard lock(d_->mu);
    if (d_->fail_publishes > 0) {
      --d_->fail_publishes;
      return unavailable("fake broker: publish refused");
    }
    ++d_->publish_calls;
    for (const auto& m : messages) {
      d_->received.push_back(m);
      d_->destinations.push_back(to_);
    }
    return ok_status();
  }

 private:
  std::shared_ptr<Downstream> d_;
  std::string to_;
};

PublisherFactory factory_of(std::shared_ptr<Downstream> d) {
  return [d](const std::string& destination) -> StatusOr<std::unique_ptr<Publisher>> {
    {
      std::lock_guard lock(d->mu);
      if (!d->up) return unavailable("fake broker: down");
    }
    return std::unique_ptr<Publisher>(std::make_unique<FakePublisher>(d, destination));
  };
}

// The store as the consumer sees it, counting the reads of one incoming id's unsent
// outgoing messages.
class CountingReads final : public StoreWrapper {
 public:
  using StoreWrapper::StoreWrapper;
  StatusOr<std::vector<OutboxEntry>> outbox_pending(const OutboxQuery& q) override {
    if (q.incoming_id) ++reads_of_one_id;
    return StoreWrapper::outbox_pending(q);
  }
  std::atomic<int> reads_of_one_id{0};
};

// --- the message ------------------------------------------------------------------

struct Msg {
  std::string id;
  std::vector<std::pair<std::string, std::string>> out;  // (destination, payload)
  bool fail = false;
};

Extractors<Msg> extractors() {
  Extractors<Msg> x;
  x.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  return x;
}

Msg two_out(const std::string& id) { return {id, {{"fake://a", id + "-x"}, {"fake://b", id + "-y"}}}; }

std::set<std::string> expected_ids(const std::vector<Msg>& ms) {
  std::set<std::string> out;
  for (const Msg& m : ms)
    for (std::uint32_t i = 0; i < m.out.size(); ++i) out.insert(outgoing_id(m.id, i));
  return out;
}

// Each id of `ids` once.
std::multiset<std::string> once(const std::set<std::string>& ids) { return {ids.begin(), ids.end()}; }

// --- outgoing ids, headers ---------------------------------------------------------

TEST(OutgoingId, IsTheIncomingIdAndThePosition) {
  EXPECT_EQ(outgoing_id("order-7", 0), "order-7#0");
  EXPECT_EQ(outgoing_id("order-7", 12), "order-7#12");
  EXPECT_EQ(outgoing_id("", 4294967295u), "#4294967295");
  // Injective: the incoming id is what precedes the last '#', even when it has one.
  EXPECT_NE(outgoing_id("a#1", 0), outgoing_id("a", 10));
  EXPECT_EQ(outgoing_id("a#1", 0), "a#1#0");
  std::set<std::string> seen;
  for (const char* in : {"a", "a#", "a#1", "#", "a1", "a#10"})
    for (std::uint32_t p : {0u, 1u, 10u, 11u}) EXPECT_TRUE(seen.insert(outgoing_id(in, p)).second) << in << " " << p;
  const std::string bytes("x\0y", 3);
  EXPECT_EQ(outgoing_id(bytes, 3), std::string("x\0y#3", 5));
}

TEST(OutboxHeaders, RoundTripAndRefuseTruncatedBytes) {
  const std::vector<std::pair<std::string, std::string>> h = {
      {"content-type", "application/json"}, {"", ""}, {std::string("k\0", 2), std::string(300, 'v')}};
  const std::string bytes = encode_headers(h);
  EXPECT_EQ(decode_headers(bytes), h);
  EXPECT_EQ(decode_headers(""), (std::vector<std::pair<std::string, std::string>>{}));
  for (std::size_t cut = 1; cut < bytes.size(); cut += 7)
    EXPECT_EQ(decode_headers(std::string_view(bytes).substr(0, bytes.size() - cut)), std::nullopt) << cut;
}

// --- what is refused ----------------------------------------------------------------

TEST(OutboxOptionsCheck, RefusedAtBuildTimeWithoutTransactionOrOutboxStore) {
  auto d = std::make_shared<Downstream>();
  ConsumerOptions o;
  o.store = memory::open().value();
  o.outbox.publishers = factory_of(d);
  auto no_txn = Consumer<Msg>::create(o, extractors(), [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  ASSERT_FALSE(no_txn.ok());
  EXPECT_EQ(no_txn.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(no_txn.status().message(), HasSubstr("transactional"));
#ifdef IDEM_TEST_SQLITE
  testing::TempDir dir("outbox");
  o.store = sqlite::open({.path = dir.sub("o.db")}).value();
  o.transactional = true;
  o.outbox.dispatch_batch = 0;
  auto zero = Consumer<Msg>::create(o, extractors(), [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("dispatch_batch"));
#endif
}

TEST(OutboxOptionsCheck, PublishWithoutAnOutboxFailsTheRunEvenIfTheHandlerReturnsOk) {
  ConsumerOptions o;
  o.store = memory::open().value();
  o.clock = std::make_shared<ManualClock>();
  o.max_retries = 0;
  Status seen = ok_status();
  auto c = Consumer<Msg>::create(o, extractors(), [&](const Msg&, HandlerContext& ctx) {
    seen = ctx.publish("fake://a", "x");
    return HandlerResult::ok();  // ignores the error
  });
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const Decision d = c->process(Msg{"m1", {}});
  EXPECT_EQ(seen.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(seen.message(), HasSubstr("no outbox"));
  EXPECT_EQ(d.action, Action::kDeadLetter);
  EXPECT_THAT(d.detail, HasSubstr("ctx.publish"));
  HandlerContext bare;  // a unit test's context has no outbox either
  EXPECT_EQ(bare.publish("fake://a", "x").code(), StatusCode::kFailedPrecondition);
}

// --- the stores ------------------------------------------------------------------------

struct Backend {
  const char* name;
  // Opens the store at dir (the same data on every call); its fault hook fails at the
  // point named by *fault (none while it is empty).
  std::function<std::shared_ptr<Store>(const std::string& dir, std::shared_ptr<std::string> fault)> open;
  const char* mark_sent_point;
  const char* commit_point;
  bool keeps_sent;  // sent entries stay until their expiry (else they are removed at once)
};

void PrintTo(const Backend& b, std::ostream* os) { *os << b.name; }

std::vector<Backend> backends() {
  std::vector<Backend> out;
#ifdef IDEM_TEST_SQLITE
  out.push_back({"sqlite",
                 [](const std::string& dir, std::shared_ptr<std::string> fault) {
                   sqlite::Options o;
                   o.path = dir + "/idem.db";
                   o.fault_hook = [fault](std::string_view point) {
                     return point == *fault ? unavailable("fault at " + std::string(point)) : ok_status();
                   };
                   return sqlite::open(o).value();
                 },
                 "outbox.mark_sent.before_commit", "commit.after_record", false});
#endif
#ifdef IDEM_TEST_ROCKSDB
  out.push_back({"rocksdb",
                 [](const std::string& dir, std::shared_ptr<std::string> fault) {
                   rocksdb::Options o;
                   o.path = dir + "/rocks";
                   o.fault_hook = [fault](std::string_view point) {
                     return point == *fault ? unavailable("fault at " + std::string(point)) : ok_status();
                   };
                   return rocksdb::open(o).value();
                 },
                 "rocksdb.outbox.mark_sent.write", "rocksdb.commit.write", true});
#endif
#ifdef IDEM_TEST_POSTGRES
  out.push_back({"postgres",
                 [](const std::string& dir, std::shared_ptr<std::string> fault) {
                   // One schema per test folder: a reopen finds the same data.
                   static std::map<std::string, std::string> schemas;
                   auto [it, fresh] = schemas.try_emplace(dir);
                   if (fresh) it->second = postgres_test::fresh_schema();
                   postgres_test::PostgresServer* server = postgres_test::shared_server();
                   if (server == nullptr) return StatusOr<std::shared_ptr<Store>>(unavailable("no server")).value();
                   postgres::Options o;
                   o.connection = server->connection();
                   o.schema = it->second;
                   o.pool_size = 4;
                   o.fault_hook = [fault](std::string_view point) {
                     return point == *fault ? unavailable("fault at " + std::string(point)) : ok_status();
                   };
                   return postgres::open(o).value();
                 },
                 "outbox.mark_sent.before_commit", "commit.after_record", true});
#endif
  return out;
}

class OutboxOn : public ::testing::TestWithParam<Backend> {
 protected:
  // A consumer over a freshly (re)opened store, as a restarted process has.
  void start() {
    consumer_.reset();
    counting_.reset();
    store_.reset();
    store_ = GetParam().open(dir_.str(), fault_);
    counting_ = std::make_shared<CountingReads>(store_);
    ConsumerOptions o;
    o.store = counting_;
    o.clock = clock_;
    o.transactional = true;
    o.max_retries = 2;
    o.backoff.initial = Duration{0};
    o.backoff.max = Duration{0};
    o.outbox.publishers = factory_of(down_);
    o.outbox.dispatch_batch = dispatch_batch_;
    consumer_ = std::make_unique<Consumer<Msg>>(
        Consumer<Msg>::create(o, extractors(), [this](const Msg& m, HandlerContext& ctx) {
          ++runs_[m.id];
          for (const auto& [to, payload] : m.out) {
            if (Status s = ctx.publish(to, payload, {{"h", m.id}}); !s.ok()) return HandlerResult::fail(s.to_string());
          }
          return m.fail ? HandlerResult::fail("asked to fail") : HandlerResult::ok();
        }).value());
  }

  std::vector<OutboxEntry> pending(std::optional<std::string_view> of = std::nullopt) {
    OutboxQuery q;
    q.incoming_id = of;
    q.max = 10'000;
    return store_->outbox()->outbox_pending(q).value();
  }

  testing::TempDir dir_{"outbox"};
  std::shared_ptr<std::string> fault_ = std::make_shared<std::string>();
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Downstream> down_ = std::make_shared<Downstream>();
  std::size_t dispatch_batch_ = 256;
  std::shared_ptr<Store> store_;
  std::shared_ptr<CountingReads> counting_;  // store_ as the consumer sees it
  std::unique_ptr<Consumer<Msg>> consumer_;
  std::map<std::string, int> runs_;
};

TEST_P(OutboxOn, RecordsAreWrittenWithTheCommitListedMarkedSentAndExpire) {
  store_ = GetParam().open(dir_.str(), fault_);
  ASSERT_NE(store_->outbox(), nullptr);
  const TimePoint t0 = clock_->now();
  auto entry = [&](const std::string& in, std::uint32_t pos) {
    OutboxEntry e;
    e.incoming_id = in;
    e.position = pos;
    e.destination = "fake://a";
    e.message = {outgoing_id(in, pos), "body-" + std::to_string(pos), {{"k", "v"}}};
    e.created_at = t0;
    return e;
  };
  // "a" and "ab": one incoming id is a prefix of the other.
  for (const std::string id : {"a", "ab"}) {
    ASSERT_EQ(store_->claim({id, "me", Duration{1000}, std::nullopt, t0, std::nullopt})->status, ClaimStatus::kNew);
    auto txn = store_->begin(t0).value();
    const std::vector<OutboxEntry> es = {entry(id, 0), entry(id, 1)};
    CommitRequest c{id, "me", std::nullopt, t0, Duration{60'000}};
    c.outbox = es;
    ASSERT_TRUE(txn->commit(c).ok());
  }
  // A rolled-back transaction writes none.
  {
    ASSERT_EQ(store_->claim({"c", "me", Duration{1000}, std::nullopt, t0, std::nullopt})->status, ClaimStatus::kNew);
    auto txn = store_->begin(t0).value();
    txn->rollback();
  }
  auto all = pending();
  ASSERT_EQ(all.size(), 4u);
  auto of_a = pending("a");
  ASSERT_EQ(of_a.size(), 2u);
  EXPECT_EQ(of_a[0].message.id, "a#0");
  EXPECT_EQ(of_a[1].message.id, "a#1");
  EXPECT_EQ(of_a[1].message.body, "body-1");
  EXPECT_EQ(of_a[1].message.headers, (std::vector<std::pair<std::string, std::string>>{{"k", "v"}}));
  EXPECT_EQ(of_a[1].destination, "fake://a");
  EXPECT_EQ(to_unix_ms(of_a[1].created_at), to_unix_ms(t0));
  OutboxQuery older;
  older.created_up_to = t0 - Duration{1};
  EXPECT_TRUE(store_->outbox()->outbox_pending(older)->empty());
  OutboxQuery two;
  two.max = 2;
  EXPECT_EQ(store_->outbox()->outbox_pending(two)->size(), 2u);

  ASSERT_TRUE(store_->outbox()->outbox_mark_sent(std::span(of_a).subspan(0, 1), t0, Duration{1000}).ok());
  EXPECT_EQ(pending("a").size(), 1u);
  EXPECT_EQ(pending("ab").size(), 2u);
  ASSERT_TRUE(store_->outbox()->outbox_mark_sent(of_a, t0, Duration{1000}).ok());  // again: skipped
  EXPECT_TRUE(pending("a").empty());
  EXPECT_EQ(pending().size(), 2u);
  // Sent entries are removed at once (SQLite), go with the purge (PostgreSQL) or the
  // store's own expiry (RocksDB).
  if (!store_->capabilities().native_ttl) {
    EXPECT_EQ(store_->purge_expired(t0 + Duration{999}, 100).value(), 0u);
    const std::size_t sent = GetParam().keeps_sent ? 2u : 0u;
    EXPECT_GE(store_->purge_expired(t0 + Duration{61'000}, 100).value(), 2u + sent);  // records "a", "ab"
    EXPECT_EQ(pending().size(), 2u) << "unsent entries are never purged";
  }
}

TEST_P(OutboxOn, EachOutgoingMessageIsSentOnceAfterTheCommitAndMarkedSent) {
  start();
  std::vector<Msg> ms;
  for (int i = 0; i < 5; ++i) ms.push_back(two_out("m" + std::to_string(i)));
  for (const Msg& m : ms) EXPECT_EQ(consumer_->process(m).reason, Reason::kProcessed);
  EXPECT_EQ(down_->ids(), once(expected_ids(ms)));
  // Each commit marks the messages sent before it; the last ones are marked by the
  // next commit or, idle, by tick().
  EXPECT_EQ(pending().size(), 2u);
  consumer_->tick();
  EXPECT_TRUE(pending().empty());
  // Each message's bytes, headers and destination as published.
  std::lock_guard lock(down_->mu);
  ASSERT_EQ(down_->received.size(), 10u);
  EXPECT_EQ(down_->received[0].id, "m0#0");
  EXPECT_EQ(down_->received[0].body, "m0-x");
  EXPECT_EQ(down_->destinations[0], "fake://a");
  EXPECT_EQ(down_->received[1].id, "m0#1");
  EXPECT_EQ(down_->destinations[1], "fake://b");
  EXPECT_EQ(down_->received[1].headers, (std::vector<std::pair<std::string, std::string>>{{"h", "m0"}}));
}

TEST_P(OutboxOn, AFailedHandlerOrCommitSendsNothing) {
  start();
  Msg failing = two_out("f");
  failing.fail = true;
  EXPECT_EQ(consumer_->process(failing).action, Action::kRetry);
  EXPECT_TRUE(pending().empty());
  EXPECT_TRUE(down_->ids().empty());
  // A commit that fails (rolled back with the handler's outbox entries).
  failing.fail = false;
  *fault_ = GetParam().commit_point;
  EXPECT_EQ(consumer_->process(failing).action, Action::kRetry);
  EXPECT_TRUE(pending().empty());
  EXPECT_TRUE(down_->ids().empty());
  fault_->clear();
  // Its successful attempt publishes with the same ids.
  EXPECT_EQ(consumer_->process(failing).reason, Reason::kProcessed);
  EXPECT_EQ(down_->distinct(), expected_ids({failing}));
}

// Crash point 1: the process dies after the commit, before the publish (here: the
// broker is down, so nothing is sent; then the process is gone). The restarted
// consumer's first call resends everything.
TEST_P(OutboxOn, CrashBetweenCommitAndDispatchIsResentAtStartUp) {
  start();
  down_->up = false;
  std::vector<Msg> ms;
  for (int i = 0; i < 6; ++i) ms.push_back(two_out("m" + std::to_string(i)));
  for (const Msg& m : ms) EXPECT_EQ(consumer_->process(m).reason, Reason::kProcessed);
  EXPECT_TRUE(down_->ids().empty());
  EXPECT_EQ(pending().size(), 12u);
  down_->up = true;
  start();  // the restart
  consumer_->tick();
  EXPECT_EQ(down_->ids(), once(expected_ids(ms))) << "each outgoing id exactly once";
  EXPECT_TRUE(pending().empty());
  for (const Msg& m : ms) EXPECT_EQ(runs_[m.id], 1) << "handlers ran once";
  consumer_->tick();
  EXPECT_EQ(down_->ids().size(), 12u) << "nothing is sent twice by later ticks";
}

// Crash point 2: the process dies after the publish, before the "sent" update lands
// (the update fails). The restart resends: copies downstream, the same ids.
TEST_P(OutboxOn, CrashBetweenPublishAndMarkSentResendsTheSameIds) {
  start();
  *fault_ = GetParam().mark_sent_point;
  std::vector<Msg> ms;
  for (int i = 0; i < 4; ++i) ms.push_back(two_out("m" + std::to_string(i)));
  for (const Msg& m : ms) EXPECT_EQ(consumer_->process(m).reason, Reason::kProcessed);
  EXPECT_EQ(down_->distinct(), expected_ids(ms));
  consumer_.reset();  // the last attempt to mark them fails too
  EXPECT_EQ(pending().size(), 8u) << "the sent update did not land";
  fault_->clear();
  start();
  consumer_->tick();
  EXPECT_EQ(down_->ids().size(), 16u) << "each sent twice";
  EXPECT_EQ(down_->distinct(), expected_ids(ms)) << "after dedup: exactly the outgoing ids";
  EXPECT_TRUE(pending().empty());
}

// A publish that fails: the entries stay unsent, the decision is still ack (the
// incoming message was processed), and the periodic resend sends them.
TEST_P(OutboxOn, AFailedPublishIsResentAfterResendAfter) {
  start();
  consumer_->tick();  // the start-up resend: nothing
  down_->fail_publishes = 1;
  const Msg m{"one", {{"fake://a", "p"}}};
  EXPECT_EQ(consumer_->process(m).reason, Reason::kProcessed);
  EXPECT_TRUE(down_->ids().empty());
  consumer_->tick();
  EXPECT_TRUE(down_->ids().empty()) << "not yet: resend_after has not passed";
  clock_->advance(Duration{5001});
  consumer_->tick();
  EXPECT_EQ(down_->distinct(), std::set<std::string>{"one#0"});
  consumer_->tick();
  EXPECT_TRUE(pending().empty());
}

// A duplicate of an incoming message whose outgoing messages are unsent dispatches
// them and does not run the handler.
TEST_P(OutboxOn, ADuplicateDispatchesTheUnsentOutgoingMessagesInsteadOfRunning) {
  start();
  consumer_->tick();
  down_->up = false;
  const Msg m = two_out("dup");
  EXPECT_EQ(consumer_->process(m).reason, Reason::kProcessed);
  EXPECT_EQ(pending("dup").size(), 2u);
  down_->up = true;
  const Decision again = consumer_->process(m);
  EXPECT_EQ(again.reason, Reason::kDuplicate);
  EXPECT_EQ(runs_["dup"], 1);
  EXPECT_EQ(down_->distinct(), expected_ids({m}));
  EXPECT_EQ(consumer_->process(m).reason, Reason::kDuplicate);
  EXPECT_EQ(down_->ids().size(), 2u) << "a later duplicate sends nothing";
}

// The claim of a completed id says, when asked (ClaimRequest::check_outbox), whether
// its outgoing messages are still unsent (ClaimResult::outbox_unsent): a duplicate
// reads the outbox only then.
TEST_P(OutboxOn, ADuplicateReadsTheOutboxOnlyWhenItsClaimSaysSomethingIsUnsent) {
  start();
  consumer_->tick();
  auto claim_of = [&](const std::string& id, bool check_outbox = true) {
    ClaimRequest q{id, "other", Duration{1000}, std::nullopt, clock_->now(), std::nullopt};
    q.check_outbox = check_outbox;
    return store_->claim(q).value();
  };
  const Msg sent = two_out("sent");
  EXPECT_EQ(consumer_->process(sent).reason, Reason::kProcessed);
  consumer_->tick();  // marks them sent
  ASSERT_TRUE(pending("sent").empty());
  const ClaimResult done = claim_of("sent");
  EXPECT_EQ(done.status, ClaimStatus::kCompleted);
  EXPECT_FALSE(done.outbox_unsent);
  const int before = counting_->reads_of_one_id.load();
  EXPECT_EQ(consumer_->process(sent).reason, Reason::kDuplicate);
  EXPECT_EQ(counting_->reads_of_one_id.load(), before) << "nothing unsent: no outbox read";

  down_->up = false;
  const Msg unsent = two_out("unsent");
  EXPECT_EQ(consumer_->process(unsent).reason, Reason::kProcessed);
  down_->up = true;
  const ClaimResult waiting = claim_of("unsent");
  EXPECT_EQ(waiting.status, ClaimStatus::kCompleted);
  EXPECT_TRUE(waiting.outbox_unsent);
  EXPECT_FALSE(claim_of("unsent", /*check_outbox=*/false).outbox_unsent) << "a claim that does not ask is not told";
  EXPECT_EQ(consumer_->process(unsent).reason, Reason::kDuplicate);
  EXPECT_EQ(counting_->reads_of_one_id.load(), before + 1);
  EXPECT_EQ(down_->distinct(), expected_ids({sent, unsent}));
  consumer_->tick();
  EXPECT_FALSE(claim_of("unsent").outbox_unsent) << "marked sent";
}

// process_batch: SQLite runs the batch in one transaction and sends its outgoing
// messages after that commit, dispatch_batch per publish call.
TEST_P(OutboxOn, ABatchIsSentAfterItsCommitInFewPublishCalls) {
  dispatch_batch_ = 8;
  start();
  std::vector<Msg> ms;
  for (int i = 0; i < 20; ++i) ms.push_back(two_out("b" + std::to_string(i)));
  const auto ds = consumer_->process_batch(ms);
  for (const Decision& d : ds) EXPECT_EQ(d.reason, Reason::kProcessed);
  EXPECT_EQ(down_->ids(), once(expected_ids(ms)));
  consumer_->tick();
  EXPECT_TRUE(pending().empty());
  if (store_->capabilities().batch_transactions) {
    EXPECT_EQ(down_->publish_calls, 2 * 3) << "two destinations, 20 messages each, 8 per call";
  }
}

// --- buffered dead letters (ordering.dead_letter_to) ---------------------------------

TEST(OutboxOptionsCheck, BufferedDeadLettersNeedStrictOrderingAndPublishers) {
  test::Journal j;
  ConsumerOptions o;
  o.store = memory::open().value();
  o.ordering.dead_letter_to = "fake://dlq";
  auto unordered = test::entity_consumer(o, j);
  ASSERT_FALSE(unordered.ok());
  EXPECT_THAT(unordered.status().message(), HasSubstr("ordering.mode = strict"));
  o.ordering.mode = Ordering::kStrict;
  auto no_publishers = test::entity_consumer(o, j);
  ASSERT_FALSE(no_publishers.ok());
  EXPECT_EQ(no_publishers.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(no_publishers.status().message(), HasSubstr("outbox.publishers"));
}

class BufferedDeadLetterOn : public OutboxOn {
 protected:
  // A strict consumer over a freshly (re)opened store: a gap older than 1 s is
  // dead-lettered, a failed run too (no retries), and the dead letters of buffered
  // messages go to fake://dlq through the outbox.
  void start_strict() {
    strict_.reset();
    store_.reset();
    store_ = GetParam().open(dir_.str(), fault_);
    ConsumerOptions o;
    o.store = store_;
    o.clock = clock_;
    o.transactional = true;
    o.max_retries = 0;
    o.ordering.mode = Ordering::kStrict;
    o.ordering.gap_policy = GapPolicy::kDeadLetter;
    o.ordering.gap_timeout = Duration{1000};
    o.ordering.dead_letter_to = "fake://dlq";
    o.outbox.publishers = factory_of(down_);
    strict_ = std::make_unique<Consumer<test::EntityMsg>>(test::entity_consumer(o, journal_).value());
  }

  std::size_t dead_letters_told() const {
    std::size_t n = 0;
    for (const BufferedOutcome& b : journal_.outcomes()) n += b.decision.action == Action::kDeadLetter;
    return n;
  }

  // The header `name` of the downstream's i-th message.
  std::string header(std::size_t i, const std::string& name) {
    std::lock_guard lock(down_->mu);
    for (const auto& [k, v] : down_->received.at(i).headers)
      if (k == name) return v;
    return "(none)";
  }

  test::Journal journal_;
  std::unique_ptr<Consumer<test::EntityMsg>> strict_;
};

// The gap policy dead-letters two buffered versions while the dead-letter broker is
// down, and the process dies before any resend: the restarted consumer sends both,
// once each, with the message as buffered and headers that say why.
TEST_P(BufferedDeadLetterOn, AGapsDeadLettersSurviveADownBrokerAndARestart) {
  start_strict();
  down_->up = false;
  const auto v3 = test::versioned("e3", "acct", 3), v4 = test::versioned("e4", "acct", 4);
  EXPECT_EQ(strict_->process(test::versioned("e1", "acct", 1)).reason, Reason::kProcessed);
  EXPECT_EQ(strict_->process(v3).reason, Reason::kBuffered);
  EXPECT_EQ(strict_->process(v4).reason, Reason::kBuffered);
  clock_->advance(Duration{1001});
  strict_->tick();
  EXPECT_EQ(dead_letters_told(), 2u);
  EXPECT_TRUE(down_->ids().empty());
  EXPECT_EQ(pending().size(), 2u) << "committed with their dead-letter records";

  down_->up = true;
  start_strict();  // the restart
  strict_->tick();
  EXPECT_EQ(down_->ids(), (std::multiset<std::string>{"e3", "e4"}));
  EXPECT_TRUE(pending().empty());
  EXPECT_EQ(down_->destinations, (std::vector<std::string>{"fake://dlq", "fake://dlq"}));
  const std::size_t i3 = down_->received.at(0).id == "e3" ? 0 : 1;
  EXPECT_EQ(down_->received.at(i3).body, test::encode_entity_msg(v3));
  EXPECT_EQ(header(i3, "idem-reason"), "gap_timeout");
  EXPECT_EQ(header(i3, "idem-version"), "3");
  strict_->tick();
  EXPECT_EQ(down_->ids().size(), 2u) << "nothing is sent twice by later ticks";
}

// A drained message whose handler fails is dead-lettered during the drain: its dead
// letter is sent right after that commit, and its successor runs.
TEST_P(BufferedDeadLetterOn, ADrainedMessageThatFailsIsSentAfterItsCommit) {
  start_strict();
  journal_.fail("e3", true);
  EXPECT_EQ(strict_->process(test::versioned("e1", "acct", 1)).reason, Reason::kProcessed);
  EXPECT_EQ(strict_->process(test::versioned("e3", "acct", 3)).reason, Reason::kBuffered);
  EXPECT_EQ(strict_->process(test::versioned("e4", "acct", 4)).reason, Reason::kBuffered);
  EXPECT_EQ(strict_->process(test::versioned("e2", "acct", 2)).reason, Reason::kProcessed);
  EXPECT_EQ(down_->ids(), (std::multiset<std::string>{"e3"}));
  EXPECT_EQ(header(0, "idem-reason"), "retries_exhausted");
  EXPECT_EQ(header(0, "idem-origin"), "e3");
  EXPECT_EQ(header(0, "idem-key"), "acct");
  EXPECT_EQ(header(0, "idem-version"), "3");
  EXPECT_EQ(header(0, "idem-detail"), "told to fail");
  EXPECT_EQ(journal_.versions(), (std::vector<std::uint64_t>{1, 2, 4})) << "v3 used up its version";
  EXPECT_EQ(dead_letters_told(), 1u);
  strict_->tick();
  EXPECT_TRUE(pending().empty());
}

INSTANTIATE_TEST_SUITE_P(Stores, BufferedDeadLetterOn, ::testing::ValuesIn(backends()),
                         [](const ::testing::TestParamInfo<Backend>& i) { return std::string(i.param.name); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BufferedDeadLetterOn);

INSTANTIATE_TEST_SUITE_P(Stores, OutboxOn, ::testing::ValuesIn(backends()),
                         [](const ::testing::TestParamInfo<Backend>& i) { return std::string(i.param.name); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OutboxOn);

}  // namespace
}  // namespace idem

// Consumer::process(m, next) over idem::redis against a real redis-server: one store
// round trip per message, exactly-once under redelivery, the kept claim released when
// not used, a crash between the claim of next and its use, and decisions equal to
// the plain path's.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <map>

#include "idem/backend/store_wrapper.hpp"
#include "idem/consumer.hpp"
#include "idem/fingerprint.hpp"
#include "test_util.hpp"

namespace idem::redis_test {
namespace {

struct Msg {
  std::string id;
  std::string payload = "p";
};

Extractors<Msg> extractors() {
  Extractors<Msg> x;
  x.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  x.payload = [](const Msg& m) { return std::optional<std::string_view>(m.payload); };
  return x;
}

// Forwards to the real store and counts the calls that reach it.
class CountingStore final : public StoreWrapper {
 public:
  using StoreWrapper::StoreWrapper;
  StatusOr<ClaimResult> claim(const ClaimRequest& q) override {
    ++claims;
    return StoreWrapper::claim(q);
  }
  Status commit(const CommitRequest& q) override {
    ++commits;
    return StoreWrapper::commit(q);
  }
  CommitThenClaimResult commit_then_claim(const CommitRequest& c, const ClaimRequest& q) override {
    ++combined;
    return StoreWrapper::commit_then_claim(c, q);
  }
  StatusOr<std::uint32_t> release(const ReleaseRequest& q) override {
    ++releases;
    return StoreWrapper::release(q);
  }
  Status extend(const ExtendRequest& q) override {
    ++extends;
    return StoreWrapper::extend(q);
  }

  std::atomic<int> claims{0}, commits{0}, combined{0}, releases{0}, extends{0};
};

class RedisLookahead : public WithRedisServer {
 protected:
  ConsumerOptions consumer_options(std::shared_ptr<Store> store, std::string owner = "consumer-1") const {
    ConsumerOptions co;
    co.store = std::move(store);
    co.clock = clock_;
    co.owner = std::move(owner);
    co.lease = lease_;
    co.backoff.initial = Duration(10);
    co.backoff.max = Duration(10);
    return co;
  }

  std::optional<RecordInfo> record(std::string_view id) {
    auto r = store_->inspect(id, clock_->now());
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? *r : std::nullopt;
  }

  const Duration lease_{10'000};
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
};

TEST_F(RedisLookahead, RedisStoreDeclaresTheCombinedCall) { EXPECT_TRUE(store_->capabilities().combined_commit_claim); }

TEST_F(RedisLookahead, ASequentialConsumerMakesOneStoreCallPerMessage) {
  auto counting = std::make_shared<CountingStore>(store_);
  int runs = 0;
  auto consumer = Consumer<Msg>::create(consumer_options(counting), extractors(), [&](const Msg&, HandlerContext&) {
    ++runs;
    return HandlerResult::ok();
  });
  ASSERT_TRUE(consumer.ok()) << consumer.status().to_string();
  std::vector<Msg> ms;
  for (int i = 0; i < 50; ++i) ms.push_back({"m-" + std::to_string(i)});
  for (std::size_t i = 0; i + 1 < ms.size(); ++i) {
    Decision d = consumer->process(ms[i], ms[i + 1]);
    ASSERT_EQ(d.reason, Reason::kProcessed) << reason_name(d.reason) << " " << d.detail;
  }
  EXPECT_EQ(consumer->process(ms.back()).reason, Reason::kProcessed);
  EXPECT_EQ(runs, 50);
  // The first claim alone, then one commit+claim per message, then the last commit.
  EXPECT_EQ(counting->claims.load(), 1);
  EXPECT_EQ(counting->combined.load(), 49);
  EXPECT_EQ(counting->commits.load(), 1);
  EXPECT_EQ(counting->releases.load(), 0);
  for (const auto& m : ms) {
    auto r = record(m.id);
    ASSERT_TRUE(r.has_value()) << m.id;
    EXPECT_EQ(r->state, RecordState::kCompleted) << m.id;
  }
}

TEST_F(RedisLookahead, ExactlyOnceUnderRedelivery) {
  std::map<std::string, int> effects;   // successful handler runs per id
  std::map<std::string, int> attempts;  // every handler run
  auto consumer = Consumer<Msg>::create(consumer_options(store_), extractors(), [&](const Msg& m, HandlerContext&) {
    // Every id ending in 3 fails on its first attempt; the broker redelivers it later.
    if (m.id.back() == '3' && attempts[m.id]++ == 0) return HandlerResult::fail("first attempt fails");
    ++effects[m.id];
    return HandlerResult::ok();
  });
  ASSERT_TRUE(consumer.ok()) << consumer.status().to_string();
  constexpr int kIds = 200;
  std::deque<Msg> queue;
  for (int i = 0; i < kIds; ++i) {
    const std::string id = "id-" + std::to_string(i);
    queue.push_back({id});
    if (i % 7 == 0) queue.push_back({id});                                         // redelivered at once
    if (i % 11 == 0 && i > 20) queue.push_back({"id-" + std::to_string(i - 20)});  // redelivered later
  }
  int duplicates = 0, retries = 0, steps = 0;
  while (!queue.empty() && ++steps < 10'000) {
    Msg m = queue.front();
    queue.pop_front();
    Decision d = queue.empty() ? consumer->process(m) : consumer->process(m, queue.front());
    if (d.action == Action::kRetry) {
      ++retries;
      queue.push_back(m);
      continue;
    }
    ASSERT_EQ(d.action, Action::kAck) << reason_name(d.reason) << " " << d.detail;
    if (d.reason == Reason::kDuplicate) ++duplicates;
  }
  EXPECT_TRUE(queue.empty());
  ASSERT_EQ(effects.size(), static_cast<std::size_t>(kIds));
  for (const auto& [id, n] : effects) EXPECT_EQ(n, 1) << id;
  EXPECT_EQ(retries, 20) << "the ids ending in 3 failed once each";
  int redelivered = 0;
  for (int i = 0; i < kIds; ++i) redelivered += (i % 7 == 0) + (i % 11 == 0 && i > 20);
  EXPECT_EQ(duplicates, redelivered);
}

TEST_F(RedisLookahead, TheKeptClaimIsReleasedByACallForAnotherIdByFlushAndByDestruction) {
  auto consumer = Consumer<Msg>::create(consumer_options(store_), extractors(),
                                        [&](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  ASSERT_TRUE(consumer.ok());
  ASSERT_EQ(consumer->process(Msg{"a"}, Msg{"b"}).reason, Reason::kProcessed);
  auto held = record("b");
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->state, RecordState::kInProgress);
  EXPECT_EQ(held->owner, "consumer-1");
  // The broker delivers c instead of b: b's lease is given back, c runs.
  EXPECT_EQ(consumer->process(Msg{"c"}).reason, Reason::kProcessed);
  EXPECT_FALSE(record("b").has_value()) << "b was released";
  auto other = store_->claim({"b", "consumer-2", lease_, std::nullopt, clock_->now(), std::nullopt});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, ClaimStatus::kNew) << "another consumer can take b at once";

  ASSERT_EQ(consumer->process(Msg{"d"}, Msg{"e"}).reason, Reason::kProcessed);
  ASSERT_TRUE(record("e").has_value());
  EXPECT_TRUE(consumer->flush_lookahead().ok());
  EXPECT_FALSE(record("e").has_value()) << "flush_lookahead released e";
  EXPECT_TRUE(consumer->flush_lookahead().ok()) << "nothing kept: OK";

  ASSERT_EQ(consumer->process(Msg{"h"}, Msg{"i"}).reason, Reason::kProcessed);
  ASSERT_TRUE(record("i").has_value());
  EXPECT_EQ(consumer->process(Msg{""}).reason, Reason::kBadMessage);
  EXPECT_FALSE(record("i").has_value()) << "a bad message in its place released i";

  ASSERT_EQ(consumer->process(Msg{"j"}, Msg{"k"}).reason, Reason::kProcessed);
  ASSERT_TRUE(record("k").has_value());
  std::vector<Msg> batch = {Msg{"k"}, Msg{"l"}};
  for (const Decision& d : consumer->process_batch(batch)) EXPECT_EQ(d.reason, Reason::kProcessed) << d.detail;

  ASSERT_EQ(consumer->process(Msg{"f"}, Msg{"g"}).reason, Reason::kProcessed);
  ASSERT_TRUE(record("g").has_value());
  { auto gone = std::move(consumer).value(); }  // destroys the consumer
  EXPECT_FALSE(record("g").has_value()) << "destruction released g";
}

TEST_F(RedisLookahead, AKeptClaimForTheSameIdWithAnotherPayloadIsReleasedAndClaimedAgain) {
  auto consumer = Consumer<Msg>::create(consumer_options(store_), extractors(),
                                        [&](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  ASSERT_TRUE(consumer.ok());
  ASSERT_EQ(consumer->process(Msg{"a"}, Msg{"b", "one"}).reason, Reason::kProcessed);
  Decision d = consumer->process(Msg{"b", "two"});
  EXPECT_EQ(d.reason, Reason::kProcessed) << reason_name(d.reason);
  auto r = record("b");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->state, RecordState::kCompleted);
  EXPECT_EQ(r->fingerprint, fingerprint("two"));
}

TEST_F(RedisLookahead, ALateCallRenewsTheKeptLeaseOrClaimsAgainWhenItWasLost) {
  TimePoint seen_lease{};
  auto consumer = Consumer<Msg>::create(consumer_options(store_), extractors(), [&](const Msg&, HandlerContext& ctx) {
    seen_lease = ctx.lease_expires_at();
    return HandlerResult::ok();
  });
  ASSERT_TRUE(consumer.ok());
  ASSERT_EQ(consumer->process(Msg{"a"}, Msg{"b"}).reason, Reason::kProcessed);
  clock_->advance(std::chrono::milliseconds(lease_.count() / 2));
  ASSERT_EQ(consumer->process(Msg{"b"}, Msg{"c"}).reason, Reason::kProcessed);
  EXPECT_EQ(seen_lease, clock_->now() + lease_) << "renewed: the handler got a whole lease";

  // c's lease expires and another consumer takes c: the late call answers in_progress.
  clock_->advance(std::chrono::milliseconds(lease_.count() + 1));
  auto other = store_->claim({"c", "consumer-2", lease_, fingerprint("p"), clock_->now(), std::nullopt});
  ASSERT_TRUE(other.ok());
  ASSERT_EQ(other->status, ClaimStatus::kNew);
  Decision d = consumer->process(Msg{"c"});
  EXPECT_EQ(d.action, Action::kRetry);
  EXPECT_EQ(d.reason, Reason::kInProgress) << reason_name(d.reason);
}

TEST_F(RedisLookahead, ACrashBetweenTheClaimOfNextAndItsUseLeavesNextClaimableAfterTheLease) {
  const TimePoint t0 = clock_->now();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The crashing consumer: its own connections, processes a with lookahead on b,
    // then dies without any destructor running.
    auto s = redis::open(options_);
    if (!s.ok()) _exit(2);
    ConsumerOptions co = consumer_options(std::move(s).value(), "crasher");
    auto consumer =
        Consumer<Msg>::create(co, extractors(), [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
    if (!consumer.ok()) _exit(3);
    Decision d = consumer->process(Msg{"a"}, Msg{"b"});
    _exit(d.reason == Reason::kProcessed ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  auto held = record("b");
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->state, RecordState::kInProgress);
  EXPECT_EQ(held->owner, "crasher");
  EXPECT_EQ(held->lease_until, t0 + lease_);

  int runs = 0;
  auto survivor =
      Consumer<Msg>::create(consumer_options(store_, "survivor"), extractors(), [&](const Msg&, HandlerContext&) {
        ++runs;
        return HandlerResult::ok();
      });
  ASSERT_TRUE(survivor.ok());
  Decision during = survivor->process(Msg{"b"});
  EXPECT_EQ(during.action, Action::kRetry);
  EXPECT_EQ(during.reason, Reason::kInProgress) << reason_name(during.reason);
  EXPECT_EQ(runs, 0);
  clock_->set(t0 + lease_ + std::chrono::milliseconds(1));
  Decision after = survivor->process(Msg{"b"});
  EXPECT_EQ(after.reason, Reason::kProcessed) << reason_name(after.reason);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(survivor->process(Msg{"a"}).reason, Reason::kDuplicate) << "a was committed before the crash";
}

TEST_F(RedisLookahead, DecisionsAreThoseOfThePlainPath) {
  // The same deliveries through a plain consumer and a lookahead consumer, each on its
  // own key prefix of the same server, with the same clock and the same handler.
  redis::Options plain_options = options_;
  plain_options.prefix += "plain:";
  auto plain_store = open_or_die(plain_options);
  ASSERT_NE(plain_store, nullptr);
  // Another owner holds "held" in both stores.
  for (auto* s : {static_cast<Store*>(store_.get()), static_cast<Store*>(plain_store.get())}) {
    auto c = s->claim({"held", "someone-else", lease_, fingerprint("p"), clock_->now(), std::nullopt});
    ASSERT_TRUE(c.ok());
    ASSERT_EQ(c->status, ClaimStatus::kNew);
  }
  auto make = [&](std::shared_ptr<Store> store, std::map<std::string, int>& attempts) {
    ConsumerOptions co = consumer_options(std::move(store));
    co.max_retries = 2;
    return Consumer<Msg>::create(co, extractors(), [&attempts](const Msg& m, HandlerContext& ctx) {
      const int n = ++attempts[m.id];
      if (m.id.rfind("fail", 0) == 0 && n <= 1) return HandlerResult::fail("transient");
      if (m.id.rfind("dead", 0) == 0) return HandlerResult::fail("always");
      if (m.id.rfind("later", 0) == 0 && n <= 1) return HandlerResult::retry_after(Duration(500), "not yet");
      if (m.id.rfind("throw", 0) == 0 && n <= 1) throw std::runtime_error("boom");
      return HandlerResult::ok("result-of-" + m.id + "-attempt-" + std::to_string(ctx.attempt()));
    });
  };
  std::map<std::string, int> plain_attempts, ahead_attempts;
  auto plain = make(plain_store, plain_attempts);
  auto ahead = make(store_, ahead_attempts);
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(ahead.ok());

  const std::vector<Msg> deliveries = {
      {"a"},     {"b"},     {"a"},          {"fail-1"}, {"fail-1"}, {"c"},       {"c"}, {"c", "other"},
      {"dead"},  {"dead"},  {"dead"},       {"dead"},   {"held"},   {"later-1"}, {"d"}, {"later-1"},
      {"throw"}, {"throw"}, {"b", "other"}, {"e"},      {"held"},   {"f"},       {""},  {"g"},
      {"g"},     {"h"},     {"fail-2"},     {"i"},      {"fail-2"}, {"a"},
  };
  for (std::size_t i = 0; i < deliveries.size(); ++i) {
    const Decision p = plain->process(deliveries[i]);
    const Decision a =
        i + 1 < deliveries.size() ? ahead->process(deliveries[i], deliveries[i + 1]) : ahead->process(deliveries[i]);
    SCOPED_TRACE("delivery " + std::to_string(i) + " id \"" + deliveries[i].id + "\"");
    EXPECT_EQ(a.action, p.action) << action_name(a.action) << " vs " << action_name(p.action);
    EXPECT_EQ(a.reason, p.reason) << reason_name(a.reason) << " vs " << reason_name(p.reason);
    EXPECT_EQ(a.result, p.result);
    EXPECT_EQ(a.delay, p.delay);
    EXPECT_EQ(a.detail, p.detail);
    clock_->advance(std::chrono::milliseconds(3));
  }
  EXPECT_EQ(ahead_attempts, plain_attempts);
  EXPECT_EQ(plain->metrics().snapshot().decisions, ahead->metrics().snapshot().decisions);
}

TEST_F(RedisLookahead, AnEntityGatedConsumerKeepsThePlainPath) {
  struct Versioned {
    std::string id, key;
    std::uint64_t version;
  };
  Extractors<Versioned> x;
  x.id = [](const Versioned& m) { return std::optional<std::string_view>(m.id); };
  x.key = [](const Versioned& m) { return std::optional<std::string_view>(m.key); };
  x.version = [](const Versioned& m) { return std::optional<std::uint64_t>(m.version); };
  ConsumerOptions co = consumer_options(store_);
  co.ordering.mode = Ordering::kMonotonic;
  int runs = 0;
  auto consumer = Consumer<Versioned>::create(co, x, [&](const Versioned&, HandlerContext&) {
    ++runs;
    return HandlerResult::ok();
  });
  ASSERT_TRUE(consumer.ok()) << consumer.status().to_string();
  EXPECT_EQ(consumer->process({"v1", "k", 1}, {"v2", "k", 2}).reason, Reason::kProcessed);
  auto next = store_->inspect_with_entity("v2", "k", clock_->now());
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value()) << "no claim was taken in advance";
  EXPECT_EQ(consumer->process({"v2", "k", 2}).reason, Reason::kProcessed);
  EXPECT_EQ(consumer->process({"v1", "k", 1}, {"v3", "k", 3}).reason, Reason::kDuplicate);
  EXPECT_EQ(runs, 2);
}

}  // namespace
}  // namespace idem::redis_test

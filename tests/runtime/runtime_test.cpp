// The consumer runtime over a fake source and the memory store: per-key order under
// N workers, bounded in flight, the failure-path throttle, graceful stop, bad
// messages, the exits, batches, partition revocation and keep-alives of slow work.
#include "idem/runtime.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "fake_source.hpp"
#include "idem/memory_store.hpp"

namespace idem::runtime_test {
namespace {

// Body: "id|key|seq" (key may be empty: unkeyed).
struct Msg {
  std::string id, key;
  int seq = 0;
};

StatusOr<Msg> decode(const Delivery& d) {
  const auto a = d.body.find('|');
  const auto b = a == std::string::npos ? a : d.body.find('|', a + 1);
  if (b == std::string::npos) return invalid_argument("want id|key|seq, got \"" + d.body + "\"");
  Msg m;
  m.id = d.body.substr(0, a);
  m.key = d.body.substr(a + 1, b - a - 1);
  m.seq = std::stoi(d.body.substr(b + 1));
  return m;
}

Extractors<Msg> extractors() {
  Extractors<Msg> x;
  x.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  x.key = [](const Msg& m) -> std::optional<std::string_view> {
    if (m.key.empty()) return std::nullopt;
    return std::string_view(m.key);
  };
  return x;
}

ConsumerOptions consumer_options() {
  ConsumerOptions o;
  o.store = memory::open().value();
  o.backoff.initial = Duration(1);
  o.backoff.max = Duration(1);
  return o;
}

std::string body(int i, const std::string& key, int seq) {
  return "m" + std::to_string(i) + "|" + key + "|" + std::to_string(seq);
}

// Records the handler's runs: per key the sequence numbers in order, and whether two
// runs of one key ever overlapped.
struct Recorder {
  std::mutex mu;
  std::map<std::string, std::vector<int>> by_key;
  std::map<std::string, int> active;
  bool overlapped = false;
  std::atomic<int> runs{0};

  HandlerResult operator()(const Msg& m, HandlerContext&) {
    {
      std::lock_guard lock(mu);
      if (!m.key.empty() && active[m.key]++ > 0) overlapped = true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    std::lock_guard lock(mu);
    if (!m.key.empty()) --active[m.key];
    by_key[m.key].push_back(m.seq);
    ++runs;
    return HandlerResult::ok();
  }
};

TEST(Runtime, KeepsPerKeyOrderUnderManyWorkers) {
  std::mt19937 rng(7);
  FakeSource source;
  std::map<std::string, int> next_seq;
  const int kMessages = 3000;
  for (int i = 0; i < kMessages; ++i) {
    const std::string key = i % 10 == 0 ? "" : "k" + std::to_string(rng() % 40);
    source.push(body(i, key, next_seq[key]++));
  }
  Recorder rec;
  auto consumer = Consumer<Msg>::create(consumer_options(), extractors(),
                                        [&](const Msg& m, HandlerContext& c) { return rec(m, c); });
  ASSERT_TRUE(consumer.ok()) << consumer.status().to_string();
  RuntimeOptions ro;
  ro.workers = 4;
  ro.idle_exit = Duration(50);
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode);
  ASSERT_TRUE(rt.ok());
  ASSERT_TRUE((*rt)->run().ok());

  EXPECT_EQ(rec.runs.load(), kMessages);
  EXPECT_FALSE(rec.overlapped);
  for (const auto& [key, seqs] : rec.by_key) {
    if (key.empty()) continue;
    for (std::size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], static_cast<int>(i)) << "key " << key;
  }
  EXPECT_EQ(source.count("ack"), static_cast<std::size_t>(kMessages));
  EXPECT_EQ(source.settled_twice(), 0u);
  EXPECT_EQ((*rt)->metrics().get(RuntimeMetrics::kDecided), static_cast<std::uint64_t>(kMessages));
}

TEST(Runtime, BoundsWhatIsInFlight) {
  FakeSource source;
  for (int i = 0; i < 2000; ++i) source.push(body(i, "k" + std::to_string(i % 3), i));
  Recorder rec;
  auto consumer = Consumer<Msg>::create(consumer_options(), extractors(),
                                        [&](const Msg& m, HandlerContext& c) { return rec(m, c); });
  RuntimeOptions ro;
  ro.workers = 2;
  ro.backlog = 10;
  ro.idle_exit = Duration(50);
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode).value();
  ASSERT_TRUE(rt->run().ok());
  // workers * batch + backlog = 2 * 1 + 10.
  EXPECT_LE(source.most_outstanding(), 12u);
  EXPECT_LE(source.largest_request(), 12u);
  EXPECT_EQ(source.count("ack"), 2000u);
}

TEST(Runtime, ThrottlesTheFailurePath) {
  FakeSource source;
  for (int i = 0; i < 30; ++i) source.push(body(i, "", 0));
  ConsumerOptions co = consumer_options();
  co.max_retries = 0;  // every failure is dead-lettered at once
  auto consumer = Consumer<Msg>::create(co, extractors(),
                                        [](const Msg&, HandlerContext&) { return HandlerResult::fail("poison"); });
  RuntimeOptions ro;
  ro.workers = 2;
  ro.failure_actions_per_second = 50;
  ro.failure_burst = 5;
  ro.idle_exit = Duration(20);
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode).value();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(rt->run().ok());
  const auto took = std::chrono::steady_clock::now() - start;
  // 30 actions, 5 at once, then 50 a second: at least 25 / 50 s. (A slow machine only
  // makes it longer.)
  EXPECT_GE(took, std::chrono::milliseconds(450));
  EXPECT_EQ(source.count("dead_letter"), 30u);
  EXPECT_GE(rt->metrics().get(RuntimeMetrics::kThrottled), 25u);
  for (const std::string& r : source.dead_reasons()) EXPECT_EQ(r, "retries_exhausted");
}

// The store records a dead letter before the broker holds it, so a copy of a
// dead-lettered message (here the broker's redelivery after a forward that never
// happened) is forwarded again, not acked: the destination misses none.
TEST(Runtime, ForwardsACopyOfADeadLetteredMessageAgain) {
  FakeSource source;
  source.push(body(7, "", 0));
  source.push(body(7, "", 0));
  source.push(body(8, "", 0));
  ConsumerOptions co = consumer_options();
  co.max_retries = 0;
  std::atomic<int> runs{0};
  auto consumer = Consumer<Msg>::create(co, extractors(), [&](const Msg& m, HandlerContext&) {
    ++runs;
    return m.id == "m7" ? HandlerResult::fail("poison") : HandlerResult::ok();
  });
  RuntimeOptions ro;
  ro.workers = 1;
  ro.idle_exit = Duration(20);
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode).value();
  ASSERT_TRUE(rt->run().ok());
  EXPECT_EQ(source.dead_reasons(), (std::vector<std::string>{"retries_exhausted", "duplicate"}));
  EXPECT_EQ(source.count("ack"), 1u);
  EXPECT_EQ(runs.load(), 2) << "the copy never reaches the handler";
}

TEST(Runtime, StopFinishesRunningWorkAndHoldsTheRest) {
  FakeSource source;
  for (int i = 0; i < 200; ++i) source.push(body(i, "k" + std::to_string(i % 2), i / 2));
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  bool release = false;
  auto consumer = Consumer<Msg>::create(consumer_options(), extractors(), [&](const Msg&, HandlerContext&) {
    std::unique_lock lock(mu);
    ++started;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return HandlerResult::ok();
  });
  RuntimeOptions ro;
  ro.workers = 2;
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode).value();
  Status result;
  std::thread loop([&] { result = rt->run(); });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return started == 2; });  // one per key, both blocked
  }
  rt->stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  loop.join();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(source.count("ack"), 2u);  // the two that ran
  EXPECT_EQ(source.count("ack") + source.count("hold"), source.calls().size());
  EXPECT_EQ(source.outstanding(), 0u);  // everything fetched was acked or held
  EXPECT_EQ(source.settled_twice(), 0u);
}

TEST(Runtime, KeepsSlowDeliveriesAliveOnlyWhileTheyAreInFlight) {
  FakeSource source;
  source.push(body(1, "a", 0));
  auto consumer = Consumer<Msg>::create(consumer_options(), extractors(), [](const Msg&, HandlerContext&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    return HandlerResult::ok();
  });
  RuntimeOptions ro;
  ro.workers = 1;
  ro.fetch_timeout = Duration(10);
  ro.idle_exit = Duration(100);
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode).value();
  ASSERT_TRUE(rt->run().ok());
  EXPECT_EQ(source.count("ack"), 1u);
  EXPECT_GE(source.keep_alives(), 5u);  // the loop steps at least every fetch_timeout
  EXPECT_EQ(source.keep_alives_idle(), 0u);
}

TEST(Runtime, DeadLettersWhatCannotBeDecodedAndGoesOn) {
  FakeSource source;
  source.push("not a message");
  source.push(body(1, "a", 0));
  Recorder rec;
  auto consumer = Consumer<Msg>::create(consumer_options(), extractors(),
                                        [&](const Msg& m, HandlerContext& c) { return rec(m, c); });
  RuntimeOptions ro;
  ro.workers = 1;
  ro.idle_exit = Duration(20);
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode).value();
  ASSERT_TRUE(rt->run().ok());
  ASSERT_EQ(source.dead_reasons(), std::vector<std::string>{"bad_message"});
  EXPECT_EQ(source.count("ack"), 1u);
  EXPECT_EQ(rec.runs.load(), 1);
}

TEST(Runtime, AppliedSeesEveryDecisionWithItsMessage) {
  FakeSource source;
  source.push("garbage");
  for (int i = 0; i < 40; ++i) source.push(body(i, "k" + std::to_string(i % 3), i / 3));
  auto consumer = Consumer<Msg>::create(consumer_options(), extractors(),
                                        [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  std::vector<std::string> seen;  // the loop thread only
  int undecoded = 0;
  RuntimeOptions ro;
  ro.workers = 2;
  ro.batch = 4;
  ro.idle_exit = Duration(20);
  auto rt =
      Runtime<Msg>::create(ro, source, *consumer, decode, [&](const Delivery& d, const Msg* m, const Decision& dec) {
        if (m == nullptr) {
          ++undecoded;
          EXPECT_EQ(d.body, "garbage");
          EXPECT_EQ(dec.reason, Reason::kBadMessage);
          return;
        }
        EXPECT_EQ(dec.reason, Reason::kProcessed);
        seen.push_back(m->id);
      }).value();
  ASSERT_TRUE(rt->run().ok());
  EXPECT_EQ(undecoded, 1);
  ASSERT_EQ(seen.size(), 40u);
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), 40u);  // each once, with its own message
}

// A worker takes about a millisecond of work at a time: with a 5 ms handler the
// decisions are applied as the messages run, not once a whole chunk of them has run
// (a chunk of 256 would hold the first decision back until all 60 had run). Counted in
// handler runs, not milliseconds, so that a loaded machine cannot fail it.
TEST(Runtime, ASlowHandlersDecisionsComeBackAsItRuns) {
  FakeSource source;
  for (int i = 0; i < 60; ++i) source.push(body(i, "", 0));
  std::mutex mu;
  std::map<std::string, int> ran;  // message id → how many handlers had returned when its own did
  int returned = 0;
  auto consumer = Consumer<Msg>::create(consumer_options(), extractors(), [&](const Msg& m, HandlerContext&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::lock_guard lock(mu);
    ran[m.id] = ++returned;
    return HandlerResult::ok();
  });
  RuntimeOptions ro;
  ro.workers = 1;
  ro.idle_exit = Duration(50);
  std::vector<int> ran_meanwhile;  // handlers that returned between a handler's return and its decision
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode, [&](const Delivery&, const Msg* m, const Decision&) {
              std::lock_guard lock(mu);
              ran_meanwhile.push_back(returned - ran.at(m->id));
            }).value();
  ASSERT_TRUE(rt->run().ok());
  ASSERT_EQ(ran_meanwhile.size(), 60u);
  std::sort(ran_meanwhile.begin(), ran_meanwhile.end());
  // The median decision waited for at most a few handler runs, not for tens of them.
  EXPECT_LE(ran_meanwhile[ran_meanwhile.size() / 2], 8);
}

TEST(Runtime, MaxMessagesDecidesExactlyThatMany) {
  FakeSource source;
  for (int i = 0; i < 500; ++i) source.push(body(i, "", 0));
  auto consumer = Consumer<Msg>::create(consumer_options(), extractors(),
                                        [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  RuntimeOptions ro;
  ro.workers = 2;
  ro.max_messages = 123;
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode).value();
  ASSERT_TRUE(rt->run().ok());
  EXPECT_EQ(source.count("ack"), 123u);
  EXPECT_EQ(source.outstanding(), 0u);
}

// Runs what `source` holds with `workers` workers and a handler whose first attempt
// of each id fails; returns the successful runs (-1 when run() fails).
int run_failing_first_attempts(FakeSource& source, std::size_t workers) {
  std::atomic<int> ok_runs{0};
  auto consumer = Consumer<Msg>::create(consumer_options(), extractors(), [&](const Msg&, HandlerContext& ctx) {
    if (ctx.attempt() == 1) return HandlerResult::fail("first attempt fails");
    ++ok_runs;
    return HandlerResult::ok();
  });
  RuntimeOptions ro;
  ro.workers = workers;
  ro.idle_exit = Duration(50);
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode).value();
  if (!rt->run().ok()) return -1;
  return ok_runs.load();
}

TEST(Runtime, RetriedMessagesComeBackAndSucceed) {
  FakeSource source;
  for (int i = 0; i < 50; ++i) source.push(body(i, "k" + std::to_string(i % 5), i / 5));
  EXPECT_EQ(run_failing_first_attempts(source, 2), 50);
  EXPECT_EQ(source.count("retry"), 50u);
  EXPECT_EQ(source.count("ack"), 50u);
}

// Pushes ids m0 … m<n-1>, unkeyed, each twice in a row (an original and its re-send).
void push_each_twice(FakeSource& source, int n) {
  for (int i = 0; i < n; ++i) {
    source.push(body(i, "", 0));
    source.push(body(i, "", 0));
  }
}

// Copies of one id fetched together (a producer's re-send) run one after another: the
// later copy waits for the earlier's decision and is then a duplicate, instead of
// meeting the earlier's lease and going back to the broker as in_progress.
TEST(Runtime, ACopyOfAnIdInFlightWaitsForItsDecision) {
  FakeSource source;
  const int kIds = 200;
  push_each_twice(source, kIds);
  std::mutex mu;
  std::map<std::string, int> runs, active;
  bool overlapped = false;
  auto consumer = Consumer<Msg>::create(consumer_options(), extractors(), [&](const Msg& m, HandlerContext&) {
    {
      std::lock_guard lock(mu);
      if (active[m.id]++ > 0) overlapped = true;
      ++runs[m.id];
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::lock_guard lock(mu);
    --active[m.id];
    return HandlerResult::ok();
  });
  std::atomic<int> duplicates{0};
  RuntimeOptions ro;
  ro.workers = 4;
  ro.idle_exit = Duration(50);
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode, [&](const Delivery&, const Msg*, const Decision& d) {
              if (d.reason == Reason::kDuplicate) ++duplicates;
            }).value();
  ASSERT_TRUE(rt->run().ok());
  EXPECT_FALSE(overlapped);
  EXPECT_EQ(runs.size(), static_cast<std::size_t>(kIds));
  for (const auto& [id, n] : runs) EXPECT_EQ(n, 1) << id;
  EXPECT_EQ(duplicates.load(), kIds);
  EXPECT_EQ(source.count("retry"), 0u);
  EXPECT_EQ(source.count("ack"), static_cast<std::size_t>(2 * kIds));
}

// A copy that waited behind a failed run runs the handler itself; the failed copy's
// retry then comes back a duplicate.
TEST(Runtime, ACopyBehindAFailedRunOfItsIdRunsTheHandler) {
  FakeSource source;
  const int kIds = 50;
  push_each_twice(source, kIds);
  EXPECT_EQ(run_failing_first_attempts(source, 4), kIds);
  EXPECT_EQ(source.count("retry"), static_cast<std::size_t>(kIds));
  EXPECT_EQ(source.count("ack"), static_cast<std::size_t>(2 * kIds));
}

TEST(Runtime, BatchesKeepPerKeyOrder) {
  FakeSource source;
  std::map<std::string, int> next_seq;
  for (int i = 0; i < 1000; ++i) {
    const std::string key = "k" + std::to_string(i % 7);
    source.push(body(i, key, next_seq[key]++));
  }
  Recorder rec;
  auto consumer = Consumer<Msg>::create(consumer_options(), extractors(),
                                        [&](const Msg& m, HandlerContext& c) { return rec(m, c); });
  RuntimeOptions ro;
  ro.workers = 2;
  ro.batch = 16;
  ro.idle_exit = Duration(50);
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode).value();
  ASSERT_TRUE(rt->run().ok());
  EXPECT_FALSE(rec.overlapped);
  for (const auto& [key, seqs] : rec.by_key)
    for (std::size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], static_cast<int>(i)) << "key " << key;
  EXPECT_EQ(source.count("ack"), 1000u);
}

TEST(Runtime, RevocationSettlesThePartitionBeforeItMoves) {
  FakeSource source;
  for (int i = 0; i < 400; ++i) source.push(body(i, "k" + std::to_string(i % 9), i), i % 2 ? "p1" : "p0");
  Recorder rec;
  auto consumer = Consumer<Msg>::create(consumer_options(), extractors(),
                                        [&](const Msg& m, HandlerContext& c) { return rec(m, c); });
  source.revoke_on_fetch(2, "p1");
  RuntimeOptions ro;
  ro.workers = 2;
  ro.idle_exit = Duration(50);
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode).value();
  ASSERT_TRUE(rt->run().ok());
  EXPECT_EQ(source.revoked_with_in_flight(), 0u);
  EXPECT_EQ(source.outstanding(), 0u);
}

TEST(Runtime, RejectsUnusableOptions) {
  FakeSource source;
  auto consumer = Consumer<Msg>::create(consumer_options(), extractors(),
                                        [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  RuntimeOptions ro;
  ro.batch = 0;
  auto rt = Runtime<Msg>::create(ro, source, *consumer, decode);
  ASSERT_FALSE(rt.ok());
  EXPECT_NE(rt.status().message().find("batch"), std::string::npos);
  EXPECT_FALSE(Runtime<Msg>::create(RuntimeOptions{}, source, *consumer, nullptr).ok());
}

}  // namespace
}  // namespace idem::runtime_test

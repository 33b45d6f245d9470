// Faults against a real redis-server while one consumer runs 900 messages through the
// Redis store: the server SIGKILLed and restarted (twice; AOF with fsync always, so
// what was acknowledged survives), put to sleep (DEBUG SLEEP) and paused (CLIENT PAUSE
// ALL). Checked, from the handler's own records: while the server is away every
// decision is retry / store_unavailable; the same consumer recovers by itself once it
// is back; every message ends acknowledged, none is processed twice, and an effect is
// repeated only where its handler ran and the commit then failed (Redis cannot hold
// the handler's writes in its commit, so that one repeat per fault is the most an
// effect can see).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"
#include "idem/redis_store.hpp"
#include "support/redis_server.hpp"

namespace idem::faults {
namespace {

using namespace std::chrono_literals;
using redis_test::RedisServer;

struct Msg {
  std::string id;
};

constexpr int kMessages = 900;

// The handler's own records and what the consumer decided.
struct Records {
  std::map<std::string, int> effects;          // id → handler runs that returned ok
  std::map<std::string, int> ran_then_failed;  // id → runs whose commit then failed
  std::map<std::string, int> processed;        // id → processed decisions
  std::map<std::string, bool> acked;
  int unavailable_while_down = 0, unavailable = 0, other_while_down = 0;
  std::vector<std::string> unexpected;
  std::string last_unavailable;  // the detail of the last store_unavailable decision
};

// Runs kMessages through a consumer on `server`, redelivering every retry, while
// `fault(down)` runs on its own thread; fault sets `down` while the server cannot
// answer. Returns the records once every message is acknowledged (or after 90 s).
template <class Fault>
Records run_with_fault(RedisServer& server, Fault fault) {
  redis::Options ro;
  ro.endpoints = {{"127.0.0.1", server.port()}};
  ro.command_timeout = 200ms;
  ro.connect_timeout = 200ms;
  ro.reconnect_min = 10ms;
  ro.reconnect_max = 100ms;
  auto store = redis::open(ro);
  EXPECT_TRUE(store.ok()) << store.status().to_string();
  Records r;
  if (!store.ok()) return r;
  ConsumerOptions o;
  o.store = *store;
  o.lease = 400ms;
  o.store_retry_delay = 5ms;
  o.max_retries = 1000;
  Extractors<Msg> ex;
  ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  std::string running;
  auto consumer = Consumer<Msg>::create(o, ex, [&](const Msg& m, HandlerContext&) {
    ++r.effects[m.id];
    running = m.id;
    return HandlerResult::ok();
  });
  EXPECT_TRUE(consumer.ok());
  if (!consumer.ok()) return r;

  std::atomic<bool> down{false};
  std::atomic<int> progress{0};
  std::atomic<bool> finished{false};
  // The thread lives until the run ends: a server it restarts dies with the thread
  // that started it (PR_SET_PDEATHSIG).
  std::thread faults([&] {
    fault(down, progress);
    while (!finished.load()) std::this_thread::sleep_for(10ms);
  });
  std::deque<int> queue;
  for (int i = 0; i < kMessages; ++i) queue.push_back(i);
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while (!queue.empty() && std::chrono::steady_clock::now() < deadline) {
    const Msg m{"m" + std::to_string(queue.front())};
    queue.pop_front();
    running.clear();
    const bool down_before = down.load();
    const Decision d = consumer->process(m);
    const bool down_throughout = down_before && down.load();
    if (d.reason == Reason::kStoreUnavailable) {
      ++r.unavailable;
      r.last_unavailable = d.detail;
      if (running == m.id) ++r.ran_then_failed[m.id];
    }
    if (down_throughout) ++(d.reason == Reason::kStoreUnavailable ? r.unavailable_while_down : r.other_while_down);
    if (d.action == Action::kAck && (d.reason == Reason::kProcessed || d.reason == Reason::kDuplicate)) {
      r.acked[m.id] = true;
      if (d.reason == Reason::kProcessed) ++r.processed[m.id];
      progress.fetch_add(1);
    } else if (d.action == Action::kRetry &&
               (d.reason == Reason::kStoreUnavailable || d.reason == Reason::kInProgress)) {
      queue.push_front(std::stoi(m.id.substr(1)));  // redelivered at once, in order
      std::this_thread::sleep_for(2ms);
    } else {
      r.unexpected.push_back(m.id + ": " + std::string(reason_name(d.reason)) + " " + d.detail);
      progress.fetch_add(1);
    }
  }
  finished = true;
  faults.join();
  return r;
}

// Every message acknowledged, none processed twice, an effect repeated only after a
// failed commit, and store_unavailable seen while the server was away.
void check(const Records& r, int faults) {
  EXPECT_TRUE(r.unexpected.empty()) << r.unexpected.front();
  ASSERT_EQ(r.acked.size(), static_cast<std::size_t>(kMessages))
      << "messages never acknowledged; the last store_unavailable: " << r.last_unavailable;
  int repeats = 0, lost = 0;
  for (int i = 0; i < kMessages; ++i) {
    const std::string id = "m" + std::to_string(i);
    EXPECT_LE(r.processed.count(id) ? r.processed.at(id) : 0, 1) << id << " processed twice";
    const int effects = r.effects.count(id) ? r.effects.at(id) : 0;
    const int may_repeat = r.ran_then_failed.count(id) ? r.ran_then_failed.at(id) : 0;
    EXPECT_GE(effects, 1) << id << " lost";
    lost += effects == 0 ? 1 : 0;
    EXPECT_LE(effects, 1 + may_repeat) << id << " repeated without a failed commit";
    repeats += effects > 0 ? effects - 1 : 0;
  }
  EXPECT_LE(repeats, faults) << "one message runs at a time: at most one repeat per fault";
  EXPECT_GT(r.unavailable_while_down, 0) << "the fault was never seen";
  EXPECT_EQ(r.other_while_down, 0) << "decisions other than store_unavailable while the server was away";
  std::printf("redis faults: %d faults, %d store_unavailable decisions, %d effects repeated, %d lost\n", faults,
              r.unavailable, repeats, lost);
}

// Waits until `progress` reaches n (the consumer got that far), up to 30 s.
void await(const std::atomic<int>& progress, int n) {
  for (int i = 0; i < 3000 && progress.load() < n; ++i) std::this_thread::sleep_for(10ms);
}

TEST(RedisFaults, KilledAndRestartedTwiceMidRun) {
  auto server = RedisServer::start({.persistence = true});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  RedisServer& s = **server;
  const Records r = run_with_fault(s, [&](std::atomic<bool>& down, std::atomic<int>& progress) {
    for (int n : {kMessages / 3, 2 * kMessages / 3}) {
      await(progress, n);
      s.kill();
      down = true;
      std::this_thread::sleep_for(400ms);
      down = false;
      EXPECT_TRUE(s.restart().ok());
    }
  });
  check(r, 2);
}

// DEBUG SLEEP blocks the server for 1 s (five command timeouts); CLIENT PAUSE ALL for
// 1 s holds every client's commands. Commands sent meanwhile run late, after the
// consumer gave up on them: a claim that lands then holds the lease until it expires
// (in_progress), a commit that lands makes the redelivery a duplicate.
TEST(RedisFaults, SlowedByDebugSleepAndClientPause) {
  auto server = RedisServer::start({.persistence = true, .extra = {"--enable-debug-command", "yes"}});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  RedisServer& s = **server;
  const Records r = run_with_fault(s, [&](std::atomic<bool>& down, std::atomic<int>& progress) {
    await(progress, kMessages / 3);
    std::thread sleeper([&] { EXPECT_TRUE(s.command({"DEBUG", "SLEEP", "1"}).ok()); });
    std::this_thread::sleep_for(200ms);  // DEBUG SLEEP has started (a local connect and one command)
    down = true;
    std::this_thread::sleep_for(600ms);
    down = false;
    sleeper.join();
    await(progress, 2 * kMessages / 3);
    EXPECT_TRUE(s.command({"CLIENT", "PAUSE", "1000", "ALL"}).ok());
    down = true;
    std::this_thread::sleep_for(850ms);
    down = false;
  });
  check(r, 2);
}

}  // namespace
}  // namespace idem::faults

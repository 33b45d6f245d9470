// The state machine under concurrency: two threads take deliveries from one shared
// "broker" queue (each key's events in a random order, duplicates, retried messages put
// back at the end) and process them through one shared Consumer or one Consumer each,
// on one store, with strict ordering. Each key's transitions must be applied once
// each, in version order, each from the state the previous one left; the stored state
// must be the last one's. Built to run under ThreadSanitizer (memory and SQLite only).
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "idem/consumer.hpp"
#include "idem/machine_gate.hpp"
#include "idem/open_store.hpp"
#include "product_machine.hpp"
#include "support/entity_messages.hpp"
#include "support/store_uri.hpp"
#include "support/temp_dir.hpp"

namespace idem::test {
namespace {

struct Param {
  const char* store;     // "memory", "sqlite" or "postgres"
  bool shared_consumer;  // true: one Consumer for both threads; false: one each
};

// Version v of a key: "online" for odd v, "offline" for even v (the product machine
// goes offline → online → offline …; every event is valid in version order).
EntityMsg event(const std::string& key, std::uint64_t v) {
  EntityMsg m = evented(key + "/" + std::to_string(v), key, v % 2 == 1 ? "online" : "offline");
  m.version = v;
  return m;
}

// The broker queue and what the handlers saw; every member is guarded by mu.
struct Broker {
  std::mutex mu;
  std::deque<EntityMsg> queue;
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> transitions;  // key → (from, to)
  std::map<std::string, std::vector<std::uint64_t>> versions;                           // key → versions run
  std::set<std::string> processed;
  std::vector<std::string> violations;

  void violation(std::string what) {
    if (violations.size() < 20) violations.push_back(std::move(what));
  }
};

class MachineConcurrency : public ::testing::TestWithParam<Param> {
 protected:
  std::unique_ptr<Consumer<EntityMsg>> make_consumer(const std::string& owner) {
    ConsumerOptions o;
    o.store = store_;
    o.clock = clock_;
    o.owner = owner;
    o.max_retries = 100'000;
    o.backoff = Backoff{Duration{0}, 1.0, Duration{0}};
    o.ordering.mode = Ordering::kStrict;
    o.ordering.gap_timeout = Duration{3'600'000};
    o.machine = machine_gate(testing::product_table(), {.max_retries = 100'000});
    o.on_buffered = [this](const BufferedOutcome& b) {
      std::lock_guard lock(run_.mu);
      if (b.decision.action == Action::kAck && b.decision.reason == Reason::kProcessed) {
        if (!run_.processed.insert(b.id).second) run_.violation(b.id + " processed twice (drained)");
      } else if (b.decision.action == Action::kDeadLetter) {
        run_.violation(b.id + " dead-lettered from the buffer: " + std::string(reason_name(b.decision.reason)));
      }
    };
    auto c =
        Consumer<EntityMsg>::create(std::move(o), entity_extractors(), [this](const EntityMsg& m, HandlerContext& ctx) {
          std::lock_guard lock(run_.mu);
          run_.transitions[m.key.value()].emplace_back(ctx.from(), ctx.to());
          run_.versions[m.key.value()].push_back(ctx.version());
          return HandlerResult::ok();
        });
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::make_unique<Consumer<EntityMsg>>(std::move(c).value()) : nullptr;
  }

  void work(Consumer<EntityMsg>& c) {
    for (;;) {
      EntityMsg m;
      {
        std::lock_guard lock(run_.mu);
        if (run_.queue.empty()) return;
        m = run_.queue.front();
        run_.queue.pop_front();
      }
      const Decision d = c.process(m);
      std::lock_guard lock(run_.mu);
      if (d.action == Action::kRetry) {
        run_.queue.push_back(m);  // redelivered later
      } else if (d.action == Action::kAck && d.reason == Reason::kProcessed) {
        if (!run_.processed.insert(m.id).second) run_.violation(m.id + " processed twice");
      } else if (d.action == Action::kDeadLetter) {
        run_.violation(m.id + ": dead_letter/" + std::string(reason_name(d.reason)) + " " + d.detail);
      }
    }
  }

  testing::TempDir dir_{"machine-concurrency"};
  std::shared_ptr<Store> store_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  Broker run_;
};

TEST_P(MachineConcurrency, EachKeysTransitionsRunOnceInVersionOrder) {
  const Param p = GetParam();
  const std::string uri =
      std::string(p.store) == "sqlite" ? "sqlite:" + dir_.str() + "/s.db" : test_support::store_uri(p.store, "");
  auto opened = open_store(uri);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  store_ = std::move(opened).value();

  constexpr int kKeys = 100;
  std::mt19937_64 rng(20261201 ^ (p.shared_consumer ? 1 : 2));
  std::map<std::string, std::uint64_t> last;  // key → its number of versions
  std::vector<EntityMsg> all;
  for (int k = 0; k < kKeys; ++k) {
    const std::string key = "key-" + std::to_string(k);
    last[key] = std::uniform_int_distribution<std::uint64_t>(2, 9)(rng);
    for (std::uint64_t v = 1; v <= last[key]; ++v) {
      all.push_back(event(key, v));
      if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) all.push_back(event(key, v));  // a duplicate
    }
  }
  std::shuffle(all.begin(), all.end(), rng);
  run_.queue.assign(all.begin(), all.end());

  std::vector<std::unique_ptr<Consumer<EntityMsg>>> consumers;
  consumers.push_back(make_consumer("c1"));
  if (!p.shared_consumer) consumers.push_back(make_consumer("c2"));
  ASSERT_TRUE(consumers.front() && consumers.back());
  std::thread t1([&] { work(*consumers.front()); });
  std::thread t2([&] { work(*consumers.back()); });
  t1.join();
  t2.join();
  // What one consumer buffered while the other committed its predecessor comes out on
  // tick(); logical time only.
  std::size_t total = 0;
  for (const auto& [key, n] : last) total += n;
  for (int i = 0; i < 100 && run_.processed.size() < total; ++i) {
    clock_->advance(std::chrono::milliseconds(100));
    for (auto& c : consumers) c->tick();
  }

  std::lock_guard lock(run_.mu);
  EXPECT_TRUE(run_.violations.empty()) << [&] {
    std::string s;
    for (const auto& v : run_.violations) s += "\n  " + v;
    return s;
  }();
  EXPECT_EQ(run_.processed.size(), total);
  for (const auto& [key, n] : last) {
    std::vector<std::uint64_t> want_versions;
    std::vector<std::pair<std::string, std::string>> want_transitions;
    for (std::uint64_t v = 1; v <= n; ++v) {
      want_versions.push_back(v);
      want_transitions.emplace_back(v % 2 == 1 ? "offline" : "online", v % 2 == 1 ? "online" : "offline");
    }
    EXPECT_EQ(run_.versions[key], want_versions) << key;
    EXPECT_EQ(run_.transitions[key], want_transitions) << key;
    auto e = store_->entities()->read_entity(key);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    EXPECT_EQ(e->version, n) << key;
    EXPECT_EQ(e->state, n % 2 == 1 ? "online" : "offline") << key;
  }
  EXPECT_EQ(store_->entities()->buffer_summary(1).value().count, 0u);
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.store) + (info.param.shared_consumer ? "_shared_consumer" : "_two_consumers");
}

const Param kParams[] = {
    {"memory", true},   {"memory", false},   {"sqlite", true}, {"sqlite", false},
#ifdef IDEM_TESTS_WITH_POSTGRES
    {"postgres", true}, {"postgres", false},
#endif
};
INSTANTIATE_TEST_SUITE_P(Stores, MachineConcurrency, ::testing::ValuesIn(kParams), param_name);

}  // namespace
}  // namespace idem::test

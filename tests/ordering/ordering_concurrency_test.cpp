// Strict ordering under concurrency: two threads take deliveries from one shared
// "broker" queue (random permutations of versions 1..N per key, duplicates, retried
// messages put back at the end) and process them, either through one shared Consumer
// or through one Consumer each on the same store (two processes of one service). The
// handler must see each key's versions exactly once and in order, never two versions of
// one key at the same time; after the stream, ticks bring out whatever is still
// buffered. Handler failures are injected at random (the drain path retries them).
//
// Seed: IDEM_PROPERTY_SEED (printed on failure). Interleavings depend on the scheduler,
// so a failure may not reproduce with the same seed; the history printed says what
// happened.
#include <gtest/gtest.h>

#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "idem/consumer.hpp"
#include "idem/open_store.hpp"
#include "support/store_uri.hpp"
#include "support/temp_dir.hpp"

namespace idem {
namespace {

struct CMsg {
  std::uint32_t key = 0;
  std::uint64_t version = 0;
  std::string id, key_name;
};

CMsg make(std::uint32_t k, std::uint64_t v) {
  CMsg m;
  m.key = k;
  m.version = v;
  m.key_name = "key-" + std::to_string(k);
  m.id = m.key_name + "/" + std::to_string(v);
  return m;
}

Extractors<CMsg> extractors() {
  Extractors<CMsg> x;
  x.id = [](const CMsg& m) { return std::optional<std::string_view>(m.id); };
  x.key = [](const CMsg& m) { return std::optional<std::string_view>(m.key_name); };
  x.version = [](const CMsg& m) { return std::optional<std::uint64_t>(m.version); };
  x.encode = [](const CMsg& m) { return std::to_string(m.key) + " " + std::to_string(m.version); };
  x.decode = [](std::string_view s) -> std::optional<CMsg> {
    const auto sp = s.find(' ');
    if (sp == std::string_view::npos) return std::nullopt;
    std::uint32_t k = 0;
    std::uint64_t v = 0;
    if (std::from_chars(s.data(), s.data() + sp, k).ec != std::errc()) return std::nullopt;
    if (std::from_chars(s.data() + sp + 1, s.data() + s.size(), v).ec != std::errc()) return std::nullopt;
    return make(k, v);
  };
  return x;
}

std::uint64_t base_seed() {
  if (const char* s = std::getenv("IDEM_PROPERTY_SEED")) return std::strtoull(s, nullptr, 0);
  return 20261129;
}

struct Param {
  const char* scheme;
  bool shared_consumer;  // true: one Consumer for both threads; false: one each
};

class OrderingConcurrency : public ::testing::TestWithParam<Param> {};

TEST_P(OrderingConcurrency, TwoThreadsSeeEachKeysVersionsOnceInOrder) {
  const Param p = GetParam();
  const std::uint64_t seed = base_seed();
  SCOPED_TRACE("IDEM_PROPERTY_SEED=" + std::to_string(seed));
  constexpr std::uint32_t kKeys = 150;
  std::mt19937_64 rng(seed ^ (p.shared_consumer ? 1 : 2) ^ std::hash<std::string_view>{}(p.scheme));

  testing::TempDir dir("ordering-concurrency");
  const std::string scheme = p.scheme;
  auto opened = open_store(test_support::store_uri(scheme, dir.sub("store")));
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  std::shared_ptr<Store> store = std::move(opened).value();
  auto clock = std::make_shared<ManualClock>();

  // The broker.
  std::vector<std::uint64_t> n(kKeys);
  std::deque<CMsg> queue;
  {
    std::vector<std::pair<std::uint32_t, std::uint64_t>> all;
    for (std::uint32_t k = 0; k < kKeys; ++k) {
      n[k] = std::uniform_int_distribution<std::uint64_t>(2, 12)(rng);
      std::vector<std::uint64_t> vs;
      for (std::uint64_t v = 1; v <= n[k]; ++v) vs.push_back(v);
      std::shuffle(vs.begin(), vs.end(), rng);
      for (auto v : vs) all.emplace_back(k, v);
    }
    // Interleave keys but keep each key's (shuffled) order: stable sort by a random rank.
    std::vector<double> rank(all.size());
    for (auto& r : rank) r = std::uniform_real_distribution<double>(0, 1)(rng);
    std::vector<std::size_t> order(all.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rank[a] < rank[b]; });
    for (std::size_t i : order) {
      queue.push_back(make(all[i].first, all[i].second));
      if (std::uniform_real_distribution<double>(0, 1)(rng) < 0.15) queue.push_back(queue.back());  // duplicate
    }
  }
  std::mutex mu;  // guards queue, seen, processed, violations, rng_fail
  std::map<std::uint32_t, std::vector<std::uint64_t>> seen;
  std::set<std::string> processed;
  std::vector<std::string> violations;
  std::mt19937_64 rng_fail(seed + 7);
  std::vector<std::atomic<int>> in_handler(kKeys);
  auto violation = [&](std::string what) {
    if (violations.size() < 20) violations.push_back(std::move(what));
  };

  auto make_consumer = [&]() -> std::unique_ptr<Consumer<CMsg>> {
    ConsumerOptions o;
    o.store = store;
    o.clock = clock;
    o.max_retries = 100'000;
    o.backoff = Backoff{Duration{0}, 1.0, Duration{0}};
    o.ordering.mode = Ordering::kStrict;
    o.ordering.gap_timeout = Duration{3'600'000};
    o.on_buffered = [&](const BufferedOutcome& b) {
      std::lock_guard lock(mu);
      if (b.decision.action == Action::kAck && b.decision.reason == Reason::kProcessed) {
        if (!processed.insert(b.id).second) violation(b.id + " processed twice (drained)");
      } else if (b.decision.action == Action::kDeadLetter) {
        violation(b.id + " dead-lettered from the buffer: " + std::string(reason_name(b.decision.reason)));
      }
    };
    auto c = Consumer<CMsg>::create(std::move(o), extractors(), [&](const CMsg& m, HandlerContext& ctx) {
      if (in_handler[m.key].fetch_add(1) != 0) {
        std::lock_guard lock(mu);
        violation("two handlers ran at once for " + m.key_name);
      }
      HandlerResult r = HandlerResult::ok();
      {
        std::lock_guard lock(mu);
        if (ctx.version() != m.version) violation("ctx.version() wrong for " + m.id);
        if (std::uniform_real_distribution<double>(0, 1)(rng_fail) < 0.1) {
          r = HandlerResult::fail("injected");
        } else {
          seen[m.key].push_back(m.version);
        }
      }
      in_handler[m.key].fetch_sub(1);
      return r;
    });
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    if (!c.ok()) return nullptr;
    return std::make_unique<Consumer<CMsg>>(std::move(c).value());
  };
  std::vector<std::unique_ptr<Consumer<CMsg>>> consumers;
  consumers.push_back(make_consumer());
  if (!p.shared_consumer) consumers.push_back(make_consumer());
  ASSERT_TRUE(consumers.front() && consumers.back());

  auto worker = [&](Consumer<CMsg>& c) {
    for (;;) {
      CMsg m;
      {
        std::lock_guard lock(mu);
        if (queue.empty()) return;
        m = queue.front();
        queue.pop_front();
      }
      const Decision d = c.process(m);
      std::lock_guard lock(mu);
      if (d.action == Action::kRetry) {
        queue.push_back(m);  // redelivered later
      } else if (d.action == Action::kAck && d.reason == Reason::kProcessed) {
        if (!processed.insert(m.id).second) violation(m.id + " processed twice");
      } else if (d.action == Action::kDeadLetter) {
        violation(m.id + ": dead_letter/" + std::string(reason_name(d.reason)) + " " + d.detail);
      }
    }
  };
  std::thread t1(worker, std::ref(*consumers.front()));
  std::thread t2(worker, std::ref(*consumers.back()));
  t1.join();
  t2.join();

  // Idle period: drains held back by a failure's backoff, or buffered by one consumer
  // while the other committed the predecessor, come out on tick().
  std::size_t total = 0;
  for (auto v : n) total += v;
  for (int i = 0; i < 500 && processed.size() < total; ++i) {
    clock->advance(std::chrono::milliseconds(100));
    for (auto& c : consumers) c->tick();
  }

  EXPECT_TRUE(violations.empty()) << [&] {
    std::string s;
    for (const auto& v : violations) s += "\n  " + v;
    return s;
  }();
  EXPECT_EQ(processed.size(), total);
  for (std::uint32_t k = 0; k < kKeys; ++k) {
    std::vector<std::uint64_t> want;
    for (std::uint64_t v = 1; v <= n[k]; ++v) want.push_back(v);
    EXPECT_EQ(seen[k], want) << "key-" << k;
    auto e = store->entities()->read_entity("key-" + std::to_string(k));
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->version, n[k]) << "key-" << k;
  }
  auto summary = store->entities()->buffer_summary(1);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->count, 0u);
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.scheme) + (info.param.shared_consumer ? "_shared_consumer" : "_two_consumers");
}

const Param kParams[] = {
    {"memory", true},   {"memory", false},
#ifdef IDEM_ORDERING_WITH_SQLITE
    {"sqlite", true},   {"sqlite", false},
#endif
#ifdef IDEM_ORDERING_WITH_ROCKSDB
    {"rocksdb", true},  {"rocksdb", false},
#endif
#ifdef IDEM_TESTS_WITH_POSTGRES
    {"postgres", true}, {"postgres", false},
#endif
};
INSTANTIATE_TEST_SUITE_P(Stores, OrderingConcurrency, ::testing::ValuesIn(kParams), param_name);

}  // namespace
}  // namespace idem

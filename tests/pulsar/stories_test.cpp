// The two ways Pulsar redelivers that idem was designed against, each run once with a
// plain WebSocket consumer written here (no idem) and once through idem, on the same
// real broker, both counts printed; and the four guarantees on a real subscription.
//
//  1. The failover rewind: a topic unloaded mid-stream is loaded again with its
//     subscription's cursor at the mark-delete position, and every message delivered
//     but not acked by then comes again.
//  2. The ack timeout while the listener lags: the clock of a message starts when the
//     client library receives it, so a slow listener with a large receiver queue gets
//     copies of messages it has not begun, and on a Shared subscription another
//     consumer runs them beside it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "idem/consumer.hpp"
#include "idem/memory_store.hpp"
#include "idem/pulsar_source.hpp"
#include "idem/runtime.hpp"
#include "support/pulsar_server.hpp"
#include "message_id.hpp"
#include "web.hpp"

namespace idem::pulsar {
namespace {

using pulsar_test::PulsarServer;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

PulsarServer& broker() { return PulsarServer::shared(); }

std::string fresh(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(n.fetch_add(1));
}

void publish(const std::string& topic, int n) {
  auto o = parse_uri(broker().uri(topic, ""));
  ASSERT_TRUE(o.ok());
  auto p = open_publisher(*o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<OutgoingMessage> msgs;
  for (int i = 0; i < n; ++i) msgs.push_back({.id = "m" + std::to_string(i), .body = "m" + std::to_string(i)});
  ASSERT_TRUE((*p)->publish(msgs).ok());
}

// Runs of each message id, counted from any thread.
class Effects {
 public:
  void add(const std::string& id) {
    std::lock_guard lock(mu_);
    ++runs_[id];
  }
  std::size_t ids() const {
    std::lock_guard lock(mu_);
    return runs_.size();
  }
  // Runs beyond the first, over every id.
  int repeats() const {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& [id, runs] : runs_) n += runs - 1;
    return n;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, int> runs_;
};

// --- the plain consumer ----------------------------------------------------------------

// A consumer of Pulsar's WebSocket API as an application would write it: it receives
// pushed messages, runs each, and acks as `ack_every` says.
class PlainConsumer {
 public:
  PlainConsumer(const std::string& topic, const std::string& query) {
    auto ws = detail::WebSocket::connect({"127.0.0.1", broker().web_port(), ""},
                                         "/ws/v2/consumer/persistent/public/default/" + topic + "/sub?" + query, 10s);
    EXPECT_TRUE(ws.ok()) << ws.status().to_string();
    if (ws.ok()) ws_ = std::move(ws).value();
  }

  // Receives until nothing came for `quiet`; runs `handle` on each message's body and
  // acks after every `ack_every` messages (all of them at once).
  template <class Handle>
  void run(std::chrono::milliseconds quiet, int ack_every, Handle handle) {
    if (!ws_) return;
    std::vector<std::string> unacked;
    std::string frame;
    for (;;) {
      auto r = ws_->read(&frame, quiet);
      if (!r.ok() || !*r) break;
      auto j = nlohmann::json::parse(frame, nullptr, false);
      if (!j.is_object() || !j.contains("payload")) continue;
      handle(detail::base64_decode(j.value("payload", std::string())).value_or(""));
      unacked.push_back(j.value("messageId", std::string()));
      if (static_cast<int>(unacked.size()) >= ack_every) {
        for (const std::string& id : unacked) (void)ws_->write(nlohmann::json{{"messageId", id}}.dump(), 5s);
        unacked.clear();
      }
    }
  }

 private:
  std::unique_ptr<detail::WebSocket> ws_;
};

// --- the idem consumer -------------------------------------------------------------------

struct Msg {
  std::string id;
  std::string stream;
  std::uint64_t position = 0;
};

StatusOr<Msg> decode(const Delivery& d) { return Msg{d.body, d.partition, d.position}; }

Extractors<Msg> extractors() {
  Extractors<Msg> ex;
  ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  ex.stream = [](const Msg& m) { return std::optional<std::string_view>(m.stream); };
  ex.position = [](const Msg& m) { return std::optional<std::uint64_t>(m.position); };
  return ex;
}

// One `idem consume`-like consumer in this process: the Pulsar source, a Runtime, a
// Consumer on the shared in-memory store; its decisions are counted by reason.
class IdemConsumer {
 public:
  IdemConsumer(const std::string& uri, ConsumerOptions co, std::function<void(const Msg&)> handle)
      : IdemConsumer(uri, std::move(co), [handle](const Msg& m, HandlerContext&) {
          handle(m);
          return HandlerResult::ok();
        }) {}

  IdemConsumer(const std::string& uri, ConsumerOptions co, Consumer<Msg>::Handler handler) {
    auto o = parse_uri(uri);
    EXPECT_TRUE(o.ok()) << o.status().to_string();
    auto s = open(*o);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (!s.ok()) return;
    source_ = std::move(s).value();
    auto c = Consumer<Msg>::create(std::move(co), extractors(), std::move(handler));
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    consumer_.emplace(std::move(c).value());
    RuntimeOptions ro;
    ro.workers = 1;
    ro.backlog = 2;  // in flight ≤ workers + 2: nothing waits long enough for the ack timeout
    ro.idle_exit = Duration(3000);
    auto rt = Runtime<Msg>::create(ro, *source_, *consumer_, decode, [this](const Delivery&, const Msg*, const Decision& d) {
      ++reasons_[d.reason];
    });
    EXPECT_TRUE(rt.ok()) << rt.status().to_string();
    runtime_ = std::move(rt).value();
  }

  void run() {
    if (runtime_) {
      EXPECT_TRUE(runtime_->run().ok());
    }
  }
  int count(Reason r) const {
    auto it = reasons_.find(r);
    return it == reasons_.end() ? 0 : it->second;
  }

 private:
  std::unique_ptr<MessageSource> source_;
  std::optional<Consumer<Msg>> consumer_;
  std::unique_ptr<Runtime<Msg>> runtime_;
  std::map<Reason, int> reasons_;  // touched on the runtime's loop thread only
};

ConsumerOptions effectively_once(std::shared_ptr<Store> store) {
  ConsumerOptions co;
  co.store = std::move(store);
  return co;
}

std::shared_ptr<Store> memory_store() {
  auto s = memory::open();
  EXPECT_TRUE(s.ok());
  return *s;
}

// Unloads `topic` each time `done()` crosses another of `at`, until `stop`.
std::thread unloader(const std::string& topic, std::vector<std::size_t> at, std::function<std::size_t()> done,
                     std::atomic<bool>& stop, std::atomic<int>& unloads) {
  return std::thread([=, &stop, &unloads] {
    std::size_t next = 0;
    while (!stop && next < at.size()) {
      if (done() >= at[next]) {
        if (broker().unload(topic).ok()) ++unloads;
        ++next;
      }
      std::this_thread::sleep_for(5ms);
    }
  });
}

constexpr int kRewindMessages = 1200;
constexpr auto kRewindHandlerTime = 2ms;  // slow enough that the unloads come mid-stream
const std::vector<std::size_t> kUnloadAt{200, 450, 700, 950};

TEST(PulsarStories, FailoverRewindRepeatsWorkForAPlainConsumer) {
  const std::string topic = fresh("rewind-plain");
  publish(topic, kRewindMessages);
  Effects effects;
  std::atomic<std::size_t> handled{0};
  std::atomic<bool> stop{false};
  std::atomic<int> unloads{0};
  PlainConsumer c(topic, "subscriptionType=Failover&subscriptionInitialPosition=Earliest");
  auto u = unloader(topic, kUnloadAt, [&] { return handled.load(); }, stop, unloads);
  c.run(4s, 300, [&](const std::string& body) {
    effects.add(body);
    ++handled;
    std::this_thread::sleep_for(kRewindHandlerTime);
  });
  stop = true;
  u.join();
  std::cout << "failover rewind, plain consumer: " << unloads << " unloads, " << effects.repeats()
            << " messages processed twice, " << effects.ids() << " of " << kRewindMessages << " messages\n";
  EXPECT_EQ(unloads, static_cast<int>(kUnloadAt.size()));
  EXPECT_EQ(effects.ids(), static_cast<std::size_t>(kRewindMessages));
  EXPECT_GT(effects.repeats(), 0) << "the rewind resends what was delivered and not acked";
}

TEST(PulsarStories, FailoverRewindIsAbsorbedByTheWatermark) {
  const std::string topic = fresh("rewind-idem");
  publish(topic, kRewindMessages);
  Effects effects;
  std::atomic<std::size_t> handled{0};
  std::atomic<bool> stop{false};
  std::atomic<int> unloads{0};
  ConsumerOptions co = effectively_once(memory_store());
  co.ordering.mode = Ordering::kWatermark;
  IdemConsumer c(broker().uri(topic, "sub", "type=failover"), std::move(co), [&](const Msg& m) {
    effects.add(m.id);
    ++handled;
    std::this_thread::sleep_for(kRewindHandlerTime);
  });
  auto u = unloader(topic, kUnloadAt, [&] { return handled.load(); }, stop, unloads);
  c.run();
  stop = true;
  u.join();
  std::cout << "failover rewind, idem (watermark): " << unloads << " unloads, " << effects.repeats()
            << " messages processed twice, " << c.count(Reason::kDuplicate) << " repeats dropped as duplicate\n";
  EXPECT_EQ(unloads, static_cast<int>(kUnloadAt.size()));
  EXPECT_EQ(effects.ids(), static_cast<std::size_t>(kRewindMessages));
  EXPECT_EQ(effects.repeats(), 0);
  EXPECT_EQ(c.count(Reason::kProcessed), kRewindMessages);
  EXPECT_EQ(broker().backlog(topic, "sub").first, 0);
}

constexpr int kLagMessages = 300;
constexpr auto kHandlerTime = 20ms;

TEST(PulsarStories, AckTimeoutWithALaggingListenerRunsCopiesForAPlainConsumer) {
  const std::string topic = fresh("lag-plain");
  publish(topic, kLagMessages);
  Effects effects;
  const std::string query = "subscriptionType=Shared&subscriptionInitialPosition=Earliest&ackTimeoutMillis=1000"
                            "&receiverQueueSize=1000";
  std::vector<std::thread> consumers;
  for (int i = 0; i < 2; ++i) {
    consumers.emplace_back([&] {
      PlainConsumer c(topic, query);
      c.run(3s, 1, [&](const std::string& body) {
        effects.add(body);
        std::this_thread::sleep_for(kHandlerTime);
      });
    });
  }
  for (auto& t : consumers) t.join();
  std::cout << "ack timeout with a lagging listener, plain consumers: " << effects.repeats()
            << " duplicate executions of " << kLagMessages << " messages\n";
  EXPECT_EQ(effects.ids(), static_cast<std::size_t>(kLagMessages));
  EXPECT_GT(effects.repeats(), 0) << "messages waiting in the receiver queue time out and run twice";
}

TEST(PulsarStories, AckTimeoutWithALaggingListenerRunsEachEffectOnceThroughIdem) {
  const std::string topic = fresh("lag-idem");
  publish(topic, kLagMessages);
  Effects effects;
  auto store = memory_store();  // both consumers' store, as a shared Redis would be
  const std::string uri = broker().uri(topic, "sub", "ack_timeout_ms=1000&receiver_queue=10");
  std::vector<std::unique_ptr<IdemConsumer>> consumers;
  for (int i = 0; i < 2; ++i) {
    consumers.push_back(std::make_unique<IdemConsumer>(uri, effectively_once(store), [&](const Msg& m) {
      effects.add(m.id);
      std::this_thread::sleep_for(kHandlerTime);
    }));
  }
  std::vector<std::thread> threads;
  for (auto& c : consumers) threads.emplace_back([&c] { c->run(); });
  for (auto& t : threads) t.join();
  int duplicates = 0, in_progress = 0;
  for (auto& c : consumers) {
    duplicates += c->count(Reason::kDuplicate);
    in_progress += c->count(Reason::kInProgress);
  }
  std::cout << "ack timeout with a lagging listener, idem: " << effects.repeats() << " duplicate executions of "
            << kLagMessages << " messages; copies answered: " << duplicates << " duplicate, " << in_progress
            << " in progress\n";
  EXPECT_EQ(effects.ids(), static_cast<std::size_t>(kLagMessages));
  EXPECT_EQ(effects.repeats(), 0);
  EXPECT_EQ(broker().backlog(topic, "sub").first, 0);
}

// --- the four guarantees ---------------------------------------------------------------

// Each of 20 ids published twice (a producer that retried), consumed through idem with
// `co`; returns the handler's runs per id.
std::map<std::string, int> run_guarantee(const std::string& name, ConsumerOptions co,
                                         std::function<HandlerResult(const Msg&, HandlerContext&, int run)> handler) {
  const std::string topic = fresh("guarantee-" + name);
  publish(topic, 20);
  publish(topic, 20);
  std::map<std::string, int> runs;
  std::mutex mu;
  IdemConsumer c(broker().uri(topic, "sub", "nack_delay_ms=200"), std::move(co),
                 [&](const Msg& m, HandlerContext& ctx) {
                   int run = 0;
                   {
                     std::lock_guard lock(mu);
                     run = ++runs[m.id];
                   }
                   return handler(m, ctx, run);
                 });
  c.run();
  EXPECT_EQ(broker().backlog(topic, "sub").first, 0) << name << ": every delivery settled";
  EXPECT_EQ(runs.size(), 20u) << name;
  return runs;
}

ConsumerOptions with_guarantee(Guarantee g) {
  ConsumerOptions co;
  co.guarantee = g;
  if (needs_dedup(g)) co.store = memory_store();
  co.backoff.initial = Duration(10);
  return co;
}

TEST(PulsarGuarantees, AtMostOnceRunsEachIdOnceEvenWhenItFails) {
  for (const auto& [id, runs] : run_guarantee("amo", with_guarantee(Guarantee::kAtMostOnce),
                                              [](const Msg&, HandlerContext&, int) { return HandlerResult::fail("x"); })) {
    EXPECT_EQ(runs, 1) << id << ": marked done before the handler; never repeated";
  }
}

TEST(PulsarGuarantees, AtLeastOnceRunsEveryDeliveryAndRetriesFailures) {
  for (const auto& [id, runs] : run_guarantee("alo", with_guarantee(Guarantee::kAtLeastOnce),
                                              [](const Msg&, HandlerContext&, int run) {
                                                return run == 1 ? HandlerResult::fail("first") : HandlerResult::ok();
                                              })) {
    EXPECT_EQ(runs, 3) << id << ": both copies run, the failed first run once more";
  }
}

TEST(PulsarGuarantees, EffectivelyOnceRunsEachIdOnceAfterItsFailures) {
  for (const auto& [id, runs] : run_guarantee("eo", with_guarantee(Guarantee::kEffectivelyOnce),
                                              [](const Msg&, HandlerContext&, int run) {
                                                return run == 1 ? HandlerResult::fail("first") : HandlerResult::ok();
                                              })) {
    EXPECT_EQ(runs, 2) << id << ": the failure retried, the copy a duplicate";
  }
}

TEST(PulsarGuarantees, ManualLeavesTheAckToTheHandler) {
  for (const auto& [id, runs] : run_guarantee("manual", with_guarantee(Guarantee::kManual),
                                              [](const Msg&, HandlerContext& ctx, int run) {
                                                if (run == 1) {
                                                  ctx.nack(Duration(10));
                                                } else {
                                                  ctx.ack();
                                                }
                                                return HandlerResult::ok();
                                              })) {
    EXPECT_EQ(runs, 2) << id << ": nacked once, acked once, the copy a duplicate";
  }
}

TEST(PulsarGuarantees, AContradictoryConfigurationIsRefusedWhenBuilt) {
  ConsumerOptions co = with_guarantee(Guarantee::kAtLeastOnce);
  co.store = memory_store();  // at_least_once keeps no record
  auto c = Consumer<Msg>::create(co, extractors(), [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  co = with_guarantee(Guarantee::kEffectivelyOnce);
  co.store = nullptr;  // effectively_once without a store
  EXPECT_EQ(Consumer<Msg>::create(co, extractors(), [](const Msg&, HandlerContext&) { return HandlerResult::ok(); })
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem::pulsar

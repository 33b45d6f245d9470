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
// Each idem arm also asserts its premise: that copies reached idem (counted from its
// decisions, and from the source's log where it drops a copy of a message it holds).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
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

// The copies that reached idem: deliveries decided other than `processed` (a duplicate
// by the watermark or the record, a lease held elsewhere), and copies a source dropped
// because it still held the message, which it logs. Each copy keeps its message's body
// and the time it came; thread-safe.
class Copies {
 public:
  struct Copy {
    SteadyClock::time_point at;
    std::string broker_id;
    Reason reason;  // kProcessed stands for "dropped by the source"
  };

  void decided(const Delivery& d, const Decision& dec) {
    std::lock_guard lock(mu_);
    body_of_[d.broker_id] = d.body;
    if (dec.reason != Reason::kProcessed) copies_.push_back({SteadyClock::now(), d.broker_id, dec.reason});
  }

  // A logger for the sources: each "sent <id> again" line is a copy.
  std::shared_ptr<spdlog::logger> logger() {
    auto l = std::make_shared<spdlog::logger>("stories", std::make_shared<Sink>(this));
    l->set_level(spdlog::level::info);
    return l;
  }

  // Copies that came in [from, to).
  int between(SteadyClock::time_point from, SteadyClock::time_point to) const {
    std::lock_guard lock(mu_);
    return static_cast<int>(std::count_if(copies_.begin(), copies_.end(), [&](const Copy& c) { return c.at >= from && c.at < to; }));
  }
  int total() const { return between(SteadyClock::time_point::min(), SteadyClock::time_point::max()); }
  // Copies of the message whose body is `body`.
  int of(const std::string& body) const {
    std::lock_guard lock(mu_);
    return static_cast<int>(std::count_if(copies_.begin(), copies_.end(), [&](const Copy& c) {
      auto it = body_of_.find(c.broker_id);
      return it != body_of_.end() && it->second == body;
    }));
  }
  // Copies decided with `r` (kProcessed: dropped by a source).
  int answered(Reason r) const {
    std::lock_guard lock(mu_);
    return static_cast<int>(std::count_if(copies_.begin(), copies_.end(), [&](const Copy& c) { return c.reason == r; }));
  }

 private:
  class Sink final : public spdlog::sinks::base_sink<std::mutex> {
   public:
    explicit Sink(Copies* copies) : copies_(copies) {}

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      const std::string_view text(msg.payload.data(), msg.payload.size());
      const auto at = text.find(": the broker sent ");
      if (at == std::string_view::npos) return;
      const auto from = at + std::string_view(": the broker sent ").size();
      const std::string id(text.substr(from, text.find(' ', from) - from));
      std::lock_guard lock(copies_->mu_);
      copies_->copies_.push_back({SteadyClock::now(), id, Reason::kProcessed});
    }
    void flush_() override {}

   private:
    Copies* copies_;
  };

  mutable std::mutex mu_;
  std::map<std::string, std::string> body_of_;  // broker id → body
  std::vector<Copy> copies_;
};

// One `idem consume`-like consumer in this process: the Pulsar source, a Runtime, a
// Consumer on the shared in-memory store; its decisions are counted by reason, and the
// copies that reached it recorded in `copies`.
class IdemConsumer {
 public:
  IdemConsumer(const std::string& uri, ConsumerOptions co, std::function<void(const Msg&)> handle,
               RuntimeOptions ro = {}, Copies* copies = nullptr)
      : IdemConsumer(uri, std::move(co),
                     [handle](const Msg& m, HandlerContext&) {
                       handle(m);
                       return HandlerResult::ok();
                     },
                     ro, copies) {}

  IdemConsumer(const std::string& uri, ConsumerOptions co, Consumer<Msg>::Handler handler, RuntimeOptions ro = {},
               Copies* copies = nullptr) {
    auto o = parse_uri(uri);
    EXPECT_TRUE(o.ok()) << o.status().to_string();
    if (copies != nullptr) o->logger = copies->logger();
    auto s = open(*o);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (!s.ok()) return;
    source_ = std::move(s).value();
    auto c = Consumer<Msg>::create(std::move(co), extractors(), std::move(handler));
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    consumer_.emplace(std::move(c).value());
    if (ro.workers == 0) {
      ro.workers = 1;
      ro.backlog = 2;
    }
    ro.idle_exit = Duration(3000);
    auto rt = Runtime<Msg>::create(ro, *source_, *consumer_, decode,
                                   [this, copies](const Delivery& d, const Msg*, const Decision& dec) {
                                     ++reasons_[dec.reason];
                                     if (copies != nullptr) copies->decided(d, dec);
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

// Unloads `topic` each time `done()` crosses another of `at`, and, when `ready` is given,
// once it says so (up to 20 s after the last unload), until `stop`; the time of each
// unload that succeeded goes to `unloads` (read it after joining the thread).
std::thread unloader(const std::string& topic, std::vector<std::size_t> at, std::function<std::size_t()> done,
                     std::atomic<bool>& stop, std::vector<SteadyClock::time_point>& unloads,
                     std::function<bool(SteadyClock::time_point)> ready = nullptr) {
  return std::thread([=, &stop, &unloads] {
    std::size_t next = 0;
    while (!stop && next < at.size()) {
      const bool may = unloads.empty() || !ready || ready(unloads.back()) || SteadyClock::now() > unloads.back() + 20s;
      if (done() >= at[next] && may) {
        const auto when = SteadyClock::now();
        if (broker().unload(topic).ok()) unloads.push_back(when);
        ++next;
      }
      std::this_thread::sleep_for(5ms);
    }
  });
}

constexpr int kRewindMessages = 1200;
constexpr auto kRewindHandlerTime = 2ms;  // slow enough that the unloads come mid-stream
const std::vector<std::size_t> kUnloadAt{150, 300, 450, 600, 750, 900};

TEST(PulsarStories, FailoverRewindRepeatsWorkForAPlainConsumer) {
  const std::string topic = fresh("rewind-plain");
  publish(topic, kRewindMessages);
  Effects effects;
  std::atomic<std::size_t> handled{0};
  std::atomic<bool> stop{false};
  std::vector<SteadyClock::time_point> unloads;
  PlainConsumer c(topic, "subscriptionType=Failover&subscriptionInitialPosition=Earliest");
  auto u = unloader(topic, kUnloadAt, [&] { return handled.load(); }, stop, unloads);
  c.run(4s, 300, [&](const std::string& body) {
    effects.add(body);
    ++handled;
    std::this_thread::sleep_for(kRewindHandlerTime);
  });
  stop = true;
  u.join();
  std::cout << "failover rewind, plain consumer: " << unloads.size() << " unloads, " << effects.repeats()
            << " messages processed twice, " << effects.ids() << " of " << kRewindMessages << " messages\n";
  EXPECT_EQ(unloads.size(), kUnloadAt.size());
  EXPECT_EQ(effects.ids(), static_cast<std::size_t>(kRewindMessages));
  EXPECT_GT(effects.repeats(), 0) << "the rewind resends what was delivered and not acked";
}

// idem holds up to 100 messages at each unload (a backlog of 100 over a receiver queue
// of 200), and its handler holds the message that triggers an unload until the topic
// is back, so every rewind sends some of them again: as copies of messages still held
// (the source drops them) or of messages decided since (the watermark answers them).
constexpr auto kHoldAtUnload = 1500ms;
TEST(PulsarStories, FailoverRewindIsAbsorbedByTheWatermark) {
  const std::string topic = fresh("rewind-idem");
  publish(topic, kRewindMessages);
  Effects effects;
  Copies copies;
  std::atomic<std::size_t> handled{0};
  std::atomic<bool> stop{false};
  std::vector<SteadyClock::time_point> unloads;
  ConsumerOptions co = effectively_once(memory_store());
  co.ordering.mode = Ordering::kWatermark;
  RuntimeOptions ro;
  ro.workers = 1;
  ro.backlog = 100;
  IdemConsumer c(broker().uri(topic, "sub", "type=failover&receiver_queue=200"), std::move(co),
                 [&](const Msg& m) {
                   effects.add(m.id);
                   const std::size_t n = ++handled;
                   const bool unload_now = std::find(kUnloadAt.begin(), kUnloadAt.end(), n) != kUnloadAt.end();
                   std::this_thread::sleep_for(unload_now ? kHoldAtUnload : kRewindHandlerTime);
                 },
                 ro, &copies);
  // The next unload waits for a copy of the last one (the consumer may take a while to
  // be connected again), so that each unload's copies come before the next.
  auto u = unloader(topic, kUnloadAt, [&] { return handled.load(); }, stop, unloads,
                    [&](SteadyClock::time_point last) { return copies.between(last, SteadyClock::time_point::max()) > 0; });
  c.run();
  stop = true;
  u.join();
  std::cout << "failover rewind, idem (watermark): " << unloads.size() << " unloads, " << effects.repeats()
            << " messages processed twice; copies received: " << copies.total() << " ("
            << copies.answered(Reason::kDuplicate) << " answered duplicate, " << copies.answered(Reason::kProcessed)
            << " dropped by the source while held); per unload:";
  for (std::size_t i = 0; i < unloads.size(); ++i) {
    std::cout << " " << copies.between(unloads[i], i + 1 < unloads.size() ? unloads[i + 1] : SteadyClock::time_point::max());
  }
  std::cout << "\n";
  EXPECT_EQ(unloads.size(), kUnloadAt.size());
  for (std::size_t i = 0; i < unloads.size(); ++i) {
    const auto end = i + 1 < unloads.size() ? unloads[i + 1] : SteadyClock::time_point::max();
    EXPECT_GE(copies.between(unloads[i], end), 1) << "unload " << i + 1 << " sent nothing again to idem";
  }
  EXPECT_GE(copies.total(), 10) << "the test's premise: the rewinds sent copies";
  EXPECT_EQ(copies.total(), copies.answered(Reason::kDuplicate) + copies.answered(Reason::kProcessed))
      << "every copy is a duplicate or dropped while held";
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

// idem under the plain consumers' settings (receiver queue 1,000, ack timeout 1,000 ms,
// two consumers) with a backlog of 50 per consumer, and every 60th message slower than
// the ack timeout: the broker sends those again while they run (to the other consumer,
// which finds the lease held, or to the same one, whose source drops the copy).
TEST(PulsarStories, AckTimeoutWithALaggingListenerRunsEachEffectOnceThroughIdem) {
  const std::string topic = fresh("lag-idem");
  publish(topic, kLagMessages);
  Effects effects;
  Copies copies;
  auto slow = [](const std::string& id) { return std::stoi(id.substr(1)) % 60 == 30; };
  auto store = memory_store();  // both consumers' store, as a shared Redis would be
  const std::string uri = broker().uri(topic, "sub", "ack_timeout_ms=1000&receiver_queue=1000");
  RuntimeOptions ro;
  ro.workers = 1;
  ro.backlog = 50;
  std::vector<std::unique_ptr<IdemConsumer>> consumers;
  for (int i = 0; i < 2; ++i) {
    consumers.push_back(std::make_unique<IdemConsumer>(
        uri, effectively_once(store),
        [&](const Msg& m) {
          effects.add(m.id);
          std::this_thread::sleep_for(slow(m.id) ? 2500ms : kHandlerTime);
        },
        ro, &copies));
  }
  std::vector<std::thread> threads;
  for (auto& c : consumers) threads.emplace_back([&c] { c->run(); });
  for (auto& t : threads) t.join();
  std::cout << "ack timeout with a lagging listener, idem: " << effects.repeats() << " duplicate executions of "
            << kLagMessages << " messages; copies received: " << copies.total() << " ("
            << copies.answered(Reason::kDuplicate) << " duplicate, " << copies.answered(Reason::kInProgress)
            << " in progress, " << copies.answered(Reason::kProcessed) << " dropped by the source while held); of the slow ones:";
  for (int i = 30; i < kLagMessages; i += 60) std::cout << " " << copies.of("m" + std::to_string(i));
  std::cout << "\n";
  for (int i = 30; i < kLagMessages; i += 60) {
    EXPECT_GE(copies.of("m" + std::to_string(i)), 1) << "m" << i << " outlived the ack timeout; the broker sent it again";
  }
  EXPECT_EQ(copies.total(), copies.answered(Reason::kDuplicate) + copies.answered(Reason::kInProgress) +
                                copies.answered(Reason::kProcessed))
      << "every copy is a duplicate, in progress, or dropped while held";
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

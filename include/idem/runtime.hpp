// Runtime<Msg>: the consumer loop, written once. It fetches deliveries from a
// MessageSource, runs them through a Consumer<Msg> on N worker threads — one at a time
// per entity key (per message id for messages without one), in arrival order,
// different keys in parallel — and applies each Decision to the broker on its own
// loop thread (docs/runtime.md).
//
//   auto source = idem::open_source(                  // idem/open_source.hpp; or any MessageSource
//       "redis-stream://127.0.0.1:6379/orders?group=g", {.lease = opts.lease}).value();
//   auto consumer = idem::Consumer<Order>::create(opts, ex, handler).value();
//   idem::RuntimeOptions ro;
//   ro.workers = 4;
//   auto rt = idem::Runtime<Order>::create(ro, *source, consumer, decode_order).value();
//   Status s = rt->run();                          // until rt->stop()
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/consumer.hpp"
#include "idem/detail/runtime_loop.hpp"
#include "idem/metrics.hpp"
#include "idem/source.hpp"

namespace spdlog {
class logger;
}

namespace idem {

struct RuntimeOptions {
  // Worker threads that run the consumer. 0 (default): the number of CPUs.
  std::size_t workers = 0;
  // Messages per Consumer call: 1 (default) calls process() per message; more calls
  // process_batch() on up to this many ready messages of different keys.
  std::size_t batch = 1;
  // Fetched messages allowed beyond those the workers run at once. In flight, from
  // fetch to applied decision, is then at most workers * batch + backlog. 0 (default):
  // 2 * workers * max(batch, 256), which suits handlers of up to a few ms. With slower
  // ones choose a backlog whose wait (backlog × handler time / workers) stays well
  // below the broker's ack or claim timeout, and set max_queue_wait to be told when
  // it does not.
  std::size_t backlog = 0;
  // ms; how long one fetch blocks when nothing is in flight; default 200 ms. While work
  // is in flight the loop polls without blocking and waits on completions instead.
  Duration fetch_timeout{200};
  // ms; a message whose wait from receipt to its handler's start exceeded this is
  // logged with that cause. Set it below the broker's ack / claim timeout. 0 (default): off.
  Duration max_queue_wait{0};
  // The failure-path throttle: retry and dead-letter actions pass a token bucket of
  // this rate (per second; default 1000) and size (default 100), so a storm of poison
  // messages cannot flood the broker or the loop. A throttled action waits; its
  // delivery keeps its in-flight slot meanwhile, so fetching slows down too.
  double failure_actions_per_second = 1000;
  std::size_t failure_burst = 100;
  // ms; run() returns once nothing was fetched for this long, nothing is in flight,
  // the source says it holds nothing more for this consumer (MessageSource::drained())
  // and Consumer::tick() drains nothing. 0 (default): never.
  Duration idle_exit{0};
  // run() returns after deciding this many deliveries. 0 (default): no limit.
  std::uint64_t max_messages = 0;
  // ms; Consumer::tick() (drains, gap timeouts) runs this often while nothing is in
  // flight; default 1 s. It also runs once at start.
  Duration tick_every{1000};
  // ms; the longest pause between fetches that fail (the pause doubles from 50 ms);
  // default 5 s.
  Duration fetch_backoff_max{5000};

  // null: the consumer's (ConsumerOptions::clock), which stamps the deliveries'
  // receipt that the consumer measures queue waits against.
  std::shared_ptr<Clock> clock;
  std::shared_ptr<spdlog::logger> logger;  // null: silent
};

// The runtime's own counters and gauges (the consumer keeps its decision metrics).
// Every method is thread-safe.
class RuntimeMetrics {
 public:
  enum Counter {
    kFetched,            // deliveries fetched
    kDecided,            // deliveries whose decision was applied (or held)
    kThrottled,          // failure-path actions that had to wait for the throttle
    kActionFailures,     // broker calls (ack, retry, dead_letter) that failed
    kFetchErrors,        // fetches that failed
    kQueueWaitWarnings,  // messages that waited longer than max_queue_wait
    kCounterCount,
  };

  void add(Counter c, std::uint64_t n = 1) { counters_[c].fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t get(Counter c) const { return counters_[c].load(std::memory_order_relaxed); }
  void count_action(Action a) { actions_[static_cast<int>(a)].fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t actions(Action a) const { return actions_[static_cast<int>(a)].load(std::memory_order_relaxed); }
  void set_in_flight(std::uint64_t n) { in_flight_.store(n, std::memory_order_relaxed); }
  void set_backlog(std::uint64_t n) { backlog_.store(n, std::memory_order_relaxed); }
  std::uint64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  std::uint64_t backlog() const { return backlog_.load(std::memory_order_relaxed); }

  Histogram queue_wait;  // receipt → handler start

  // Prometheus text, metric names prefixed by `prefix`_runtime_.
  std::string prometheus(std::string_view prefix = "idem") const;

 private:
  std::array<std::atomic<std::uint64_t>, kCounterCount> counters_{};
  std::array<std::atomic<std::uint64_t>, 4> actions_{};
  std::atomic<std::uint64_t> in_flight_{0};
  std::atomic<std::uint64_t> backlog_{0};
};


template <class Msg>
class Runtime {
 public:
  // Turns a delivery into a message. An error is the message's fault: the delivery is
  // dead-lettered with reason bad_message and the error's text as detail.
  using Decoder = std::function<StatusOr<Msg>(const Delivery&)>;
  // Told every delivery's decision on the loop thread, right after it was applied to
  // the broker (or the delivery was held), with its decoded message (null when the
  // body could not be decoded).
  using Applied = std::function<void(const Delivery&, const Msg*, const Decision&)>;

  // `source` and `consumer` must outlive the runtime. `applied` may be null. Returns
  // kInvalidArgument naming the option for unusable options or a null decoder.
  static StatusOr<std::unique_ptr<Runtime>> create(RuntimeOptions options, MessageSource& source,
                                                   Consumer<Msg>& consumer, Decoder decode, Applied applied = {}) {
    if (!decode) return invalid_argument("Runtime::create: the decoder is empty");
    if (Status s = detail::validate(options); !s.ok()) return s;
    if (!options.clock) options.clock = consumer.options().clock;
    return std::unique_ptr<Runtime>(
        new Runtime(std::move(options), source, consumer, std::move(decode), std::move(applied)));
  }

  // Runs the loop on the calling thread until stop(), max_messages or idle_exit.
  // On the way out it stops fetching, leaves deliveries that have not started to the
  // broker (hold), waits for those that run, applies their decisions, and joins the
  // workers. It does not close the source. Returns OK then; an error only when the
  // loop cannot go on. Call it once.
  Status run() { return loop_.run(); }

  // Asks run() to return, as described there. Thread-safe and async-signal-safe.
  void stop() { loop_.stop(); }

  RuntimeMetrics& metrics() { return metrics_; }

 private:
  struct Item : detail::WorkItem {
    std::optional<Msg> msg;
  };

  class Processor : public detail::WorkProcessor {
   public:
    Processor(Consumer<Msg>& c, Decoder d, Applied a) : consumer_(c), decode_(std::move(d)), applied_(std::move(a)) {}

    std::unique_ptr<detail::WorkItem> prepare(Delivery d) override {
      auto item = std::make_unique<Item>();
      StatusOr<Msg> m = decode(d);
      item->delivery = std::move(d);
      if (!m.ok()) {
        item->decided = true;
        item->decision = Decision::dead_letter(Reason::kBadMessage, m.status().message());
        return item;
      }
      item->msg.emplace(std::move(m).value());
      // By entity key; without one by id, so that a copy that comes while its id runs
      // waits for that run's decision (then duplicate) instead of meeting its lease.
      std::optional<std::string_view> k = consumer_.key_of(*item->msg);
      if (!k) k = consumer_.id_of(*item->msg);
      if (k) {
        item->key = detail::queue_key(*k);
        item->keyed = true;
      }
      return item;
    }

    void process(std::span<detail::WorkItem* const> items) override {
      if (items.size() == 1) {
        auto* it = static_cast<Item*>(items[0]);
        it->decision = consumer_.process(*it->msg);
        return;
      }
      std::vector<Msg> batch;
      batch.reserve(items.size());
      for (detail::WorkItem* w : items) batch.push_back(std::move(*static_cast<Item*>(w)->msg));
      std::vector<Decision> ds = consumer_.process_batch(batch);
      for (std::size_t i = 0; i < items.size(); ++i) {
        items[i]->decision = std::move(ds[i]);
        static_cast<Item*>(items[i])->msg = std::move(batch[i]);  // for applied()
      }
    }

    std::size_t tick() override { return consumer_.tick(); }

    void applied(const detail::WorkItem& w) override {
      if (!applied_) return;
      const auto& it = static_cast<const Item&>(w);
      applied_(it.delivery, it.msg ? &*it.msg : nullptr, it.decision);
    }

   private:
    // The decoder's answer; a decoder that throws is a bad message too.
    StatusOr<Msg> decode(const Delivery& d) {
      try {
        return decode_(d);
      } catch (const std::exception& e) {
        return invalid_argument(std::string("the decoder threw: ") + e.what());
      } catch (...) {
        return invalid_argument("the decoder threw");
      }
    }

    Consumer<Msg>& consumer_;
    Decoder decode_;
    Applied applied_;
  };

  Runtime(RuntimeOptions o, MessageSource& s, Consumer<Msg>& c, Decoder d, Applied a)
      : processor_(c, std::move(d), std::move(a)), loop_(o, s, processor_, metrics_) {}

  RuntimeMetrics metrics_;
  Processor processor_;
  detail::Loop loop_;
};

}  // namespace idem

// The consumer loop (docs/runtime.md): one loop thread fetches and applies decisions,
// N workers run the consumer. Shared state (the keyed queue and the finished items)
// lives under one mutex; everything else belongs to the loop thread.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "../log.hpp"
#include "idem/runtime.hpp"
#include "keyed_queue.hpp"
#include "token_bucket.hpp"

namespace idem::detail {
namespace {

constexpr std::size_t kMinChunk = 256;              // items a worker may take per wake-up
constexpr std::int64_t kChunkBudgetNs = 1'000'000;  // and about this much work (1 ms) at the most
constexpr Duration kBusyWait{5};                    // wait for completions while work runs
constexpr Duration kFirstFetchBackoff{50};          // first pause after a failed fetch
constexpr std::uint64_t kLogEveryNthFailure = 100;  // repeated broker-call failures

std::size_t default_workers() { return std::max(1u, std::thread::hardware_concurrency()); }

}  // namespace

Status validate(const RuntimeOptions& o) {
  if (o.batch == 0) return invalid_argument("RuntimeOptions::batch must be at least 1");
  if (o.fetch_timeout.count() < 0) return invalid_argument("RuntimeOptions::fetch_timeout must not be negative");
  if (!(o.failure_actions_per_second > 0)) {
    return invalid_argument("RuntimeOptions::failure_actions_per_second must be positive");
  }
  if (o.failure_burst == 0) return invalid_argument("RuntimeOptions::failure_burst must be at least 1");
  if (o.tick_every.count() <= 0) return invalid_argument("RuntimeOptions::tick_every must be positive");
  if (o.fetch_backoff_max < kFirstFetchBackoff) {
    return invalid_argument("RuntimeOptions::fetch_backoff_max must be at least 50 ms");
  }
  return ok_status();
}

struct Loop::Impl : AssignmentListener {
  Impl(const RuntimeOptions& o, MessageSource& s, WorkProcessor& p, RuntimeMetrics& m, std::atomic<bool>& stop)
      : opts(o),
        source(s),
        processor(p),
        metrics(m),
        stop_requested(stop),
        clock(o.clock ? o.clock : system_clock()),
        log(o.logger.get()),
        workers(o.workers ? o.workers : default_workers()),
        chunk(std::max(o.batch, kMinChunk)),
        max_in_flight(o.backlog ? workers * o.batch + o.backlog : 2 * workers * chunk),
        throttle(o.failure_actions_per_second, o.failure_burst, clock->now()) {}

  // --- workers ---------------------------------------------------------------
  void worker_main();
  void run_items(std::vector<WorkItem*>& items);
  std::size_t share_of_ready() const;
  void note_item_time(std::chrono::steady_clock::duration took, std::size_t items);
  void note_start(WorkItem* w, TimePoint now);

  // --- loop thread -------------------------------------------------------------
  Status run();
  void step();
  void fetch_some(std::size_t capacity);
  void dispatch(std::unique_ptr<WorkItem> item);
  void flush_queued();
  void apply_finished();
  void apply(std::unique_ptr<WorkItem> item);
  void settle(WorkItem& w);
  Status call_broker(WorkItem& w);
  // source.flush() if decisions were applied since the last one; a failure counts as
  // a failed action.
  void flush_source();
  // Before a fetch: flush when the fetch may wait (nothing in flight), when the last
  // one came back empty (the broker may hold back until it sees the acks, as
  // RabbitMQ does for a prefetch), or once max_in_flight decisions wait. Otherwise
  // the settlements ride with later ones: one broker round trip for many.
  bool flush_due_before_fetch() const;
  void count_action_failure(std::string_view what, const Status& s);
  void wait_finished(Duration at_most);
  bool idle_exit_due();
  void tick_if_idle();
  void shut_down();
  void hold_unstarted(const std::function<bool(const WorkItem&)>& pred);
  void publish_gauges();
  std::uint64_t fetched() const { return metrics.get(RuntimeMetrics::kFetched); }
  bool budget_spent() const { return opts.max_messages > 0 && fetched() >= opts.max_messages; }

  // AssignmentListener (called from inside fetch(), on the loop thread).
  void on_assigned(std::span<const std::string> partitions) override;
  void on_revoked(std::span<const std::string> partitions) override;

  const RuntimeOptions opts;
  MessageSource& source;
  WorkProcessor& processor;
  RuntimeMetrics& metrics;
  std::atomic<bool>& stop_requested;
  std::shared_ptr<Clock> clock;
  spdlog::logger* log;
  const std::size_t workers;
  const std::size_t chunk;
  const std::size_t max_in_flight;
  std::atomic<std::int64_t> item_ns{0};  // the average time one item takes to run (note_item_time)

  // Shared with the workers, under mu.
  std::mutex mu;
  std::condition_variable work_cv;      // workers wait for ready items
  std::condition_variable finished_cv;  // the loop waits for finished items
  KeyedQueue queue;
  std::vector<WorkItem*> finished;
  bool loop_waiting = false;
  bool workers_exit = false;

  // The loop thread's own.
  std::vector<std::thread> threads;
  std::vector<Delivery> fetched_now;
  std::vector<WorkItem*> to_queue;  // prepared, not yet handed to the workers
  std::deque<WorkItem*> throttled;  // failure-path actions waiting for a token
  TokenBucket throttle;
  std::size_t in_flight = 0;  // fetched, decision not applied yet
  std::unordered_map<std::string, std::size_t> in_flight_by_partition;
  std::uint64_t action_failures = 0;
  std::size_t settled_since_flush = 0;
  bool last_fetch_empty = true;
  TimePoint last_fetched_any{};
  TimePoint last_tick{};
  Duration fetch_backoff{0};
  TimePoint fetch_resume_at{};
};

// --- workers -------------------------------------------------------------------

void Loop::Impl::worker_main() {
  std::vector<WorkItem*> items;
  for (;;) {
    {
      std::unique_lock lock(mu);
      work_cv.wait(lock, [&] { return workers_exit || queue.ready() > 0; });
      if (queue.ready() == 0) return;  // workers_exit and nothing left
      queue.take(share_of_ready(), items);
    }
    const auto t0 = std::chrono::steady_clock::now();
    run_items(items);
    note_item_time(std::chrono::steady_clock::now() - t0, items.size());
    {
      std::lock_guard lock(mu);
      std::size_t promoted = 0;
      for (WorkItem* w : items) {
        finished.push_back(w);
        promoted += queue.finish(w) ? 1 : 0;
      }
      if (promoted > 0) work_cv.notify_all();
      if (loop_waiting) finished_cv.notify_one();
    }
    items.clear();
  }
}

// How many ready items one worker takes (under mu): a fair share, so that the other
// workers find work too, but at least a batch and at most a chunk, and no more than
// about kChunkBudgetNs of work. Slow handlers thus take few items at a time: none
// waits behind a long chunk while other workers idle, and decisions come back soon.
std::size_t Loop::Impl::share_of_ready() const {
  const std::size_t share = (queue.ready() + workers - 1) / workers;
  const std::int64_t per_item = item_ns.load(std::memory_order_relaxed);
  // Before the first item has run, its cost is unknown: a batch at first.
  const std::size_t budget = per_item > 0 ? static_cast<std::size_t>(kChunkBudgetNs / per_item) : 0;
  return std::max(opts.batch, std::min({chunk, share, budget}));
}

// Keeps a moving average of the time one item takes to run (relaxed: workers may
// overwrite each other's sample, which only slows the average down).
void Loop::Impl::note_item_time(std::chrono::steady_clock::duration took, std::size_t items) {
  if (items == 0) return;
  const std::int64_t sample = std::chrono::duration_cast<std::chrono::nanoseconds>(took).count() /
                              static_cast<std::int64_t>(items);
  const std::int64_t old = item_ns.load(std::memory_order_relaxed);
  item_ns.store(old == 0 ? sample : (old * 7 + sample) / 8, std::memory_order_relaxed);
}

void Loop::Impl::run_items(std::vector<WorkItem*>& items) {
  const TimePoint now = clock->now();
  for (WorkItem* w : items) note_start(w, now);
  const std::size_t per_call = opts.batch;
  for (std::size_t i = 0; i < items.size(); i += per_call) {
    const std::size_t n = std::min(per_call, items.size() - i);
    processor.process(std::span<WorkItem* const>(items.data() + i, n));
  }
}

void Loop::Impl::note_start(WorkItem* w, TimePoint now) {
  const auto wait = now - w->delivery.received_at;
  metrics.queue_wait.record(std::chrono::duration_cast<std::chrono::nanoseconds>(wait));
  if (opts.max_queue_wait.count() > 0 && wait > opts.max_queue_wait) {
    metrics.add(RuntimeMetrics::kQueueWaitWarnings);
    log_warn(log,
             "idem runtime: delivery {} waited {} ms from receipt to its handler's start (queue wait), over "
             "max_queue_wait {} ms; a smaller backlog or batch keeps it lower",
             printable(w->delivery.broker_id), std::chrono::duration_cast<Duration>(wait).count(),
             opts.max_queue_wait.count());
  }
}

// --- the loop --------------------------------------------------------------------

Status Loop::Impl::run() {
  source.set_assignment_listener(this);
  threads.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i) threads.emplace_back([this] { worker_main(); });
  last_fetched_any = last_tick = clock->now();
  processor.tick();  // drains left by an earlier run
  while (!stop_requested.load(std::memory_order_relaxed)) {
    if (budget_spent() && in_flight == 0) break;
    if (opts.idle_exit.count() > 0 && idle_exit_due()) break;
    step();
  }
  shut_down();
  source.set_assignment_listener(nullptr);
  return ok_status();
}

void Loop::Impl::step() {
  apply_finished();
  if (in_flight > 0) source.keep_alive();
  tick_if_idle();
  const std::size_t capacity = max_in_flight > in_flight ? max_in_flight - in_flight : 0;
  const bool may_fetch = capacity > 0 && !budget_spent() && clock->now() >= fetch_resume_at;
  if (may_fetch) {
    if (flush_due_before_fetch()) flush_source();
    fetch_some(capacity);
  }
  publish_gauges();
  if (in_flight == 0) {
    if (!may_fetch) wait_finished(std::min(opts.fetch_timeout, fetch_backoff));
    return;
  }
  // Work runs: wait for it (briefly when more could be fetched).
  wait_finished(may_fetch && fetched_now.empty() ? kBusyWait : opts.fetch_timeout);
}

void Loop::Impl::fetch_some(std::size_t capacity) {
  if (opts.max_messages > 0) capacity = std::min<std::uint64_t>(capacity, opts.max_messages - fetched());
  fetched_now.clear();
  const Duration timeout = in_flight > 0 ? Duration(0) : opts.fetch_timeout;
  const Status s = source.fetch(capacity, timeout, fetched_now);
  last_fetch_empty = fetched_now.empty();
  if (!s.ok()) {
    metrics.add(RuntimeMetrics::kFetchErrors);
    fetch_backoff = std::min(opts.fetch_backoff_max, fetch_backoff.count() ? fetch_backoff * 2 : kFirstFetchBackoff);
    fetch_resume_at = clock->now() + fetch_backoff;
    log_warn(log, "idem runtime: fetch from {} failed ({}); next try in {} ms", source.describe(), s.to_string(),
             fetch_backoff.count());
  } else {
    fetch_backoff = Duration(0);
  }
  if (fetched_now.empty()) return;
  const TimePoint now = clock->now();
  last_fetched_any = now;
  for (Delivery& d : fetched_now) {
    if (d.received_at == TimePoint{}) d.received_at = now;
    dispatch(processor.prepare(std::move(d)));
  }
  flush_queued();
  fetched_now.clear();
}

// Counts `item` in flight and queues it for the workers (at the next flush_queued()),
// or applies a decision made while preparing it.
void Loop::Impl::dispatch(std::unique_ptr<WorkItem> item) {
  ++in_flight;
  metrics.add(RuntimeMetrics::kFetched);
  ++in_flight_by_partition[item->delivery.partition];
  if (item->decided) {
    apply(std::move(item));
    return;
  }
  to_queue.push_back(item.release());
}

// Hands what dispatch() collected to the workers under one lock.
void Loop::Impl::flush_queued() {
  if (to_queue.empty()) return;
  {
    std::lock_guard lock(mu);
    for (WorkItem* w : to_queue) queue.push(w);
  }
  if (to_queue.size() == 1) {
    work_cv.notify_one();
  } else {
    work_cv.notify_all();
  }
  to_queue.clear();
}

void Loop::Impl::wait_finished(Duration at_most) {
  std::unique_lock lock(mu);
  if (!finished.empty() || at_most.count() <= 0) return;
  loop_waiting = true;
  finished_cv.wait_for(lock, at_most, [&] { return !finished.empty(); });
  loop_waiting = false;
}

void Loop::Impl::apply_finished() {
  std::vector<WorkItem*> done;
  {
    std::lock_guard lock(mu);
    done.swap(finished);
  }
  // Throttled failure actions first, in their order, as tokens allow.
  while (!throttled.empty() && throttle.try_take(clock->now())) {
    std::unique_ptr<WorkItem> w(throttled.front());
    throttled.pop_front();
    settle(*w);
  }
  for (WorkItem* w : done) apply(std::unique_ptr<WorkItem>(w));
}

// Applies the decision, or parks a failure-path action that finds no token (it keeps
// its in-flight slot, so fetching slows down with it). A copy of a dead-lettered
// message is forwarded to the dead-letter destination again rather than acked: the
// store records a dead letter before the broker holds it, so this may be the delivery
// whose forward a crash cut off. The destination holds it once or more, never zero.
void Loop::Impl::apply(std::unique_ptr<WorkItem> item) {
  if (item->decision.dead_lettered && item->decision.action == Action::kAck)
    item->decision.action = Action::kDeadLetter;
  const Action a = item->decision.action;
  const bool failure_path = a == Action::kRetry || a == Action::kDeadLetter;
  if (failure_path && !(throttled.empty() && throttle.try_take(clock->now()))) {
    metrics.add(RuntimeMetrics::kThrottled);
    throttled.push_back(item.release());
    return;
  }
  settle(*item);
}

// Calls the broker for w's decision and ends w's time in flight.
void Loop::Impl::settle(WorkItem& w) {
  (void)call_broker(w);
  processor.applied(w);
  metrics.count_action(w.decision.action);
  metrics.add(RuntimeMetrics::kDecided);
  --in_flight;
  auto p = in_flight_by_partition.find(w.delivery.partition);
  if (p != in_flight_by_partition.end() && --p->second == 0) in_flight_by_partition.erase(p);
}

Status Loop::Impl::call_broker(WorkItem& w) {
  const Decision& d = w.decision;
  Status s;
  switch (d.action) {
    case Action::kAck:
      s = source.ack(w.delivery);
      break;
    case Action::kRetry:
      s = source.retry(w.delivery, d.delay);
      break;
    case Action::kDeadLetter:
      s = source.dead_letter(w.delivery, reason_name(d.reason), d.detail);
      break;
    case Action::kHold:
      source.hold(w.delivery);
      break;
  }
  if (!s.ok()) {
    count_action_failure(std::string(action_name(d.action)) + " of delivery " + printable(w.delivery.broker_id), s);
  }
  ++settled_since_flush;
  return s;
}

bool Loop::Impl::flush_due_before_fetch() const {
  return in_flight == 0 || last_fetch_empty || settled_since_flush >= max_in_flight;
}

void Loop::Impl::flush_source() {
  if (settled_since_flush == 0) return;
  settled_since_flush = 0;
  if (Status s = source.flush(); !s.ok()) count_action_failure("the flush of deferred settlements", s);
}

void Loop::Impl::count_action_failure(std::string_view what, const Status& s) {
  metrics.add(RuntimeMetrics::kActionFailures);
  if (action_failures++ % kLogEveryNthFailure == 0) {
    log_warn(log, "idem runtime: {} on {} failed ({}); the broker keeps what it concerns and redelivers it", what,
             source.describe(), s.to_string());
  }
}

bool Loop::Impl::idle_exit_due() {
  if (in_flight > 0 || !throttled.empty()) return false;
  const TimePoint now = clock->now();
  if (now - last_fetched_any < opts.idle_exit) return false;
  flush_source();
  StatusOr<bool> drained = source.drained();
  if (!drained.ok() || !*drained) return false;
  if (processor.tick() > 0) {  // a reorder buffer still had something to run
    last_fetched_any = now;
    return false;
  }
  return true;
}

void Loop::Impl::tick_if_idle() {
  if (in_flight > 0) return;
  const TimePoint now = clock->now();
  if (now - last_tick < opts.tick_every) return;
  last_tick = now;
  processor.tick();
}

// Leaves to the broker every delivery not yet started for which pred is true.
void Loop::Impl::hold_unstarted(const std::function<bool(const WorkItem&)>& pred) {
  std::vector<WorkItem*> out;
  {
    std::lock_guard lock(mu);
    queue.remove_waiting(pred, out);
  }
  for (WorkItem* w : out) {
    std::unique_ptr<WorkItem> item(w);
    item->decision = Decision::hold(Reason::kUnacknowledged);
    item->decision.detail = "not started before the runtime stopped or the partition moved";
    settle(*item);
  }
}

void Loop::Impl::shut_down() {
  hold_unstarted([](const WorkItem&) { return true; });
  while (in_flight > 0) {
    apply_finished();
    if (in_flight == 0) break;
    source.keep_alive();
    if (in_flight == throttled.size()) {
      std::this_thread::sleep_for(throttle.wait_for_token(clock->now()));
    } else {
      wait_finished(opts.fetch_timeout);
    }
  }
  {
    std::lock_guard lock(mu);
    workers_exit = true;
  }
  work_cv.notify_all();
  for (std::thread& t : threads) t.join();
  threads.clear();
  flush_source();
  publish_gauges();
}

void Loop::Impl::publish_gauges() {
  std::size_t queued;
  {
    std::lock_guard lock(mu);
    queued = queue.queued();
  }
  metrics.set_in_flight(in_flight);
  metrics.set_backlog(queued);
}

void Loop::Impl::on_assigned(std::span<const std::string> partitions) {
  for (const std::string& p : partitions) log_info(log, "idem runtime: partition {} assigned", printable(p));
}

void Loop::Impl::on_revoked(std::span<const std::string> partitions) {
  auto revoked = [&](const std::string& p) {
    return std::find(partitions.begin(), partitions.end(), p) != partitions.end();
  };
  hold_unstarted([&](const WorkItem& w) { return revoked(w.delivery.partition); });
  auto busy = [&] {
    for (const std::string& p : partitions)
      if (in_flight_by_partition.count(p) > 0) return true;
    return false;
  };
  while (busy()) {
    apply_finished();
    source.keep_alive();
    if (busy()) wait_finished(kBusyWait);
  }
  flush_source();
  for (const std::string& p : partitions) log_info(log, "idem runtime: partition {} revoked", printable(p));
}

// --- Loop ----------------------------------------------------------------------------

Loop::Loop(const RuntimeOptions& options, MessageSource& source, WorkProcessor& processor, RuntimeMetrics& metrics)
    : impl_(std::make_unique<Impl>(options, source, processor, metrics, stop_)) {}

Loop::~Loop() = default;

Status Loop::run() { return impl_->run(); }

}  // namespace idem::detail

#include "idem_paths.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <utility>
#include <vector>

#include "idem/backend/store_wrapper.hpp"
#include "idem/consumer.hpp"
#include "idem/memory_store.hpp"
#include "raw_sqlite.hpp"
#ifdef IDEM_BENCH_WITH_SQLITE_STORE
#include "idem/sqlite_store.hpp"
#endif

namespace idem::bench {
namespace {

[[noreturn]] void die(const std::string& what, const Status& s) {
  std::fprintf(stderr, "idem_bench_dedup: %s: %s\n", what.c_str(), s.to_string().c_str());
  std::exit(2);
}

void count(const Decision& d, PathResult& r) {
  if (d.action == Action::kAck && d.reason == Reason::kProcessed) {
    ++r.processed;
  } else if (d.action == Action::kAck && d.reason == Reason::kDuplicate) {
    ++r.duplicates;
  } else {
    ++r.other;
  }
}

// A store that adds up the time spent inside the calls the per-message path makes.
class TimedStore final : public StoreWrapper {
 public:
  using StoreWrapper::StoreWrapper;
  using Clock = std::chrono::steady_clock;

  StatusOr<ClaimResult> claim(const ClaimRequest& q) override {
    const auto t0 = Clock::now();
    auto r = StoreWrapper::claim(q);
    inside_ += Clock::now() - t0;
    return r;
  }
  Status commit(const CommitRequest& q) override {
    const auto t0 = Clock::now();
    Status s = StoreWrapper::commit(q);
    inside_ += Clock::now() - t0;
    return s;
  }
  StatusOr<std::size_t> purge_expired(TimePoint now, std::size_t max) override {
    const auto t0 = Clock::now();
    auto r = StoreWrapper::purge_expired(now, max);
    inside_ += Clock::now() - t0;
    return r;
  }
  // Returns the time inside the store since the last call, and restarts the count.
  Clock::duration take() { return std::exchange(inside_, Clock::duration{0}); }

 private:
  Clock::duration inside_{0};  // one thread only
};

double percentile_us(std::vector<std::int64_t>& ns, double q) {
  const auto k = static_cast<std::size_t>(q * static_cast<double>(ns.size() - 1));
  std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(k), ns.end());
  return static_cast<double>(ns[k]) / 1000.0;
}

}  // namespace

PathResult run_consumer(std::shared_ptr<Store> store, const Stream& s, Feed feed) {
  ConsumerOptions opts;
  opts.guarantee = Guarantee::kEffectivelyOnce;
  opts.store = std::move(store);
  Extractors<Msg> ex;
  ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  auto consumer = Consumer<Msg>::create(std::move(opts), std::move(ex),
                                        [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  if (!consumer.ok()) die("Consumer::create", consumer.status());

  PathResult r;
  const std::span<const Msg> all(s.messages);
  Stopwatch sw;
  if (!feed.batch) {
    for (const Msg& m : all) count(consumer->process(m), r);
  } else {
    for (std::size_t i = 0; i < all.size(); i += feed.size) {
      for (const Decision& d : consumer->process_batch(all.subspan(i, std::min(feed.size, all.size() - i))))
        count(d, r);
    }
  }
  sw.stop_into(r);
  r.messages = all.size();
  // The metrics must agree with the decisions returned.
  const MetricsSnapshot m = consumer->metrics().snapshot();
  if (m.decisions_for(Reason::kProcessed) != r.processed || m.decisions_for(Reason::kDuplicate) != r.duplicates) {
    std::fprintf(stderr, "idem_bench_dedup: metrics disagree with decisions\n");
    ++r.other;
  }
  return r;
}

PathResult run_memory(const Stream& s, Feed feed) {
  memory::Options mo;
  mo.max_records = std::max(mo.max_records, s.messages.size());
  auto store = memory::open(mo);
  if (!store.ok()) die("memory::open", store.status());
  return run_consumer(std::move(store).value(), s, feed);
}

PathResult run_memory_overhead(const Stream& s) {
  memory::Options mo;
  mo.max_records = std::max(mo.max_records, s.messages.size());
  auto opened = memory::open(mo);
  if (!opened.ok()) die("memory::open", opened.status());
  auto timed = std::make_shared<TimedStore>(std::move(opened).value());
  ConsumerOptions opts;
  opts.guarantee = Guarantee::kEffectivelyOnce;
  opts.store = timed;
  Extractors<Msg> ex;
  ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  auto consumer = Consumer<Msg>::create(std::move(opts), std::move(ex),
                                        [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  if (!consumer.ok()) die("Consumer::create", consumer.status());
  std::vector<std::int64_t> added;
  added.reserve(s.messages.size());
  PathResult r;
  Stopwatch sw;
  for (const Msg& m : s.messages) {
    const auto t0 = TimedStore::Clock::now();
    count(consumer->process(m), r);
    const auto total = TimedStore::Clock::now() - t0;
    added.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(total - timed->take()).count());
  }
  sw.stop_into(r);
  r.messages = s.messages.size();
  r.added_p50_us = percentile_us(added, 0.50);
  r.added_p99_us = percentile_us(added, 0.99);
  return r;
}

PathResult run_memory_store_direct(const Stream& s) {
  memory::Options mo;
  mo.max_records = std::max(mo.max_records, s.messages.size());
  auto opened = memory::open(mo);
  if (!opened.ok()) die("memory::open", opened.status());
  std::shared_ptr<Store> store = std::move(opened).value();
  const std::string owner = "bench-owner";
  const Duration lease{30'000};
  const Duration ttl{7LL * 24 * 3600 * 1000};
  const std::shared_ptr<Clock> clock = system_clock();
  PathResult r;
  Stopwatch sw;
  for (const Msg& m : s.messages) {
    const TimePoint now = clock->now();
    auto c = store->claim({m.id, owner, lease, std::nullopt, now});
    if (!c.ok()) die("claim", c.status());
    if (c->status == ClaimStatus::kCompleted) {
      ++r.duplicates;
      continue;
    }
    if (c->status != ClaimStatus::kNew) {
      ++r.other;
      continue;
    }
    CommitRequest q;
    q.id = m.id;
    q.owner = owner;
    q.now = now;
    q.ttl = ttl;
    if (store->commit(q).ok())
      ++r.processed;
    else
      ++r.other;
  }
  sw.stop_into(r);
  r.messages = s.messages.size();
  return r;
}

#ifdef IDEM_BENCH_WITH_SQLITE_STORE
PathResult run_idem_sqlite(const std::string& path, const Stream& s, Feed feed, bool shared_leases) {
  remove_database(path);
  sqlite::Options so;
  so.path = path;
  so.leases = shared_leases ? sqlite::LeaseMode::kShared : sqlite::LeaseMode::kLocal;
  PathResult r;
  {
    auto store = sqlite::open(so);
    if (!store.ok()) die("idem::sqlite::open " + path, store.status());
    r = run_consumer(std::move(store).value(), s, feed);
  }
  remove_database(path);
  return r;
}
#endif

}  // namespace idem::bench

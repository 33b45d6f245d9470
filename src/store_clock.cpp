#include "idem/store_clock.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "timeline.hpp"

namespace idem {
namespace {

std::int64_t local_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr int kRequestsPerReading = 3;
constexpr Duration kFirstInterval{100};

}  // namespace

struct StoreClock::Impl {
  Impl(std::shared_ptr<Store> s, StoreClockOptions o) : store(std::move(s)), opts(o) {}

  // Reads the store kRequestsPerReading times and adds the one with the shortest round
  // trip to the timeline. Returns the first failure if none succeeded.
  Status read() {
    Status failed = ok_status();
    std::int64_t best_rtt = -1;
    detail::Timeline::Reading best;
    for (int i = 0; i < kRequestsPerReading; ++i) {
      const std::int64_t t0 = local_ns();
      auto t = store->server_time();
      const std::int64_t t1 = local_ns();
      if (!t.ok()) {
        if (failed.ok()) failed = t.status();
        continue;
      }
      if (best_rtt >= 0 && t1 - t0 >= best_rtt) continue;
      best_rtt = t1 - t0;
      best = {t0 + best_rtt / 2, t->time_since_epoch().count()};
    }
    if (best_rtt < 0) {
      failed_readings.fetch_add(1, std::memory_order_relaxed);
      return failed;
    }
    timeline.add(best);
    publish(best_rtt / 2);
    return ok_status();
  }

  // Publishes the timeline's estimate to now() (a sequence lock: readers retry while
  // the sequence is odd or moved).
  void publish(std::int64_t half_rtt) {
    const std::uint64_t s = seq.load(std::memory_order_relaxed);
    seq.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    anchor_local.store(timeline.last().local_ns, std::memory_order_relaxed);
    anchor_ref.store(timeline.last().ref_ns, std::memory_order_relaxed);
    rate.store(timeline.rate(), std::memory_order_relaxed);
    uncertainty_ns.store(half_rtt, std::memory_order_relaxed);
    seq.store(s + 2, std::memory_order_release);
  }

  std::int64_t now_ns() const {
    for (;;) {
      const std::uint64_t s = seq.load(std::memory_order_acquire);
      const std::int64_t local = anchor_local.load(std::memory_order_relaxed);
      const std::int64_t ref = anchor_ref.load(std::memory_order_relaxed);
      const double r = rate.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if ((s & 1) == 0 && seq.load(std::memory_order_relaxed) == s)
        return ref + static_cast<std::int64_t>(double(local_ns() - local) * r);
    }
  }

  // Reads the store 100 ms after start, then at twice the interval each time up to
  // opts.resample: a host whose clock runs at another rate is measured within a second.
  void run() {
    std::unique_lock lock(mu);
    Duration wait = std::min(opts.resample, kFirstInterval);
    while (!stop) {
      if (cv.wait_for(lock, wait, [this] { return stop; })) break;
      wait = std::min(opts.resample, wait * 2);
      lock.unlock();
      (void)read();  // a failure keeps the estimate going; counted in failed_readings
      lock.lock();
    }
  }

  const std::shared_ptr<Store> store;
  const StoreClockOptions opts;
  detail::Timeline timeline;  // the sampling thread's (and start()'s, before it runs)
  std::atomic<std::uint64_t> seq{0};
  std::atomic<std::int64_t> anchor_local{0}, anchor_ref{0}, uncertainty_ns{0};
  std::atomic<double> rate{1.0};
  std::atomic<std::uint64_t> failed_readings{0};
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;  // guarded by mu
  std::thread thread;
};

StatusOr<std::shared_ptr<StoreClock>> StoreClock::start(std::shared_ptr<Store> store, StoreClockOptions options) {
  if (store == nullptr) return invalid_argument("StoreClock: no store");
  if (options.resample.count() <= 0) return invalid_argument("StoreClock: resample must be > 0 ms");
  auto impl = std::make_unique<Impl>(std::move(store), options);
  if (Status s = impl->read(); !s.ok()) return s;
  Impl* raw = impl.get();
  raw->thread = std::thread([raw] { raw->run(); });
  return std::shared_ptr<StoreClock>(new StoreClock(std::move(impl)));
}

StoreClock::StoreClock(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StoreClock::~StoreClock() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  impl_->thread.join();
}

TimePoint StoreClock::now() const { return TimePoint(std::chrono::nanoseconds(impl_->now_ns())); }

std::chrono::nanoseconds StoreClock::uncertainty() const {
  return std::chrono::nanoseconds(impl_->uncertainty_ns.load(std::memory_order_relaxed));
}

double StoreClock::rate() const { return impl_->rate.load(std::memory_order_relaxed); }

std::uint64_t StoreClock::failed_readings() const { return impl_->failed_readings.load(std::memory_order_relaxed); }

StatusOr<std::shared_ptr<Clock>> clock_for(std::shared_ptr<Store> store, StoreClockOptions options) {
  auto clock = StoreClock::start(std::move(store), options);
  if (clock.ok()) return std::shared_ptr<Clock>(std::move(clock).value());
  if (clock.status().code() == StatusCode::kUnimplemented) return system_clock();
  return clock.status();
}

}  // namespace idem

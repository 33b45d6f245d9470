// The injected clock. Leases, TTLs, backoff, gap timeouts and latency metrics all read
// time through a Clock, so tests move time by hand instead of sleeping.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace idem {

using Duration = std::chrono::milliseconds;
// Wall-clock time with nanosecond resolution. Stores persist it in milliseconds.
using TimePoint = std::chrono::time_point<std::chrono::system_clock, std::chrono::nanoseconds>;

// Milliseconds since the Unix epoch, the unit every store persists.
inline std::int64_t to_unix_ms(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
inline TimePoint from_unix_ms(std::int64_t ms) { return TimePoint(std::chrono::milliseconds(ms)); }

// A source of time. Implementations must be thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
};

// The real wall clock, as it reads at every call (a step of it moves every reading).
class SystemClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::system_clock::now(); }
};
// The host's clock for this process (never null): the wall clock at the first call, advanced
// by the monotonic clock, so that a step of the wall clock while the process runs moves nothing.
std::shared_ptr<Clock> system_clock();

// A clock that moves only when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = from_unix_ms(1'700'000'000'000)) : ns_(start.time_since_epoch().count()) {}
  TimePoint now() const override { return TimePoint(std::chrono::nanoseconds(ns_.load())); }
  void set(TimePoint t) { ns_.store(t.time_since_epoch().count()); }
  void advance(std::chrono::nanoseconds d) { ns_.fetch_add(d.count()); }

 private:
  std::atomic<std::int64_t> ns_;
};

}  // namespace idem

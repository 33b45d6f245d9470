#include "idem/clock.hpp"

namespace idem {
namespace {

// The wall clock read once, then advanced by the monotonic clock: durations inside the
// process never jump when NTP or an operator steps the wall clock; the next process
// starts from the wall clock as it then reads. (CLOCK_MONOTONIC and CLOCK_REALTIME
// tick at the rate NTP disciplines both at, so the two stay together otherwise.)
class HostClock final : public Clock {
 public:
  HostClock() : wall_(std::chrono::system_clock::now()), mono_(std::chrono::steady_clock::now()) {}
  TimePoint now() const override { return wall_ + (std::chrono::steady_clock::now() - mono_); }

 private:
  const TimePoint wall_;
  const std::chrono::steady_clock::time_point mono_;
};

}  // namespace

std::shared_ptr<Clock> system_clock() {
  static const auto clock = std::make_shared<HostClock>();
  return clock;
}

}  // namespace idem

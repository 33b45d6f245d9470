// A token bucket on an injected clock: `rate` tokens a second, at most `burst` saved.
// Not thread-safe (the runtime's loop thread owns it).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

#include "idem/clock.hpp"

namespace idem::detail {

class TokenBucket {
 public:
  // REQUIRES: rate > 0, burst >= 1. Starts full.
  TokenBucket(double rate, std::size_t burst, TimePoint now)
      : rate_(rate), burst_(static_cast<double>(burst)), tokens_(burst_), last_(now) {}

  // Takes one token and returns true, or returns false when none is left.
  bool try_take(TimePoint now) {
    refill(now);
    if (tokens_ < 1.0) return false;
    tokens_ -= 1.0;
    return true;
  }

  // How long until the next token, from `now` (zero when one is there).
  std::chrono::nanoseconds wait_for_token(TimePoint now) {
    refill(now);
    if (tokens_ >= 1.0) return std::chrono::nanoseconds(0);
    return std::chrono::nanoseconds(static_cast<long long>((1.0 - tokens_) / rate_ * 1e9) + 1);
  }

 private:
  void refill(TimePoint now) {
    if (now <= last_) return;
    const double seconds = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + seconds * rate_);
    last_ = now;
  }

  double rate_;
  double burst_;
  double tokens_;
  TimePoint last_;
};

}  // namespace idem::detail

// Timeline: an estimate of a reference clock (a store's) as a function of the local
// monotonic clock, from readings of the reference. Internal to StoreClock; pure
// arithmetic, so that its rules are tested with made-up readings.
#pragma once

#include <cstdint>

namespace idem::detail {

class Timeline {
 public:
  // One reading: the reference said `ref_ns` at local monotonic time `local_ns` (the
  // midpoint of the request's round trip).
  struct Reading {
    std::int64_t local_ns = 0;
    std::int64_t ref_ns = 0;
  };

  // A reference that moved by more than this much against the prediction, and by more
  // than half the local time since the last reading, stepped (its clock was set): the
  // estimate follows it at once and measures the rate anew from there.
  static constexpr std::int64_t kStepNs = 1'000'000'000;
  // The rate is measured only over at least this much local time (then over all the
  // time since the baseline's first reading, which makes it more precise each reading).
  static constexpr std::int64_t kMinBaselineNs = 200'000'000;
  // The measured rate is kept within [1 / kMaxRate, kMaxRate].
  static constexpr double kMaxRate = 2.0;

  // Takes a reading: the estimate passes through it from now on. Readings come in
  // increasing local time. Not thread-safe.
  void add(const Reading& r) {
    if (readings_ > 0 && r.local_ns > last_.local_ns && !stepped(r)) {
      const std::int64_t baseline = r.local_ns - first_.local_ns;
      if (baseline >= kMinBaselineNs) rate_ = clamp(double(r.ref_ns - first_.ref_ns) / double(baseline));
    } else {
      first_ = r;  // the first reading, or the first after a step: the rate's baseline starts here
    }
    last_ = r;
    ++readings_;
  }

  // The reference's time at local monotonic time local_ns. REQUIRES: a reading.
  std::int64_t at(std::int64_t local_ns) const {
    return last_.ref_ns + static_cast<std::int64_t>(double(local_ns - last_.local_ns) * rate_);
  }

  const Reading& last() const { return last_; }
  double rate() const { return rate_; }  // reference ns per local ns
  std::int64_t readings() const { return readings_; }

 private:
  bool stepped(const Reading& r) const {
    std::int64_t off = r.ref_ns - at(r.local_ns);
    if (off < 0) off = -off;
    return off > kStepNs && off > (r.local_ns - last_.local_ns) / 2;
  }
  static double clamp(double rate) {
    if (rate > kMaxRate) return kMaxRate;
    if (rate < 1 / kMaxRate) return 1 / kMaxRate;
    return rate;
  }

  Reading first_, last_;
  double rate_ = 1.0;
  std::int64_t readings_ = 0;
};

}  // namespace idem::detail

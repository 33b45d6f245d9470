// CallClock: the clock of one engine call and the timing of its store calls. Internal.
#pragma once

#include <optional>

#include "engine_impl.hpp"
#include "idem/message.hpp"
#include "idem/metrics.hpp"

namespace idem::detail {

// One engine call reads the clock at its steps and reuses the reading in between:
// a message costs four reads (start, after the claim, after the handler, after the
// commit) rather than two per timed step. Not thread-safe: one per call.
class CallClock {
 public:
  CallClock(Engine::Impl& impl, Metrics& metrics) : impl_(impl), metrics_(metrics) {}

  // Reads the clock; last() returns the reading until the next read().
  TimePoint read() { return last_ = impl_.now(); }
  TimePoint last() const { return last_; }

  // Runs one store call, timed from last() (REQUIRES: fresh, i.e. read by the step
  // just before) to a new read(). Without latency_metrics, or over an in_process store:
  // untimed, last() unchanged.
  template <class F>
  auto timed_store(F&& f) {
    if (!impl_.time_store) return f();
    const TimePoint t0 = last_;
    auto r = f();
    metrics_.store_latency.record(read() - t0);
    return r;
  }

  // Notes that message m's handler (or, if it will not run, its decision) starts at t:
  // the queue wait since receipt, and `at` (what Pipeline::finish() reports against).
  void started(const MessageView& m, TimePoint t, std::optional<TimePoint>& at) {
    at = t;
    if (m.received_at) metrics_.queue_wait.record(t - *m.received_at);
  }

 private:
  Engine::Impl& impl_;
  Metrics& metrics_;
  TimePoint last_{};
};

}  // namespace idem::detail

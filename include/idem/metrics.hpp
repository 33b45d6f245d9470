// Counters per decision and latency histograms. Lock-free except the buffer gauges;
// every method is thread-safe. Read as a struct (snapshot()) or as Prometheus text (prometheus()).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "idem/decision.hpp"

namespace idem {

// Upper bounds of the histogram buckets, in seconds (1-2-5 steps from 1 µs to 50 s);
// a last, implicit bucket holds everything above.
inline constexpr std::array<double, 24> kLatencyBucketsSeconds = {1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4,
                                                                  5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1,
                                                                  0.2,  0.5,  1.0,  2.0,  5.0,  10.0, 20.0, 50.0};

struct HistogramSnapshot {
  std::array<std::uint64_t, kLatencyBucketsSeconds.size() + 1> buckets{};  // not cumulative
  std::uint64_t count = 0;
  double sum_seconds = 0;
};

class Histogram {
 public:
  void record(std::chrono::nanoseconds d);
  HistogramSnapshot snapshot() const;

 private:
  std::array<std::atomic<std::uint64_t>, kLatencyBucketsSeconds.size() + 1> buckets_{};
  std::atomic<std::uint64_t> sum_ns_{0};  // the count is the sum of the buckets
};

// The age of one key's gap in the reorder buffer (strict ordering).
struct GapAge {
  std::string key;
  Duration age{0};                   // ms since its oldest entry was buffered
  std::size_t buffered = 0;          // entries of this key
  std::uint64_t lowest_version = 0;  // the smallest buffered version
};

struct MetricsSnapshot {
  std::array<std::uint64_t, kReasonCount> decisions{};  // by Reason
  std::array<std::uint64_t, 4> actions{};               // by Action
  std::uint64_t ack_timeout_warnings = 0;
  HistogramSnapshot store_latency;    // each store call (none if capabilities().in_process)
  HistogramSnapshot handler_latency;  // each handler call
  HistogramSnapshot queue_wait;       // received → handler start

  // Strict ordering. Gauges as of the last tick: entries and bytes in the reorder
  // buffer, and the oldest gaps (up to ordering.gap_report_keys, oldest first).
  std::uint64_t buffered = 0;
  std::uint64_t buffer_bytes = 0;
  std::vector<GapAge> gaps;
  std::uint64_t drained = 0;           // buffered messages processed by a drain
  std::uint64_t skipped_versions = 0;  // versions skipped by gap_policy skip
  // Outcomes of messages that left (or failed to leave) the buffer, by Reason.
  std::array<std::uint64_t, kReasonCount> buffered_outcomes{};

  std::uint64_t decisions_for(Reason r) const { return decisions[static_cast<int>(r)]; }
  std::uint64_t actions_for(Action a) const { return actions[static_cast<int>(a)]; }
};

class Metrics {
 public:
  void count(const Decision& d);
  void count_ack_timeout() { ack_timeouts_.fetch_add(1, std::memory_order_relaxed); }
  void count_drained(std::uint64_t n) { drained_.fetch_add(n, std::memory_order_relaxed); }
  void count_skipped(std::uint64_t n) { skipped_.fetch_add(n, std::memory_order_relaxed); }
  void count_buffered_outcome(const Decision& d) {
    buffered_outcomes_[static_cast<int>(d.reason)].fetch_add(1, std::memory_order_relaxed);
  }
  // Sets the buffer gauges (takes a lock: called once per tick).
  void set_buffer(std::uint64_t count, std::uint64_t bytes, std::vector<GapAge> gaps);

  Histogram store_latency;
  Histogram handler_latency;
  Histogram queue_wait;

  MetricsSnapshot snapshot() const;
  // Prometheus text exposition format, metric names prefixed by `prefix`_.
  std::string prometheus(std::string_view prefix = "idem") const;

 private:
  // Decisions by (reason, action), at reason * kActions + action: one update per
  // decision; the snapshot sums them by reason and by action.
  static constexpr int kActions = 4;
  std::array<std::atomic<std::uint64_t>, kReasonCount * kActions> decisions_{};
  std::atomic<std::uint64_t> ack_timeouts_{0};
  std::atomic<std::uint64_t> drained_{0};
  std::atomic<std::uint64_t> skipped_{0};
  std::array<std::atomic<std::uint64_t>, kReasonCount> buffered_outcomes_{};
  mutable std::mutex buffer_mu_;
  std::uint64_t buffered_ = 0, buffer_bytes_ = 0;
  std::vector<GapAge> gaps_;
};

}  // namespace idem

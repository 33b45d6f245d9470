// Counters per decision and latency histograms. Lock-free; every method is
// thread-safe. Read as a struct (snapshot()) or as Prometheus text (prometheus()).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "idem/decision.hpp"

namespace idem {

// Upper bounds of the histogram buckets, in seconds (1-2-5 steps from 1 µs to 50 s);
// a last, implicit bucket holds everything above.
inline constexpr std::array<double, 24> kLatencyBucketsSeconds = {
    1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3,
    1e-2, 2e-2, 5e-2, 0.1,  0.2,  0.5,  1.0,  2.0,  5.0,  10.0, 20.0, 50.0};

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
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_ns_{0};
};

struct MetricsSnapshot {
  std::array<std::uint64_t, kReasonCount> decisions{};  // by Reason
  std::array<std::uint64_t, 4> actions{};               // by Action
  std::uint64_t ack_timeout_warnings = 0;
  HistogramSnapshot store_latency;    // each store call
  HistogramSnapshot handler_latency;  // each handler call
  HistogramSnapshot queue_wait;       // received → handler start

  std::uint64_t decisions_for(Reason r) const { return decisions[static_cast<int>(r)]; }
  std::uint64_t actions_for(Action a) const { return actions[static_cast<int>(a)]; }
};

class Metrics {
 public:
  void count(const Decision& d);
  void count_ack_timeout() { ack_timeouts_.fetch_add(1, std::memory_order_relaxed); }

  Histogram store_latency;
  Histogram handler_latency;
  Histogram queue_wait;

  MetricsSnapshot snapshot() const;
  // Prometheus text exposition format, metric names prefixed by `prefix`_.
  std::string prometheus(std::string_view prefix = "idem") const;

 private:
  std::array<std::atomic<std::uint64_t>, kReasonCount> decisions_{};
  std::array<std::atomic<std::uint64_t>, 4> actions_{};
  std::atomic<std::uint64_t> ack_timeouts_{0};
};

}  // namespace idem

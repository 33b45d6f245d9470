// What one measured path reports, and the stopwatch that measures it.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "sqlite_probe.hpp"

namespace idem::bench {

struct PathResult {
  double wall_seconds = 0;           // elapsed real time of the measured loop
  double cpu_seconds = 0;            // CPU time of the process during the loop
  std::uint64_t messages = 0;        // deliveries fed in
  std::uint64_t processed = 0;       // deliveries whose handler ran (first deliveries)
  std::uint64_t duplicates = 0;      // deliveries recognised as duplicates
  std::uint64_t other = 0;           // anything else (retry, dead_letter, …): must be 0
  std::optional<ProbeReport> probe;  // with --profile: SQLite activity during the loop
  // The overhead row: the middleware's own time per message (the call's time minus the
  // time inside store calls), 50th and 99th percentile, in µs.
  std::optional<double> added_p50_us, added_p99_us;

  double rate() const { return wall_seconds > 0 ? static_cast<double>(messages) / wall_seconds : 0; }
};

// Wall and process-CPU time since construction; with the probe installed, also the
// SQLite activity since construction (so setup and close are not counted).
class Stopwatch {
 public:
  Stopwatch() {
    if (probe_installed()) probe_reset();
    wall_ = std::chrono::steady_clock::now();
    cpu_ = cpu_now();
  }
  void stop_into(PathResult& r) const {
    r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count();
    r.cpu_seconds = cpu_now() - cpu_;
    if (probe_installed()) r.probe = probe_report();
  }

 private:
  static double cpu_now() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
  std::chrono::steady_clock::time_point wall_;
  double cpu_ = 0;
};

}  // namespace idem::bench

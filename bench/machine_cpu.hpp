// The whole machine's CPU use over a benchmark row's timed window: every process
// counts (the client, the broker server, the store), from /proc/stat sampled every
// 10 ms by a thread of its own. It tells a row bound by the machine's CPUs (busy near
// 100%) from one that waits (on round trips, on a lock).
#pragma once

#include <chrono>
#include <cstddef>

namespace idem::bench {

struct MachineCpu {
  double us_per_msg = 0;  // CPU time of all processes per message, µs
  double busy = 0;        // the share of all CPUs busy over the window, 0..1
};

// The machine's CPU use between `start` and `end` (steady clock) over n messages; zero
// when /proc/stat cannot be read. The sampler starts at the first call of this or
// start_cpu_sampler(): a window must begin after that.
MachineCpu machine_cpu(std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point end,
                       std::size_t n);

void start_cpu_sampler();

// Keeps [start, end] over n messages as the last window (thread-safe), and returns the
// machine's CPU use over the last window kept.
void note_window(std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point end,
                 std::size_t n);
MachineCpu last_window_cpu();

}  // namespace idem::bench

#include "machine_cpu.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace idem::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Sample {
  Clock::time_point at;
  std::uint64_t busy = 0, total = 0;  // clock ticks of all CPUs
};

// The first line of /proc/stat: user nice system idle iowait irq softirq steal ….
bool read_stat(Sample& s) {
  std::ifstream in("/proc/stat");
  std::string cpu;
  std::uint64_t v[8] = {};
  if (!(in >> cpu) || cpu != "cpu") return false;
  for (std::uint64_t& x : v) in >> x;
  if (!in) return false;
  s.at = Clock::now();
  s.total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
  s.busy = s.total - v[3] - v[4];
  return true;
}

class Sampler {
 public:
  Sampler() : thread_([this] { loop(); }) {}
  ~Sampler() {
    stop_.store(true);
    thread_.join();
  }

  // The last sample at or before t (the first one if none).
  Sample at(Clock::time_point t) {
    std::lock_guard<std::mutex> l(mu_);
    if (samples_.empty()) return {};
    auto it = std::upper_bound(samples_.begin(), samples_.end(), t,
                               [](Clock::time_point x, const Sample& s) { return x < s.at; });
    return it == samples_.begin() ? *it : *std::prev(it);
  }

 private:
  void loop() {
    while (!stop_.load()) {
      Sample s;
      if (read_stat(s)) {
        std::lock_guard<std::mutex> l(mu_);
        samples_.push_back(s);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  std::mutex mu_;
  std::vector<Sample> samples_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

Sampler& sampler() {
  static Sampler s;
  return s;
}

struct Window {
  Clock::time_point start, end;
  std::size_t n = 0;
};

std::mutex window_mu;
Window last_window;

}  // namespace

void note_window(Clock::time_point start, Clock::time_point end, std::size_t n) {
  std::lock_guard<std::mutex> l(window_mu);
  last_window = {start, end, n};
}

MachineCpu last_window_cpu() {
  Window w;
  {
    std::lock_guard<std::mutex> l(window_mu);
    w = last_window;
  }
  return w.n == 0 ? MachineCpu{} : machine_cpu(w.start, w.end, w.n);
}

void start_cpu_sampler() { (void)sampler(); }

MachineCpu machine_cpu(Clock::time_point start, Clock::time_point end, std::size_t n) {
  const Sample a = sampler().at(start), b = sampler().at(end);
  if (b.total <= a.total || n == 0) return {};
  const double ticks_per_s = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double busy_s = static_cast<double>(b.busy - a.busy) / ticks_per_s;
  return {busy_s * 1e6 / static_cast<double>(n),
          static_cast<double>(b.busy - a.busy) / static_cast<double>(b.total - a.total)};
}

}  // namespace idem::bench

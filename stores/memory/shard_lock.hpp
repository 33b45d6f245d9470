// The lock of one memory: shard. Internal to idem::memory.
#pragma once

#include <atomic>
#include <thread>

namespace idem::memory_detail {

// A mutual-exclusion lock (BasicLockable, for std::lock_guard and std::unique_lock)
// for critical sections of well under a microsecond, as a shard's are: taking a free
// lock costs one atomic exchange and releasing it a plain store, where std::mutex
// pays a library call and an atomic operation for each. A thread that finds it held
// spins kSpins times, then yields the CPU between tries, so that a holder preempted
// mid-section gets to run. Not recursive; not fair.
class ShardLock {
 public:
  void lock() {
    for (int spins = 0; flag_.exchange(true, std::memory_order_acquire);) {
      while (flag_.load(std::memory_order_relaxed)) {
        if (++spins < kSpins) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpins = 64;  // busy tries before the first yield
  std::atomic<bool> flag_{false};
};

}  // namespace idem::memory_detail

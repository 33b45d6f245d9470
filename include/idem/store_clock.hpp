// StoreClock: one timeline for every process that shares a store.
//
// A lease or a TTL is a deadline written in the time of the process that claimed or
// committed, and compared with the time of the process that reads it. Two consumers
// whose hosts' clocks disagree by more than a lease each take the other's lease as
// expired and both run the handler. A StoreClock reads the store's own time
// (Store::server_time(): Redis TIME, PostgreSQL clock_timestamp()) and, between
// readings, advances by the process's monotonic clock at the rate measured between
// readings. Every process of one store then reads about the same time, whatever its
// host's wall clock says; a step of that wall clock (NTP, an operator) changes nothing.
//
//   idem::ConsumerOptions options;
//   options.store = idem::open_store("redis://10.0.0.5:6379").value();
//   // A StoreClock here; system_clock() for a one-host store (SQLite, RocksDB, memory).
//   options.clock = idem::clock_for(options.store).value();
//   // Runtime::create then takes the consumer's clock too (RuntimeOptions::clock).
//
// Accuracy: each reading is the best (shortest round trip) of three requests, placed
// at the midpoint of its round trip, so it is off by at most half that round trip
// (uncertainty()); between readings the estimate drifts by the error of the measured
// rate. Two processes disagree by at most the sum of their uncertainties, so a lease
// of L holds for at least L minus that sum (well under a millisecond on one network).
//
// Steps of the store's own clock (its host's NTP set it) are followed at the next
// reading, by every process within one resample interval; the rate is then measured
// anew. A reading that fails (the store is down) keeps the estimate going at the last
// rate; the next interval tries again.
//
// Thread-safe: now() takes no lock. A thread of its own reads the store 100 ms after
// start, then at twice that interval each time up to StoreClockOptions::resample
// (so that a rate is measured within a second), until the clock is destroyed.
#pragma once

#include <chrono>
#include <memory>

#include "idem/clock.hpp"
#include "idem/status.hpp"
#include "idem/store.hpp"

namespace idem {

struct StoreClockOptions {
  Duration resample{5000};  // ms between readings of the store's time; default 5 s; REQUIRES: > 0
};

class StoreClock final : public Clock {
 public:
  // Reads the store's time (to anchor the clock) and starts the thread that reads it
  // again every options.resample. Errors: server_time()'s first failure
  // (kUnimplemented for a store without a time of its own: its processes share one
  // host's clock, system_clock()), kInvalidArgument for resample <= 0.
  static StatusOr<std::shared_ptr<StoreClock>> start(std::shared_ptr<Store> store, StoreClockOptions options = {});
  ~StoreClock() override;
  StoreClock(const StoreClock&) = delete;
  StoreClock& operator=(const StoreClock&) = delete;

  // The store's time now, as estimated.
  TimePoint now() const override;
  // Half the round trip of the reading now in use: the bound of its error.
  std::chrono::nanoseconds uncertainty() const;
  // The store's seconds per second of this process's monotonic clock, as measured (1 on
  // a healthy host; kept within [0.5, 2]).
  double rate() const;
  // Readings that failed since start.
  std::uint64_t failed_readings() const;

  struct Impl;

 private:
  explicit StoreClock(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The clock every process of `store` should use: a StoreClock when the store has a time
// of its own, else system_clock() (a one-host store: memory, SQLite, RocksDB). Errors:
// a store with a time that cannot be read now (kUnavailable).
StatusOr<std::shared_ptr<Clock>> clock_for(std::shared_ptr<Store> store, StoreClockOptions options = {});

}  // namespace idem

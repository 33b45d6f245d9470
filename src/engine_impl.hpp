// Engine::Impl: what one engine keeps across calls (its clock, store, logger,
// watermarks, the strict drain's backoff, the buffer timers, the lookahead claim and
// the outbox dispatcher). Internal.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "dispatcher.hpp"
#include "idem/detail/engine.hpp"
#include "idem/store.hpp"
#include "lookahead.hpp"
#include "watermarks.hpp"

namespace idem::detail {

struct Engine::Impl {
  std::shared_ptr<Clock> clock;
  spdlog::logger* log = nullptr;
  Store* store = nullptr;
  bool time_store = true;  // latency_metrics, and the store is not in_process
  std::atomic<bool> warned_manual{false};
  std::atomic<std::uint64_t> commits{0};  // since the last purge (note_commit)

  Watermarks watermarks;  // Ordering::kWatermark

  // Strict ordering: per key, no drain before this time (the backoff after a buffered
  // message failed).
  std::mutex buffered_mu;
  std::unordered_map<std::string, TimePoint> drain_not_before;
  // process() runs the buffer's timers (drains, gap timeouts) every gap_timeout / 4;
  // the first process() runs them at once.
  std::atomic<std::int64_t> last_timers_ns{0};
  std::atomic<bool> timers_ran{false};

  // Consumer::process(m, next): the claim of `next` taken with m's commit (lookahead.cpp).
  Lookahead lookahead;

  // The outbox's dispatcher (ConsumerOptions::outbox); null without an outbox.
  std::unique_ptr<Dispatcher> dispatcher;

  TimePoint now() const { return clock->now(); }
};

}  // namespace idem::detail

// The sidecar's calls of its service (sidecar.cpp), paused while the service is down:
// a deploy, a restart or an overloaded gateway must not spend the retries of messages
// that have nothing wrong with them, nor dead-letter them.
//
// A call that finds the service unavailable (Outcome::Service::kUnavailable) is not a
// decision: the worker waits, with backoff, and calls again, keeping the message's
// lease while it waits. Once every worker waits, the runtime has nothing to hand out
// and stops fetching; the broker keeps the rest. The service's first answer (of any status but
// those that say it is down) ends the pause.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "external_handler.hpp"

namespace idem::cli {

class HandlerPause {
 public:
  // `lease`: the consumer's lease, kept while a call waits; `timeout`: one call's limit,
  // which the lease also covers once the call starts. `max_wait`: the longest wait
  // between two tries (the first is 100 ms, each next twice the last).
  HandlerPause(std::shared_ptr<ExternalHandler> handler, Duration lease, Duration timeout,
               Duration max_wait = Duration(5'000));

  // The handler's result for m, after as many tries as the service's unavailability
  // takes. Thread-safe (one caller per worker). After stop(), a call that finds the
  // service unavailable returns its failure instead of waiting.
  HandlerResult call(const json::Message& m, HandlerContext& ctx);

  // Ends every wait; async-signal-safe (an atomic store).
  void stop() { stopping_.store(true); }

  // Whether calls are waiting for the service now, and why ("" when not).
  std::string paused_reason() const;

  // idem_handler_paused (gauge), idem_handler_pauses_total, idem_handler_paused_seconds_total
  // (counted until now while paused), idem_handler_unavailable_calls_total.
  std::string prometheus() const;

 private:
  using Clock = std::chrono::steady_clock;

  // Extends ctx's lease to cover a call starting now; false if the lease was lost.
  bool cover_call(HandlerContext& ctx) const;
  // Waits `wait`, extending the lease as it goes; false if stopped or the lease was lost.
  bool wait_keeping_lease(HandlerContext& ctx, Duration wait) const;
  void unavailable(const std::string& why);
  void answered();

  const std::shared_ptr<ExternalHandler> handler_;
  const Duration lease_, timeout_, max_wait_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> unavailable_calls_{0};
  mutable std::mutex mu_;
  bool paused_ = false;
  std::string why_;
  Clock::time_point since_;
  std::uint64_t pauses_ = 0;
  Duration paused_before_{0};  // the ended pauses' total
};

}  // namespace idem::cli

#include "handler_pause.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>
#include <thread>

namespace idem::cli {
namespace {

// What a call's lease covers beyond its deadline: the time to commit its decision.
constexpr Duration kCommitMargin(1'000);
constexpr Duration kFirstWait(100);
constexpr Duration kSlice(100);  // how often a wait looks at stop()

double seconds(Duration d) { return static_cast<double>(d.count()) / 1000; }

}  // namespace

HandlerPause::HandlerPause(std::shared_ptr<ExternalHandler> handler, Duration lease, Duration timeout,
                           Duration max_wait)
    : handler_(std::move(handler)), lease_(lease), timeout_(timeout), max_wait_(max_wait) {}

HandlerResult HandlerPause::call(const json::Message& m, HandlerContext& ctx) {
  Duration wait = kFirstWait;
  for (bool first = true;; first = false) {
    // The lease must outlast the call's deadline, or another consumer could claim the
    // message and call the service while this call still may run. The lease taken at
    // the claim covers a first call whose timeout is shorter than it.
    if ((!first || timeout_ + kCommitMargin > lease_) && !cover_call(ctx))
      return HandlerResult::fail("the message's lease was lost before the handler was called");
    Outcome out = handler_->call(m, ctx, std::chrono::steady_clock::now() + timeout_);
    if (out.service == Outcome::Service::kAnswered) answered();
    if (out.service != Outcome::Service::kUnavailable) return std::move(out.result);
    unavailable_calls_.fetch_add(1);
    unavailable(out.result.error());
    if (!wait_keeping_lease(ctx, wait)) return std::move(out.result);
    wait = std::min(wait * 2, max_wait_);
  }
}

bool HandlerPause::cover_call(HandlerContext& ctx) const {
  return ctx.extend_lease(timeout_ + kCommitMargin).ok();
}

bool HandlerPause::wait_keeping_lease(HandlerContext& ctx, Duration wait) const {
  const auto until = Clock::now() + wait;
  auto extended = Clock::now();
  while (Clock::now() < until) {
    if (stopping_.load()) return false;
    if (Clock::now() - extended >= lease_ / 3) {
      if (!ctx.extend_lease(lease_).ok()) return false;
      extended = Clock::now();
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(kSlice, until - Clock::now()));
  }
  return !stopping_.load();
}

// stderr once per change of state, not per call.
void HandlerPause::unavailable(const std::string& why) {
  std::lock_guard lock(mu_);
  why_ = why;
  if (paused_) return;
  paused_ = true;
  since_ = Clock::now();
  ++pauses_;
  std::cerr << "idem consume: the handler is unavailable (" << why
            << "): calls wait and are tried again, no message's retries are spent\n";
}

void HandlerPause::answered() {
  std::lock_guard lock(mu_);
  if (!paused_) return;
  paused_ = false;
  const Duration took = std::chrono::duration_cast<Duration>(Clock::now() - since_);
  paused_before_ += took;
  std::cerr << "idem consume: the handler answers again, after " << seconds(took) << " s unavailable\n";
}

std::string HandlerPause::paused_reason() const {
  std::lock_guard lock(mu_);
  return paused_ ? why_ : "";
}

std::string HandlerPause::prometheus() const {
  std::lock_guard lock(mu_);
  Duration paused = paused_before_;
  if (paused_) paused += std::chrono::duration_cast<Duration>(Clock::now() - since_);
  std::ostringstream o;
  o << "# HELP idem_handler_paused 1 while calls wait for an unavailable handler\n"
    << "# TYPE idem_handler_paused gauge\nidem_handler_paused " << (paused_ ? 1 : 0) << '\n'
    << "# HELP idem_handler_pauses_total Times the handler became unavailable\n"
    << "# TYPE idem_handler_pauses_total counter\nidem_handler_pauses_total " << pauses_ << '\n'
    << "# HELP idem_handler_paused_seconds_total Time spent waiting for an unavailable handler\n"
    << "# TYPE idem_handler_paused_seconds_total counter\nidem_handler_paused_seconds_total " << seconds(paused)
    << '\n'
    << "# HELP idem_handler_unavailable_calls_total Calls that found the handler unavailable (not counted "
       "against a message)\n"
    << "# TYPE idem_handler_unavailable_calls_total counter\nidem_handler_unavailable_calls_total "
    << unavailable_calls_.load() << '\n';
  return o.str();
}

}  // namespace idem::cli

// The lookahead of Consumer::process(m, next): the claim of `next` taken in the same
// round trip as m's commit (Store::commit_then_claim), kept until the call that
// processes next. Internal.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "idem/clock.hpp"
#include "idem/status.hpp"
#include "idem/store.hpp"

namespace idem::detail {

class Lookahead {
 public:
  // A claim taken in advance: kNew (this consumer holds the lease since `at`) or
  // kCompleted (the id was done when claimed).
  struct Claimed {
    std::string id;
    std::optional<std::uint64_t> fingerprint;
    ClaimResult claim;
    TimePoint at;  // the claim's `now`: the lease runs from here
  };

  Lookahead() = default;
  Lookahead(const Lookahead&) = delete;
  Lookahead& operator=(const Lookahead&) = delete;
  // Releases a lease still kept (a consumer destroyed before it processed `next`).
  ~Lookahead();

  // True iff a claim is kept. Lock-free: read on every process() call.
  bool held() const { return held_.load(std::memory_order_acquire); }

  // Takes the kept claim out (nullopt if none).
  std::optional<Claimed> take();

  // Keeps c for the next call; a claim kept before is released first. The release
  // (and the one of flush() and of the destructor) goes to `store` as `owner` at
  // clock->now(). REQUIRES: store, owner and clock outlive this object.
  void keep(Claimed c, Store* store, const std::string* owner, Clock* clock);

  // Releases the kept claim's lease, if any. Returns the release's status (OK if
  // nothing was kept).
  Status flush();

  // Releases c's lease if c holds one. Returns the release's status.
  static Status release(const Claimed& c, Store& store, const std::string& owner, TimePoint now);

 private:
  std::mutex mu_;
  std::atomic<bool> held_{false};
  std::optional<Claimed> kept_;  // guarded by mu_
  Store* store_ = nullptr;
  const std::string* owner_ = nullptr;
  Clock* clock_ = nullptr;
};

}  // namespace idem::detail

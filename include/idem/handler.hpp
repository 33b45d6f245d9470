// What a handler returns, and the context it runs in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/clock.hpp"
#include "idem/guarantee.hpp"
#include "idem/outbox.hpp"
#include "idem/status.hpp"
#include "idem/store.hpp"

namespace idem {

namespace detail {
class Engine;
struct ContextAccess;
}  // namespace detail

// The result of one handler call. A thrown exception (of any type) counts as fail().
class HandlerResult {
 public:
  enum class Kind { kOk, kFailed, kRetryRequested, kRejected };

  // The effect happened. `result` (optional) is stored and returned to duplicates.
  static HandlerResult ok() { return HandlerResult(Kind::kOk); }
  static HandlerResult ok(std::string result) {
    HandlerResult r(Kind::kOk);
    r.result_ = std::move(result);
    return r;
  }
  // The effect did not happen; retried with exponential backoff, capped.
  static HandlerResult fail(std::string error) {
    HandlerResult r(Kind::kFailed);
    r.error_ = std::move(error);
    return r;
  }
  // A business condition: redeliver no sooner than `delay`. Counts against the cap.
  static HandlerResult retry_after(Duration delay, std::string why = {}) {
    HandlerResult r(Kind::kRetryRequested);
    r.delay_ = delay;
    r.error_ = std::move(why);
    return r;
  }

  // The message can never succeed (malformed for this handler, refused by a business
  // rule): dead-lettered at once with reason handler_rejected, without retries, and
  // recorded like a dead letter so that a redelivery is a duplicate. Under
  // at_most_once too (the message is not dropped silently).
  static HandlerResult reject(std::string why) {
    HandlerResult r(Kind::kRejected);
    r.error_ = std::move(why);
    return r;
  }

  Kind kind() const { return kind_; }
  const std::optional<std::string>& result() const { return result_; }
  const std::string& error() const { return error_; }
  Duration delay() const { return delay_; }

 private:
  friend struct detail::ContextAccess;  // moves the strings out rather than copying them
  explicit HandlerResult(Kind k) : kind_(k) {}
  Kind kind_;
  std::optional<std::string> result_;
  std::string error_;
  Duration delay_{0};
};

// Given to the handler for the duration of one call; not valid after it returns.
// Not thread-safe: use it from the handler's own thread.
class HandlerContext {
 public:
  // A bare context (no lease, no transaction, not manual), e.g. for unit tests of a
  // handler. The middleware makes the real ones.
  HandlerContext() = default;
  HandlerContext(const HandlerContext&) = delete;
  HandlerContext& operator=(const HandlerContext&) = delete;

  // The message id (empty under at_least_once without an id extractor).
  std::string_view id() const { return id_; }
  // 1 on the first attempt, 1 + the recorded retries after failures.
  std::uint32_t attempt() const { return attempt_; }
  Guarantee guarantee() const { return guarantee_; }
  // The entity key and version, when extracted (empty / 0 otherwise).
  std::string_view key() const { return key_; }
  std::uint64_t version() const { return version_; }
  // With a state machine: the event and the transition this call applies (the commit
  // stores `to` as the entity's state). Empty without one.
  std::string_view event() const { return event_; }
  std::string_view from() const { return from_; }
  std::string_view to() const { return to_; }
  // True when the message comes from the reorder buffer rather than from the broker
  // (its delivery was acked as `buffered` earlier).
  bool drained() const { return drained_; }

  // When the lease ends unless extended (effectively_once, manual).
  TimePoint lease_expires_at() const { return lease_until_; }

  // Extends the in-progress lease to now + lease, for long work. Returns
  // kFailedPrecondition if the lease was lost, OK and does nothing under guarantees
  // that keep no lease.
  Status extend_lease(Duration lease);

  // manual only: ack (commit) or nack (release, retry after `delay`, counted against
  // the cap). The last call wins. Under other guarantees the call is ignored and a
  // warning is logged once per consumer.
  void ack();
  void nack(Duration delay = Duration{0});

  // transactional mode only: the open store transaction the handler may write in;
  // null otherwise. Backends offer typed accessors (e.g. idem::sqlite::connection()).
  StoreTransaction* transaction() const { return transaction_; }

  // The transactional outbox (outbox.hpp, docs/outbox.md): records a message to
  // `destination` (a broker URI, e.g. "redis-stream://host:6379/orders") in this
  // handler's transaction, with the dedup record. It is sent after the commit, never
  // before, and never if the handler fails or its commit does not land. Its id is
  // outgoing_id(id(), n) for the n-th call (from 0) of this handler run.
  // Returns kFailedPrecondition when the consumer has no outbox: ConsumerOptions::
  // outbox.publishers unset (Consumer::create refuses it without transactional mode
  // and a store that keeps an outbox, so that misconfiguration fails at build time;
  // the call is where a handler learns that its consumer has none). kInvalidArgument
  // for an empty destination. After any failed call the run counts as a handler
  // failure even if the handler returns ok(): an outgoing message is never dropped
  // silently.
  Status publish(std::string_view destination, std::string payload,
                 std::vector<std::pair<std::string, std::string>> headers = {});

 private:
  friend class detail::Engine;
  friend struct detail::ContextAccess;
  enum class Manual { kNone, kAck, kNack };

  detail::Engine* engine_ = nullptr;
  std::string_view id_;
  std::uint32_t attempt_ = 1;
  Guarantee guarantee_ = Guarantee::kEffectivelyOnce;
  TimePoint lease_until_{};
  StoreTransaction* transaction_ = nullptr;
  std::string_view key_, event_, from_, to_;
  std::uint64_t version_ = 0;
  bool drained_ = false;
  Manual manual_ = Manual::kNone;
  Duration nack_delay_{0};
  std::vector<OutboxEntry>* outbox_ = nullptr;  // set when the consumer has an outbox
  std::string publish_error_;                   // the first failed publish(), if any
};

}  // namespace idem

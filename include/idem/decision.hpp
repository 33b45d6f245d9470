// Decision: what the broker adapter must do with one delivery, and why.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "idem/clock.hpp"

namespace idem {

// What the adapter does with the delivery (docs/design.md §2).
enum class Action {
  kAck,         // ack / commit the offset
  kRetry,       // negative-ack / leave pending; redeliver after Decision::delay
  kDeadLetter,  // publish to the dead-letter destination, then ack
  kHold,        // neither ack nor nack
};

// Why. Every Decision carries exactly one.
enum class Reason {
  kProcessed,          // the handler ran and its effect was committed
  kDuplicate,          // this id was already processed (or dead-lettered)
  kInProgress,         // another delivery of this id holds the lease right now
  kStale,              // the version is not newer than the applied one
  kBuffered,           // held in the durable reorder buffer until the gap fills
  kInvalidTransition,  // the state machine never accepts this event here
  kRetriesExhausted,   // the retry cap was reached
  kHandlerFailed,      // the handler returned an error or threw
  kRetryRequested,     // the handler asked to be called again later
  kPayloadConflict,    // a known id arrived with a different payload
  kBadMessage,         // the message cannot be processed as it is (see detail)
  kStoreUnavailable,   // the store could not be reached or failed
  kLeaseLost,          // the handler ran but another owner took the lease first
  kUnacknowledged,     // manual guarantee: the handler neither acked nor nacked
  kNacked,             // manual guarantee: the handler nacked
  kFailOpen,           // the store was unavailable and fail-open ran the handler anyway
  kReset,              // a watermark reset, not a delivery
  kConcurrentUpdate,   // another consumer changed the entity between read and commit
  kBufferFull,         // the reorder buffer is at a limit; the broker keeps the message
  kTooFarAhead,        // the version is beyond applied + horizon (a likely producer bug)
  kGapTimeout,         // a gap outlived gap_timeout and the gap policy dead-lettered it
  kHandlerRejected,    // the handler said the message can never succeed (HandlerResult::reject)
};

inline constexpr int kReasonCount = static_cast<int>(Reason::kHandlerRejected) + 1;

// Stable snake_case names, used in logs, metrics and the replay output.
std::string_view action_name(Action a);
std::string_view reason_name(Reason r);
// Returns the Reason named `name`, or nullopt.
std::optional<Reason> reason_from_name(std::string_view name);

// A default-constructed Decision holds (kHold, kUnacknowledged): nothing is acked
// unless some step decided so.
struct Decision {
  Action action = Action::kHold;
  Reason reason = Reason::kUnacknowledged;
  Duration delay{0};                  // for kRetry: redeliver no sooner than this
  std::optional<std::string> result;  // the stored result (processed or duplicate)
  std::string detail;                 // human-readable context, empty when obvious
  // kDuplicate only: the id's record is a dead letter ("dead-lettered before"). The
  // runtime forwards such a delivery to the dead-letter destination again instead of
  // acking it, since the store records a dead letter before the broker holds it.
  bool dead_lettered = false;

  static Decision ack(Reason r) { return {Action::kAck, r, Duration{0}, std::nullopt, {}}; }
  static Decision retry(Reason r, Duration delay) { return {Action::kRetry, r, delay, std::nullopt, {}}; }
  static Decision dead_letter(Reason r, std::string detail = {}) {
    return {Action::kDeadLetter, r, Duration{0}, std::nullopt, std::move(detail)};
  }
  static Decision hold(Reason r) { return {Action::kHold, r, Duration{0}, std::nullopt, {}}; }
};

}  // namespace idem

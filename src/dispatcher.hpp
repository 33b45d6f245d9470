// The outbox's dispatcher (docs/design.md §10, docs/outbox.md): sends committed
// outgoing messages through the publishers of ConsumerOptions::outbox and marks them
// sent. Internal to idem::core.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/options.hpp"
#include "idem/outbox.hpp"
#include "idem/store.hpp"
#include "log.hpp"

namespace idem::detail {

// Thread-safe. Publishers are pooled per destination: a thread takes one (opening a
// new one when none is idle), publishes, and gives it back; one that failed is
// dropped, so the next send opens a fresh connection.
class Dispatcher {
 public:
  Dispatcher(const OutboxOptions& o, Duration ttl, Store& store, spdlog::logger* log)
      : o_(o), ttl_(ttl), store_(store), log_(log) {}

  // Sends `entries` (committed, unsent), each destination's in the given order, at
  // most dispatch_batch per publish call. The sent ones are queued to be marked sent
  // by the next flush_marks() (the engine calls it inside its next store
  // transaction, so marking costs no transaction of its own; a crash before it only
  // means a resend, which downstream dedup drops). Entries whose publish failed stay
  // unsent (a later resend sends them). Returns the first error. Logs failures.
  Status send(std::span<const OutboxEntry> entries);

  // Marks the queued sent entries sent, in one outbox_mark_sent at `now` (inside the
  // caller's open store transaction, if any, where the store joins it). On failure
  // they stay unsent: a later resend sends them again. Returns the store's answer.
  Status flush_marks(TimePoint now);

  // Sends the unsent entries of one incoming message (a duplicate's redelivery found
  // its record committed), after flushing the queued marks (so that what was sent
  // already is not sent again). Returns send()'s answer, or the store's error.
  Status send_pending_of(std::string_view incoming_id, TimePoint now);

  // Reads the unsent entries of `incoming_id` (for a batch that sends them later).
  StatusOr<std::vector<OutboxEntry>> pending_of(std::string_view incoming_id);

  // Resends the entries unsent since resend_after or longer, all of them on the first
  // call; does nothing until resend_after has passed since the previous resend. One
  // resend at a time (a concurrent call returns at once). Flushes the queued marks
  // first. Returns how many it sent.
  std::size_t maybe_resend(TimePoint now);

 private:
  // Resends, batch by batch, unsent entries created at or before up_to, until none is
  // left or a batch fails. Returns how many it sent.
  std::size_t resend(TimePoint up_to, TimePoint now);
  // Publishes one destination's messages; appends the sent entries to `sent`.
  Status publish(const std::string& destination, std::span<const OutboxEntry* const> entries,
                 std::vector<OutboxEntry>& sent);
  StatusOr<std::unique_ptr<Publisher>> take(const std::string& destination);
  void give_back(const std::string& destination, std::unique_ptr<Publisher> p);

  const OutboxOptions& o_;
  const Duration ttl_;
  Store& store_;
  spdlog::logger* log_;
  std::mutex pool_mu_;
  std::map<std::string, std::vector<std::unique_ptr<Publisher>>, std::less<>> idle_;
  std::mutex marks_mu_;
  std::vector<OutboxEntry> to_mark_;      // sent, not yet marked sent
  std::mutex resend_mu_;                  // one resend at a time
  std::atomic<bool> resent_once_{false};  // the start-up resend has run
  std::atomic<std::int64_t> next_resend_ns_{0};
};

}  // namespace idem::detail

// ConsumerOptions: every knob of the middleware, each with its unit and default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "idem/clock.hpp"
#include "idem/guarantee.hpp"
#include "idem/ordering.hpp"
#include "idem/outbox.hpp"
#include "idem/store.hpp"

namespace spdlog {
class logger;
}

namespace idem {

class Metrics;
class StateGate;

// Exponential backoff: delay(k) = min(max, initial * multiplier^k) for the k-th retry
// (k = failed attempts before this one, from 0).
struct Backoff {
  Duration initial{1000};   // ms; default 1 s
  double multiplier = 2.0;  // default 2; REQUIRES: >= 1
  Duration max{60'000};     // ms; default 60 s; REQUIRES: >= initial

  Duration delay_for(std::uint32_t retries_so_far) const;
};

// What to do with a known id that arrives with a different payload.
enum class ConflictPolicy {
  kDeadLetter,        // default: dead_letter / payload_conflict (likely a producer bug)
  kTreatAsDuplicate,  // ack / payload_conflict, like a duplicate
};

// What to do when the store cannot be reached.
enum class StoreFailurePolicy {
  kFailClosed,  // default: retry / store_unavailable; never runs the handler unchecked
  kFailOpen,    // run the handler without dedup (logged as an error every time)
};

struct ConsumerOptions {
  Guarantee guarantee = Guarantee::kEffectivelyOnce;  // default effectively_once

  // The dedup store. Required unless guarantee is at_least_once (where it must be
  // null: that guarantee keeps no record).
  std::shared_ptr<Store> store;

  Duration lease{30'000};                // ms; in-progress lease, from handler start; default 30 s
  Duration ttl{7LL * 24 * 3600 * 1000};  // ms; how long a done id is remembered; 7 days
  std::uint32_t max_retries = 5;         // retry decisions per id before dead_letter
  Backoff backoff;                       // for handler failures
  Duration store_retry_delay{1000};      // ms; delay of retry / store_unavailable; 1 s

  std::size_t max_id_bytes = 512;            // longer ids are bad_message; default 512
  std::size_t max_event_bytes = 512;         // longer events are bad_message; default 512
  std::size_t max_payload_bytes = 64 << 20;  // larger payloads are bad_message; 64 MiB
  std::size_t max_result_bytes = 64 * 1024;  // larger results are not stored; 64 KiB

  ConflictPolicy on_conflict = ConflictPolicy::kDeadLetter;
  StoreFailurePolicy on_store_failure = StoreFailurePolicy::kFailClosed;

  // Run the handler inside a store transaction (ctx.transaction()) that also carries
  // the dedup commit: exactly-once effects for writes made through it. Requires a
  // store with capabilities().transactional and effectively_once or manual.
  // process_batch() then runs a whole batch in one transaction where the store has
  // capabilities().batch_transactions (SQLite), a savepoint per message (engine.hpp).
  bool transactional = false;

  // Accept a probabilistic store (e.g. bloom:) under effectively_once or manual; its
  // false-positive rate is then the rate of messages wrongly dropped as duplicates.
  bool allow_probabilistic_store = false;

  // Record the store-call and handler latency histograms (MetricsSnapshot
  // store_latency, handler_latency): two clock reads and three histogram updates per
  // message more. false: the clock is read once before the claim and once after the
  // handler (leases and the commit still see the time); those histograms stay empty.
  // Calls to a store with capabilities().in_process are never timed. Default true.
  bool latency_metrics = true;

  // The broker's ack timeout (ms). When received → finished exceeds it, a warning
  // names the cause (queue wait or handler time). 0 (default): off.
  Duration broker_ack_timeout{0};

  // This consumer's lease-owner name. Empty (default): "<host>-<pid>-<random>".
  std::string owner;

  // Run store->purge_expired(now, purge_batch) after every purge_every commits, so
  // expired records go in small bounded steps (commits that race on several threads
  // may count as one, which delays a purge a little). 0 disables; default every 1000.
  // Keep purge_batch >= purge_every: a store whose records expire as fast as they
  // arrive needs that many removals per step to stay bounded. A purge that removes a
  // whole batch brings the next one forward to an eighth of the interval, until the
  // backlog is gone. Default 1024.
  std::size_t purge_every = 1000;
  std::size_t purge_batch = 1024;

  // Version ordering per entity key (ordering.hpp). Modes other than none and
  // watermark need Extractors::key and ::version, a store with entities, and
  // guarantee effectively_once or manual; strict also needs Extractors::encode and
  // ::decode (buffered messages are stored encoded). Watermark needs ::stream and
  // ::position and works under every guarantee.
  OrderingOptions ordering;

  // A business state machine (state_gate.hpp; e.g. idem::machine_gate(table)). Needs
  // Extractors::key and ::event, a store with entities, and guarantee
  // effectively_once or manual. Null (default): none.
  std::shared_ptr<const StateGate> machine;

  // The transactional outbox (outbox.hpp): HandlerContext::publish, and the
  // dispatcher that sends what handlers published after each commit. Off by default.
  OutboxOptions outbox;

  // Told the fate of every message that leaves the reorder buffer (ordering.hpp).
  // Null: outcomes are only logged and counted.
  BufferListener on_buffered;

  std::shared_ptr<Clock> clock;            // null: the system clock
  std::shared_ptr<spdlog::logger> logger;  // null: silent
  std::shared_ptr<Metrics> metrics;        // null: the consumer keeps its own
};

}  // namespace idem

// Version ordering per entity (docs/design.md §5): the modes, the gap policy, and what the
// consumer reports about messages that leave the reorder buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "idem/clock.hpp"
#include "idem/decision.hpp"
#include "idem/entity.hpp"

namespace idem {

enum class Ordering {
  kNone,       // default: no ordering
  kWatermark,  // per stream, drop positions <= the largest acked one (ordered subscriptions only)
  kMonotonic,  // accept a version only if greater than the applied one; gaps allowed
  kStrict,     // accept only applied + 1; later versions wait in the durable reorder buffer
};

// What happens to a key whose gap (a missing version with later ones buffered) is older
// than OrderingOptions::gap_timeout.
enum class GapPolicy {
  kHold,        // default: keep waiting; the gap's age is reported in the metrics
  kSkip,        // advance past the missing versions to the lowest buffered one (logged, counted)
  kDeadLetter,  // dead-letter the key's buffered messages (reason gap_timeout)
};

// Stable names ("none", "watermark", …; "hold", "skip", "dead_letter") and their parsers.
std::string_view ordering_name(Ordering o);
std::optional<Ordering> ordering_from_name(std::string_view name);
std::string_view gap_policy_name(GapPolicy p);
std::optional<GapPolicy> gap_policy_from_name(std::string_view name);

struct OrderingOptions {
  Ordering mode = Ordering::kNone;
  // strict: the version a key with no record must start at. Default 1; nullopt: the
  // first version that arrives starts the key.
  std::optional<std::uint64_t> first_version = 1;
  // strict and monotonic: a version beyond applied + horizon is dead-lettered as
  // too_far_ahead instead of waiting for a gap that will likely never fill. 0: no
  // limit. Default 100000.
  std::uint64_t horizon = 100'000;
  Duration gap_timeout{60'000};  // ms; default 60 s; REQUIRES: > 0
  GapPolicy gap_policy = GapPolicy::kHold;
  BufferLimits limits;                 // reorder buffer bounds (entity.hpp)
  Duration buffer_full_delay{1000};    // ms; delay of retry / buffer_full; default 1 s
  std::size_t max_key_bytes = 512;     // longer keys are bad_message; default 512
  std::size_t max_stream_bytes = 512;  // watermark: longer stream names are bad_message; 512
  std::size_t drain_per_call = 1000;   // buffered messages run per drain before it yields
                                       // to the next call or tick(); default 1000
  std::size_t gap_report_keys = 10;    // keys whose gap ages the metrics report; default 10
  // strict: where a message dead-lettered from the reorder buffer is published, as a
  // destination URI of outbox.publishers (e.g. an adapter's dead-letter queue). Set:
  // the commit that records the message dead-lettered also writes it to the outbox,
  // so it is sent at least once even if the process dies right after the commit (the
  // outbox resends it); its id is the message's own, with the headers idem-origin
  // (the id), idem-reason, idem-detail, idem-key and idem-version. Needs
  // outbox.publishers. Empty (default): on_buffered alone tells of it, after the
  // commit, and what the listener does with it is lost to a crash between the two.
  std::string dead_letter_to;
};

// A message that left the reorder buffer (drained through the handler, dead-lettered,
// or found stale), or could not leave it yet. Its original delivery was acked (or held)
// as `buffered` long before, so this is the only place its fate is told: an adapter
// publishes `message` to its dead-letter destination on dead_letter, and acks a held
// delivery (non-durable stores) when action is ack.
struct BufferedOutcome {
  std::string key;
  std::uint64_t version = 0;
  std::string id;
  std::string message;  // the encoded message, as buffered
  Decision decision;    // processed, stale, duplicate, retries_exhausted, gap_timeout, …
  // Set for processed: the transition applied, when a state machine is on.
  std::optional<std::string> from, to;
};

// Called on the thread that drained or dead-lettered, after the store commit. Must not
// call back into the consumer.
using BufferListener = std::function<void(const BufferedOutcome&)>;

}  // namespace idem

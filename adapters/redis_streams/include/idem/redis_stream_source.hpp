// idem::redis_streams — a Redis Streams consumer group as a MessageSource, and a
// publisher for the same stream (docs/adapters.md).
//
// The four decisions on Redis Streams:
//   ack          XACK (collected and sent as one XACK before the next fetch)
//   retry(d)     the entry stays pending; after d this consumer takes it again with
//                XCLAIM (its delivery count grows). If this consumer dies first, any
//                consumer of the group claims it once it has been idle for `lease`.
//   dead_letter  XADD <stream>:dlq body reason detail id, then XACK, in one script
//                (atomic; a failed XADD leaves the entry pending, never acked)
//   hold         nothing: the entry stays pending until claimed after `lease`
// Entries pending on any consumer of the group for longer than `lease` (a consumer
// that died, or was stopped) are claimed with XAUTOCLAIM, so nothing is left behind.
// While a delivery is in flight here, keep_alive() claims it again every third of the
// lease (XCLAIM … JUSTID), so a handler slower than the lease keeps its entry.
// The delivery count comes from the group's pending entries list.
//
// Standalone Redis (5.0 or later; XAUTOCLAIM needs 6.2): the stream and its dead-letter
// stream are written in one transaction, which Redis Cluster allows only when both
// names hash to one slot (give them a hash tag, e.g. "{orders}").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "idem/backend/tls_options.hpp"
#include "idem/clock.hpp"
#include "idem/publisher.hpp"
#include "idem/source.hpp"
#include "idem/status.hpp"

namespace spdlog {
class logger;
}

namespace idem::redis_streams {

struct Options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  int db = 0;                      // SELECT; default 0
  std::string user;                // ACL user; empty: the default user
  std::string password;            // AUTH; empty: none. Never logged or printed.
  // TLS (tls_options.hpp: the server's certificate and name verified unless
  // tls.insecure); default: plaintext.
  TlsOptions tls;
  std::string stream;              // REQUIRED: the stream key
  std::string group;               // REQUIRED: the consumer group; created at the stream's start if absent
  std::string consumer;            // this consumer's name; empty (default): "<host>-<pid>-<random>"
  std::string dead_letter_stream;  // empty (default): "<stream>:dlq"
  // ms; an entry pending for longer than this on any consumer is claimed (the broker
  // side of idem's lease: use the consumer's lease). Default 30 s.
  Duration lease{30'000};
  Duration claim_every{1000};      // ms; how often XAUTOCLAIM looks for such entries; 1 s
  Duration connect_timeout{2000};  // ms; default 2 s
  Duration command_timeout{5000};  // ms; beyond a fetch's own block time; default 5 s

  std::shared_ptr<Clock> clock;            // null: the system clock
  std::shared_ptr<spdlog::logger> logger;  // null: silent
};

// Parses "redis-stream://[[USER:]PASSWORD@]HOST:PORT/STREAM?group=G[&consumer=NAME]
// [&db=N][&dlq=NAME][&connect_timeout_ms=N][&claim_every_ms=N]" (the group may be
// left out for a Publisher), with TLS for rediss-stream:// or any tls_* parameter.
// Errors (kInvalidArgument) never contain
// the password.
StatusOr<Options> parse_uri(std::string_view uri);

// Connects (AUTH, SELECT) and creates the group if absent (XGROUP CREATE … 0
// MKSTREAM: entries published before the first consumer ran are consumed). Errors:
// kInvalidArgument for missing options, kUnavailable when the server cannot be reached
// within connect_timeout, kFailedPrecondition when it refuses (AUTH, WRONGTYPE).
StatusOr<std::unique_ptr<MessageSource>> open(Options options);

// A publisher that appends each message to the stream as one entry: the field `body`,
// then `id` when the message has one, then each header as a field of its own. XADDs
// are pipelined; publish() returns after the server has answered all of them.
// Connects as open() does (the group is not needed and not created).
StatusOr<std::unique_ptr<Publisher>> open_publisher(const Options& options);

// Deletes the stream and its dead-letter stream, with every entry and consumer group
// in them. A stream that does not exist counts as deleted. `idem bench --source`
// removes the streams it made with it.
Status remove(const Options& options);

}  // namespace idem::redis_streams

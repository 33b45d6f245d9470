// MessageSource: what the consumer runtime (runtime.hpp) needs from a broker
// connection. One source object per broker connection; the runtime calls it from one
// thread only (its loop thread), so a source need not be thread-safe.
//
// An adapter maps the four decisions of idem onto its broker's own mechanisms
// (docs/adapters.md has the mapping for Redis Streams, Kafka, Pulsar, RabbitMQ, NATS
// JetStream and SQS):
//
//   ack          the broker forgets the delivery (XACK, basic.ack, offset commit, Ack)
//   retry(d)     the broker delivers it again no sooner than d (nack with delay)
//   dead_letter  publish to the dead-letter destination, then ack
//   hold         neither: it comes again later, when the broker redelivers it on its
//                own terms (lease, ack timeout) or the source hands it out again
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/clock.hpp"
#include "idem/status.hpp"

namespace idem {

// One delivery as the broker handed it over. Owned by the runtime from fetch() until
// its decision has been applied.
struct Delivery {
  std::string body;                  // the message bytes
  std::string broker_id;             // the broker's id of this delivery (entry id, offset, tag), for logs
  std::string partition;             // the ordered stream it came from (partition, stream, queue); may be empty
  std::uint64_t position = 0;        // its place in `partition`, increasing; 0 when the source gives none
  std::string key;                   // the broker's message key, when it has one
  std::uint32_t delivery_count = 0;  // the broker's count, from 1; 0 when the broker keeps none
  TimePoint received_at{};           // when the client received it
  std::uint64_t handle = 0;          // the source's own handle (a tag, an index); opaque to the runtime
  std::vector<std::pair<std::string, std::string>> headers;  // broker headers, when it has any
};

// Told by a source when the broker moves partitions to or from this consumer
// (Kafka-style group rebalances). Called from inside fetch(), on the loop thread.
class AssignmentListener {
 public:
  virtual ~AssignmentListener() = default;
  virtual void on_assigned(std::span<const std::string> partitions) = 0;
  // Returns once every delivery of `partitions` the runtime holds has had its
  // decision applied (or was held), so the source may hand the partitions over.
  virtual void on_revoked(std::span<const std::string> partitions) = 0;
};

class MessageSource {
 public:
  virtual ~MessageSource() = default;

  // Appends to `out` up to `max` deliveries, blocking up to `timeout` for the first
  // one. Returns OK with nothing appended when none came in time; kUnavailable when
  // the broker cannot be reached (the runtime backs off and calls again; a source
  // reconnects by itself on a later call).
  virtual Status fetch(std::size_t max, Duration timeout, std::vector<Delivery>& out) = 0;

  // The four decisions. Each returns a failure of the broker call; the runtime logs
  // and counts it and moves on (the delivery then stays with the broker, which
  // redelivers it, and idem's store makes that copy a duplicate). A source may defer
  // what ack, retry and dead_letter send (acks collected into one command or one
  // transaction) until flush(), or send it earlier on its own (e.g. once enough waits).
  virtual Status ack(const Delivery& d) = 0;
  virtual Status retry(const Delivery& d, Duration delay) = 0;
  // Publishes d with the reason and detail to the dead-letter destination, then acks
  // d (atomically where the broker allows it).
  virtual Status dead_letter(const Delivery& d, std::string_view reason, std::string_view detail) = 0;
  // Leaves d to the broker, which delivers it again on its own terms (a lease, an ack
  // timeout, the channel's close). A source whose broker never would while this
  // consumer runs (Kafka within one assignment) hands it out again itself. Default:
  // nothing.
  virtual void hold(const Delivery& d) { (void)d; }

  // Sends every settlement deferred so far. The runtime calls it, when it has applied
  // decisions since the last call, before a fetch() that may wait or that follows an
  // empty one, once as many decisions wait as deliveries may be in flight, before
  // drained(), when partitions are revoked and before run() returns. A failure counts
  // as a failed action (RuntimeMetrics::kActionFailures); what was not sent stays deferred and
  // goes with the next flush, or comes back from the broker as a redelivery if the
  // connection is lost. Neither fetch() nor drained() sends deferred acks; a broker
  // whose consumer commits a position rather than acking each delivery may commit it
  // on its own schedule (the Kafka source's offsets, every 100 ms). Default: OK
  // (nothing deferred).
  virtual Status flush() { return ok_status(); }

  // Tells the broker that the deliveries this source handed out and that have no
  // decision yet are still being worked on, for brokers that redeliver after an ack
  // timeout (JetStream's InProgress). The runtime calls it on its loop thread at every
  // step while deliveries are in flight (at least every fetch_timeout), including
  // while it waits for running handlers at shutdown; a source decides itself which
  // deliveries are due, and the call must be cheap when none is. Default: nothing.
  virtual void keep_alive() {}

  // Returns true iff the broker holds nothing for this consumer group that could
  // still come to this consumer: no pending delivery to claim or retry. Used by the
  // runtime's idle exit. Default: true (a source that cannot tell).
  virtual StatusOr<bool> drained() { return true; }

  // Sets who is told of partition changes (null: nobody). Default: ignored, for
  // brokers without partition assignment.
  virtual void set_assignment_listener(AssignmentListener* listener) { (void)listener; }

  // A one-line description for logs, without secrets (e.g. "redis-stream orders/g1").
  virtual std::string describe() const = 0;

  // Releases the connection. Deliveries not decided stay with the broker.
  virtual void close() = 0;
};

}  // namespace idem

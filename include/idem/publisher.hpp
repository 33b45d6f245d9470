// Publisher: what idem needs to send messages to a broker — `idem publish`, the
// outbox's dispatcher (docs/design.md §10) and the tests. Each broker adapter has one
// (redis_stream_source.hpp, …); its URI is the adapter's source URI, whose consumer
// parameters (group, durable, …) a publisher ignores.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "idem/status.hpp"

namespace idem {

// One message to send.
struct OutgoingMessage {
  // The message's id, or empty. A publisher puts it where its broker's own
  // deduplication looks (JetStream's Nats-Msg-Id, an AMQP message-id, a Kafka key
  // header, a stream field `id`), so a resent copy can be recognised downstream.
  std::string id;
  std::string body;                                          // the bytes, unchanged
  std::vector<std::pair<std::string, std::string>> headers;  // sent as the broker's headers, where it has any
  // The message's key, or empty. Sent where the broker routes by key (Pulsar's message
  // key, which Key_Shared subscriptions keep on one consumer); ignored by the others.
  std::string key;
};

// Not thread-safe: one publisher per thread.
class Publisher {
 public:
  virtual ~Publisher() = default;

  // Sends every message, in order, and returns once the broker has accepted all of
  // them (an acknowledgement, a confirm, a server reply). On an error some of them
  // may have been sent: the caller sends them again, and downstream deduplication by
  // id drops the copies.
  virtual Status publish(std::span<const OutgoingMessage> messages) = 0;
};

}  // namespace idem

// idem::pulsar — a Pulsar subscription as a MessageSource, and a publisher for the
// same topic, over Pulsar's WebSocket API (docs/adapters.md, Pulsar).
//
// The consumer is the broker's WebSocket consumer endpoint in pull mode: fetch() asks
// for exactly what it may return (permits), and the broker-side receiver queue is
// small, so no message waits unseen behind the runtime's bound while an ack timeout
// runs. A new subscription starts at the earliest message. The four decisions:
//   ack          an individual acknowledgement of the message id
//   retry(d)     a negative acknowledgement: the broker redelivers after the
//                consumer's nack delay (`nack_delay`), to any consumer of the
//                subscription, with its redelivery count one higher. A longer d on a
//                Shared or Key_Shared subscription: the message is published again to
//                the topic with deliverAfterMs = d and the properties idem-origin (its
//                first message id) and idem-deliveries, then acked. Failover and
//                Exclusive subscriptions do not delay messages, so there d is at most
//                the nack delay.
//   dead_letter  published to the dead-letter topic (default "<topic>-DLQ") with the
//                properties idem-reason, idem-detail and idem-origin, the broker's
//                receipt awaited, then acked. A crash between the two leaves it there
//                twice with one idem-origin, never zero times.
//   hold         nothing: the broker redelivers it when this consumer disconnects, or
//                once `ack_timeout` has passed when one is set
// Delivery: broker_id "ledger:entry[:batch]", partition the topic, position the
// message id packed so that it orders the topic's messages (docs/adapters.md), key
// the message key, delivery_count the broker's redelivery count + 1, headers the
// message properties. A copy of a message this consumer still holds (an ack timeout
// passed while it waited) is not handed out twice.
// After the broker goes away the source connects again at the next fetch() (which
// returns kUnavailable while it cannot).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "idem/clock.hpp"
#include "idem/publisher.hpp"
#include "idem/source.hpp"
#include "idem/backend/tls_options.hpp"
#include "idem/status.hpp"

namespace spdlog {
class logger;
}

namespace idem::pulsar {

enum class SubscriptionType { kShared, kKeyShared, kFailover, kExclusive };

struct Options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;  // the broker's (or WebSocket proxy's) web service port
  std::string tenant = "public";
  std::string name_space = "default";
  std::string topic;          // REQUIRED: a persistent topic's local name
  std::string subscription;   // REQUIRED for a source
  // Shared (default): every consumer of the subscription takes messages, as a group
  // does on the other brokers. Key_Shared keeps each key on one consumer; Failover and
  // Exclusive keep the topic's order on one consumer.
  SubscriptionType type = SubscriptionType::kShared;
  std::string dead_letter_topic;  // empty (default): "<topic>-DLQ"
  std::string token;              // sent as a bearer token when not empty. Never logged or printed.
  // TLS to the web service port (tls_options.hpp: the certificate and the host name or
  // IP address verified unless tls.insecure); default: plaintext.
  TlsOptions tls;
  // The consumer's ackTimeout: a message not acked this long after the consumer
  // received it is redelivered. 0 (default): none; messages return when the consumer
  // disconnects.
  Duration ack_timeout{0};
  Duration nack_delay{1000};  // ms; how long after a negative ack the broker redelivers. Default 1 s
  // The broker-side receiver queue of the WebSocket consumer. Default 100.
  std::uint32_t receiver_queue = 100;
  Duration connect_timeout{5000};  // ms; default 5 s
  Duration request_timeout{10000}; // ms; publishes and admin calls; default 10 s

  std::shared_ptr<Clock> clock;            // null: the system clock
  std::shared_ptr<spdlog::logger> logger;  // null: silent
};

// Parses "pulsar-ws://HOST:PORT/TENANT/NAMESPACE/TOPIC?subscription=S[&type=shared|
// key_shared|failover|exclusive][&dlq=TOPIC][&token=T][&ack_timeout_ms=N]
// [&nack_delay_ms=N][&receiver_queue=N][&connect_timeout_ms=N]" (the subscription may
// be left out for a Publisher); "pulsar-wss://…", or any tls_* parameter, over TLS.
// Errors (kInvalidArgument) never contain the token.
StatusOr<Options> parse_uri(std::string_view uri);

// Connects the consumer (creating the subscription at the earliest message if absent).
// Errors: kInvalidArgument for missing or unusable options, kUnavailable when the
// broker cannot be reached within connect_timeout, kFailedPrecondition when it
// refuses (authentication, an unknown namespace, an Exclusive subscription in use).
StatusOr<std::unique_ptr<MessageSource>> open(Options options);

// A publisher to the topic: each message's body is the payload, its headers the
// message properties, OutgoingMessage::id the property "idem-id" and
// OutgoingMessage::key the message key (which Key_Shared subscriptions route by).
// publish() returns once the broker has acknowledged every message.
StatusOr<std::unique_ptr<Publisher>> open_publisher(const Options& options);

// Deletes the topic and its dead-letter topic (the admin REST API, forced: with their
// messages and subscriptions). A topic that does not exist counts as deleted. `idem
// bench --source` removes the topics it made with it.
Status remove(const Options& options);

}  // namespace idem::pulsar

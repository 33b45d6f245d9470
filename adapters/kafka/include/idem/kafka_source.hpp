// idem::kafka — a Kafka consumer group as a MessageSource, and a publisher for the
// same topic (librdkafka; docs/adapters.md, Kafka).
//
// The consumer joins `group` with enable.auto.commit=false and
// auto.offset.reset=earliest (messages published before the first consumer ran are
// consumed), subscribed to `topic` and to its retry topic. The four decisions:
//   ack          the offset is marked decided in its partition's offset tracker; the
//                contiguous decided prefix is committed (asynchronously, at the next
//                fetch; synchronously on revoke and close)
//   retry(d)     Kafka cannot redeliver one message: it is produced to the retry topic
//                (default "<topic>.retry") with the header idem-due-ms (Unix ms when it
//                is due), the delivery report awaited, then the original is marked
//                decided. The same group reads the retry topic; a message that is not
//                due yet is held inside the source (its offset undecided, so not
//                committed) and handed out once due.
//   dead_letter  produced to the dead-letter topic (default "<topic>.dlq") with the
//                headers idem-reason, idem-detail and idem-origin ("topic/partition@
//                offset" of its first delivery), keyed by the origin, the delivery
//                report awaited, then marked decided. A crash before the offset is
//                committed (it waits for every lower offset's decision) makes the
//                redelivered message a dead letter again: copies share their key, so
//                a compacted dead-letter topic, or its reader, keeps one per origin.
//   hold         nothing is marked: the partition's committed offset stays below it,
//                so the next owner of the partition (after a restart or rebalance)
//                reads it and everything after it again (idem's store answers those
//                as duplicates)
// Rebalance: before partitions are given up, the runtime is told (on_revoked), which
// returns once every delivery of them is settled; their prefix is then committed
// synchronously. A member killed without leaving holds its partitions until its
// session times out (`session_timeout`).
// Delivery count: Kafka keeps none; Delivery::delivery_count is 0 (idem's store
// counts attempts). Delivery::partition is "topic/partition", broker_id
// "topic/partition@offset".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/clock.hpp"
#include "idem/publisher.hpp"
#include "idem/source.hpp"
#include "idem/status.hpp"

namespace spdlog {
class logger;
}

namespace idem::kafka {

struct Options {
  std::vector<std::string> brokers;  // REQUIRED: bootstrap "HOST:PORT"s
  std::string topic;                 // REQUIRED: the topic to consume or publish to
  std::string group;                 // REQUIRED for a source: the consumer group (group.id)
  std::string retry_topic;           // empty (default): "<topic>.retry"
  std::string dead_letter_topic;     // empty (default): "<topic>.dlq"
  // Partitions of each topic the adapter creates when absent (topic, retry and
  // dead-letter topic; CreateTopics). A broker without CreateTopics that creates topics
  // on first use applies its own defaults instead. Existing topics are left as they
  // are. Default 1.
  int partitions = 1;
  // Replicas of each partition of the topics the adapter creates; -1 (default): the
  // broker's default.replication.factor. Give 3 on a cluster that must survive the
  // loss of a broker (a topic with one replica has nothing to fail over to).
  int replication_factor = -1;
  // librdkafka properties (name, value) set on every client the adapter makes, the
  // consumer and the producers, after its own: security.protocol, sasl.*, ssl.* and
  // any other (https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md).
  // A property librdkafka refuses fails open() with librdkafka's own message.
  std::vector<std::pair<std::string, std::string>> properties;
  // ms; session.timeout.ms: how long a member that stopped heartbeating (killed) keeps
  // its partitions. Default 10 s (the broker's group.min.session.timeout.ms applies).
  Duration session_timeout{10'000};
  Duration connect_timeout{5'000};   // ms; open() fails when no broker answered by then; 5 s
  Duration command_timeout{10'000};  // ms; how long a produce waits for its delivery report; 10 s
  // Retry-topic messages held in the source until due, at the most; beyond it the
  // retry topic's partitions are paused until half have been handed out. 10,000.
  std::size_t max_waiting = 10'000;

  std::shared_ptr<Clock> clock;            // null: the system clock (due times are wall-clock)
  std::shared_ptr<spdlog::logger> logger;  // null: silent (librdkafka's own log included)
};

// Parses "kafka://HOST:PORT[,HOST:PORT…]/TOPIC?group=G[&retry_topic=NAME][&dlq=NAME]
// [&partitions=N][&replication_factor=N][&session_timeout_ms=N][&connect_timeout_ms=N]
// [&security_protocol=P][&sasl_mechanism=M][&sasl_username=U][&sasl_password=S]
// [&tls=1][&tls_ca=PATH][&tls_cert=PATH&tls_key=PATH][&tls_key_password=S][&tls_insecure=1]
// [&rdkafka.NAME=VALUE…]" (the group may be left out for a Publisher) into
// Options::properties: sasl.mechanisms, sasl.username, sasl.password; the TLS
// parameters (idem/backend/tls_options.hpp) as ssl.ca.location, ssl.certificate.location,
// ssl.key.location, ssl.key.password, with the certificate and the host name checked
// (enable.ssl.certificate.verification, ssl.endpoint.identification.algorithm=https)
// unless tls_insecure=1; security.protocol as given, or else from the others: SSL with
// TLS, SASL_PLAINTEXT with a SASL mechanism, SASL_SSL with both (one given that
// disagrees with them is refused); then each "rdkafka.NAME" as NAME, last, so it
// overrides. Values are percent-decoded. redact_uri() hides the value of every
// parameter whose name holds "password", "secret" or "token" (secret_name()). Errors
// are kInvalidArgument.
StatusOr<Options> parse_uri(std::string_view uri);

// Checks that a broker answers within connect_timeout, creates the topic, retry and
// dead-letter topics if absent, and subscribes to the topic and its retry topic.
// Errors: kInvalidArgument for missing options, kUnavailable when no broker answered
// in time, kFailedPrecondition when a topic is still absent after CreateTopics or the
// subscription is refused.
StatusOr<std::unique_ptr<MessageSource>> open(Options options);

// A publisher to `topic`, idempotent (enable.idempotence: acks=all, and a retried
// produce is not written twice). Each message's body is the Kafka value, its
// headers the Kafka headers; OutgoingMessage::id, when not empty, is sent as the
// header "idem-id" (the Kafka key is left empty: it chooses the partition, and a
// message id spreads one entity's messages over partitions just as no key does).
// publish() returns once every message's delivery report has come (or
// command_timeout has passed). Creates the topic if absent, as open() does.
StatusOr<std::unique_ptr<Publisher>> open_publisher(const Options& options);

// Deletes the topic, its retry topic and its dead-letter topic, with every message in
// them (the group's committed offsets go with them). A topic that does not exist
// counts as deleted. `idem bench --source` removes the topics it made with it.
Status remove(const Options& options);

}  // namespace idem::kafka

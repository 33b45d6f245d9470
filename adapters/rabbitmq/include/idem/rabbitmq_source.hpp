// idem::rabbitmq — a RabbitMQ queue as a MessageSource, and a publisher for the same
// queue (rabbitmq-c, AMQP 0-9-1; docs/adapters.md).
//
// The source consumes with manual acks on one channel in transaction mode (tx.select),
// with basic.qos prefetch = the first fetch's `max` (what the runtime can start soon).
// The four decisions on RabbitMQ:
//   ack          basic.ack
//   retry(0)     basic.nack with requeue
//   retry(d>0)   basic.publish to the retry queue of d's bucket with a per-message TTL
//                of d (expiration), then basic.ack. Buckets are powers of two from
//                kMinRetryBucket to kMaxRetryBucket (d rounded up; longer delays go to
//                the last bucket); each retry queue dead-letters expired messages through
//                the default exchange back to the work queue. A message comes back no
//                sooner than d and, behind a longer-lived head of its bucket, at most
//                about 2d later.
//   dead_letter  basic.publish to the dead-letter queue with headers `reason` and
//                `detail`, then basic.ack
//   hold         nothing: the message stays unacknowledged until this source's channel
//                closes (close(), a crash, a lost connection); then the broker requeues it
// Acks wait for the commit, where those below the lowest delivery still unsettled go
// as one basic.ack (multiple). Acks and nacks are committed (tx.commit) when a fetch
// would wait for the broker, once 256 are waiting, in drained() and in close();
// retry(d>0) and dead_letter commit at once, so their publish and their ack take
// effect together or not at all — a consumer killed before the commit leaves the
// message unacknowledged and the broker redelivers it; nothing was published.
// The delivery count: the quorum queue header `x-delivery-count` + 1 when present, else
// 2 when the `redelivered` flag is set (at least the second delivery), else 1.
//
// Queues declared when absent: the work queue (durable; `queue_type`), the dead-letter
// queue and the retry queues (durable, classic). An existing work queue is used as it is.
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

namespace idem::rabbitmq {

inline constexpr Duration kMinRetryBucket{128};      // ms; the shortest retry queue's delays
inline constexpr Duration kMaxRetryBucket{4194304};  // ms (about 70 min); the longest

struct Options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 5672;
  std::string vhost = "/";
  std::string user = "guest";
  std::string password = "guest";  // never logged or printed
  std::string queue;               // REQUIRED: the work queue
  // How the work queue is declared when absent: "classic" (default) or "quorum".
  std::string queue_type = "classic";
  std::string dead_letter_queue;  // empty (default): "<queue>.dlq"
  // basic.qos prefetch count; 0 (default): the `max` of the first fetch (at most 65535).
  std::uint16_t prefetch = 0;
  TlsOptions tls;                  // idem/backend/tls_options.hpp; on for amqps://
  // SASL EXTERNAL instead of PLAIN: the broker takes the user from the client
  // certificate (tls.cert_file, required) and no password is sent. The broker needs
  // its rabbitmq_auth_mechanism_ssl plugin and EXTERNAL among its auth_mechanisms.
  bool external_auth = false;
  Duration connect_timeout{2000};  // ms; TCP connect, TLS handshake and login; default 2 s
  Duration command_timeout{5000};  // ms; each request the broker answers; default 5 s

  std::shared_ptr<Clock> clock;            // null: the system clock
  std::shared_ptr<spdlog::logger> logger;  // null: silent
};

// Parses "amqp://[USER[:PASSWORD]@]HOST[:PORT][/VHOST]?queue=Q[&queue_type=classic|quorum]
// [&dlq=NAME][&prefetch=N][&connect_timeout_ms=N][&password_file=PATH]", or the same
// with "amqps://" for TLS (the parameters of tls_options.hpp; the server's certificate
// verified against the CA or the system's trust store and the host, a DNS name or an
// IP address); "&sasl_mechanism=EXTERNAL" logs in by the client certificate (with
// tls_cert, and no user or password in the URI). USER, PASSWORD and VHOST are
// percent-decoded ("%2F" is the default vhost "/", also taken when VHOST is absent or
// empty); the port defaults to 5672, 5671 over TLS; the queue is required. Errors
// (kInvalidArgument) never contain the password.
StatusOr<Options> parse_uri(std::string_view uri);

// Connects, logs in, declares the queues when absent. Consuming starts at the first
// fetch (its `max` sets the prefetch). A lost connection is opened again by the next
// call (the runtime backs off between failed fetches); deliveries fetched on the old
// connection have been requeued by the broker, and their decisions fail with
// kUnavailable. Errors: kInvalidArgument for missing or bad options, kUnavailable when
// the broker cannot be reached within connect_timeout, kFailedPrecondition when it
// refuses (login, vhost access, a queue declared with other arguments).
StatusOr<std::unique_ptr<MessageSource>> open(Options options);

// A publisher to the work queue through the default exchange, with publisher confirms:
// publish() returns once the broker has confirmed every message. Each message is
// persistent, its id the AMQP message-id, its headers the AMQP headers. Connects and
// declares the work queue as open() does.
StatusOr<std::unique_ptr<Publisher>> open_publisher(const Options& options);

// Deletes the work queue, its dead-letter queue and its retry queues, with every
// message in them. A queue that does not exist counts as deleted. `idem bench
// --source` removes the queues it made with it.
Status remove(const Options& options);

}  // namespace idem::rabbitmq

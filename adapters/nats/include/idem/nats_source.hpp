// idem::nats — a NATS JetStream durable pull consumer as a MessageSource, and a
// publisher for the same stream (docs/adapters.md).
//
// Deliveries come from pull requests to the durable (one open at a time, a batch of
// at most what fetch() may return), answered on this source's own inbox.
// The four decisions on JetStream (the consumer's AckPolicy is explicit), each sent to
// the delivery's reply subject:
//   ack          +ACK
//   retry(d)     -NAK with delay d: the server delivers it again after d, to any
//                instance of the durable, with NumDelivered one higher
//   dead_letter  publish the body to the dead-letter subject with the headers
//                Idem-Reason, Idem-Detail, Idem-Stream-Seq, and Nats-Msg-Id
//                "<stream>:<stream sequence>" (so a second copy after a crash between
//                the two steps is dropped by the dead-letter stream's duplicate
//                window), wait for the server's acknowledgement, then +TERM
//   hold         nothing: the server redelivers it once AckWait has passed
// AckWait is the lease: a consumer that dies leaves its deliveries to the other
// instances of the durable (or to its restart) once AckWait has passed. While a
// delivery is undecided in this runtime, keep_alive() sends +WPI (in progress) every
// AckWait / 3, so a slow handler or a long backlog does not make the server hand the
// delivery to another consumer while this one still works on it.
// The delivery count is the message metadata's NumDelivered.
//
// open() declares what it consumes if absent: the stream (file storage, the subject
// as its only subject), the dead-letter stream "<stream>_DLQ" capturing the dead-letter
// subject, and the durable consumer (deliver all, explicit ack, AckWait = lease,
// MaxAckPending = max_ack_pending). An existing durable whose AckWait or MaxAckPending
// differ is updated to these values, and all of them are declared again when the
// server answers a pull request as if the durable were gone. Reconnects are nats.c's,
// with a backoff that doubles from 50 ms up to 2 s, without limit; meanwhile fetch()
// returns kUnavailable.
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

namespace idem::nats {

struct Options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 4222;
  std::string user;      // empty: no user/password authentication
  std::string password;  // with user. Never logged or printed.
  std::string token;     // an authentication token; empty: none. Never logged or printed.
  // An NKey user: its public key ("U…") and the file holding its seed, which nats.c
  // reads to sign the server's nonce (the seed never passes through idem).
  std::string nkey;
  std::string nkey_seed_file;
  // A credentials file (a user JWT and its seed, as `nsc` writes it) for a server in
  // operator mode; read by nats.c.
  std::string credentials_file;
  TlsOptions tls;        // idem/backend/tls_options.hpp
  std::string stream;    // REQUIRED: the JetStream stream
  std::string durable;   // REQUIRED for open(): the durable consumer's name (no '.', '*', '>')
  // The subject: the consumer's filter and where the publisher publishes. Empty
  // (default): the stream's name. A subject with wildcards needs dead_letter_subject.
  std::string subject;
  std::string dead_letter_subject;  // empty (default): "<subject>.dlq"
  std::string dead_letter_stream;   // empty (default): "<stream>_DLQ"
  // ms; the consumer's AckWait, the broker side of idem's lease: use the consumer's
  // lease. Default 30 s. Must be at least 100 ms.
  Duration lease{30'000};
  // The durable's MaxAckPending: deliveries handed out and not yet decided, over all its
  // instances (retries waiting for their delay count too). Default 20000. The server
  // stops delivering to the durable when it is reached.
  std::int64_t max_ack_pending = 20'000;
  Duration connect_timeout{2000};  // ms; default 2 s
  Duration request_timeout{5000};  // ms; JetStream API calls and publish acknowledgements; default 5 s

  std::shared_ptr<Clock> clock;            // null: the system clock
  std::shared_ptr<spdlog::logger> logger;  // null: silent
};

// Parses "nats://[USER:PASSWORD@]HOST:PORT?stream=S[&durable=D][&subject=SUBJ]
// [&dlq=SUBJECT][&dlq_stream=NAME][&max_ack_pending=N][&connect_timeout_ms=N]
// [&token=T][&nkey=PUBLIC&nkey_seed_file=PATH][&creds=PATH][&tls…]" (the durable may
// be left out for a Publisher); "tls://" is nats:// with TLS. The password and the
// token may be given by file or environment (password_file=, token_env=, …), the TLS
// parameters are tls_options.hpp's. At most one of a password, a token, an NKey and
// a credentials file. Errors (kInvalidArgument) never contain a secret.
StatusOr<Options> parse_uri(std::string_view uri);

// Connects and declares the streams and the durable consumer as described above, then
// binds a pull subscription to the durable. Errors: kInvalidArgument for missing or
// unusable options, kUnavailable when the server cannot be reached within
// connect_timeout (nothing is retried here), kFailedPrecondition when it refuses
// (authentication, JetStream disabled, a stream that does not hold the subject).
StatusOr<std::unique_ptr<MessageSource>> open(Options options);

// A publisher that publishes each message to the subject with its headers, and
// Nats-Msg-Id = OutgoingMessage::id when that is not empty (JetStream's duplicate
// window then drops a resent copy). Publishes are asynchronous; publish() returns once
// the server has acknowledged all of them. Connects as open() does and declares the
// stream if absent (the durable is not needed and not created).
StatusOr<std::unique_ptr<Publisher>> open_publisher(const Options& options);

// Deletes the stream and its dead-letter stream, with every message and consumer in
// them. A stream that does not exist counts as deleted. `idem bench --source` removes
// the streams it made with it.
Status remove(const Options& options);

}  // namespace idem::nats

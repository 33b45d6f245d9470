// One nats.c connection and its JetStream context, shared by the NATS source and
// publisher: connect (with nats.c's reconnects and our backoff), declare streams and
// the durable consumer, and turn nats.c errors into Status. Not thread-safe.
#pragma once

#include <nats/nats.h>

#include <memory>
#include <string>
#include <string_view>

#include "idem/nats_source.hpp"

namespace idem::nats::detail {

// The error of nats.c's call `what`: kUnavailable when the server cannot be reached or
// did not answer in time, kFailedPrecondition when it refused. `code` is JetStream's
// error code, when the call has one. The text names the call, nats.c's status text and
// its last error; nats.c never sees the password in a URL, so none is echoed.
Status from_nats(natsStatus s, std::string_view what, jsErrCode code = static_cast<jsErrCode>(0));

class Connection {
 public:
  // Connects within o.connect_timeout (no retry of the first connection) and opens
  // the JetStream context: async publishes at most `max_pending_publishes` at once (a
  // publish beyond waits up to o.request_timeout for acknowledgements), their failures
  // told to `on_error` (called on a nats.c thread with `closure`).
  static StatusOr<std::unique_ptr<Connection>> open(const Options& o, std::int64_t max_pending_publishes = 4096,
                                                    jsPubAckErrHandler on_error = nullptr, void* closure = nullptr);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  natsConnection* nc() const { return nc_; }
  jsCtx* js() const { return js_; }
  // True while the connection is up (not reconnecting).
  bool connected() const;
  // "HOST:PORT", for messages.
  const std::string& where() const { return where_; }

  // Creates stream `name` with `subject` as its only subject (file storage) unless a
  // stream of that name exists; an existing stream is left as it is.
  Status declare_stream(const std::string& name, const std::string& subject) const;
  // Creates the durable pull consumer of o (deliver all, explicit ack, AckWait = lease,
  // MaxAckPending, filter = subject) or updates an existing one whose AckWait or
  // MaxAckPending differ.
  Status declare_consumer(const Options& o) const;
  // Deletes stream `name` with its messages and consumers; a stream that does not
  // exist counts as deleted.
  Status remove_stream(const std::string& name) const;

 private:
  Connection() = default;

  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
  std::string where_;
};

}  // namespace idem::nats::detail

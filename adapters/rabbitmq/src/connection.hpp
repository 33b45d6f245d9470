// One rabbitmq-c connection of the RabbitMQ adapter with its one channel: connect,
// login, queue declarations, publishes, and errors turned into Status. Not thread-safe.
#pragma once

#include <amqp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "idem/rabbitmq_source.hpp"

namespace idem::rabbitmq::detail {

inline constexpr amqp_channel_t kChannel = 1;

using Headers = std::vector<std::pair<std::string, std::string>>;

// What a published message carries besides its body.
struct PublishProps {
  std::string message_id;  // empty: none
  std::string expiration;  // per-message TTL in ms, as AMQP wants it (a decimal string); empty: none
  const Headers* headers = nullptr;
  const Headers* extra_headers = nullptr;  // appended after `headers`
};

class Connection {
 public:
  // Connects, logs in and opens the channel. kUnavailable: unreachable;
  // kFailedPrecondition: the broker refused (login, vhost). Messages never hold the
  // password.
  static StatusOr<std::unique_ptr<Connection>> open(const Options& o);
  ~Connection();  // closes the channel and the connection when they are still usable
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  amqp_connection_state_t state() { return conn_; }
  bool broken() const { return broken_; }
  const std::string& where() const { return where_; }

  // Status of the last RPC (amqp_get_rpc_reply) or of `reply`; on an error the
  // connection is broken() (a closed channel or connection is answered with close-ok).
  Status check(const std::string& what);
  Status check(const amqp_rpc_reply_t& reply, const std::string& what);
  // A non-zero rabbitmq-c status code from a call that sends without waiting.
  Status lost(int status, const std::string& what);

  // Declares `queue` durable with `args`, or only checks it exists (passive).
  // *ready (optional) receives its count of ready messages. A passive declare of an
  // absent queue returns kNotFound and leaves the connection usable (a new channel).
  Status declare(const std::string& queue, bool passive, const amqp_table_t& args, std::uint32_t* ready = nullptr);
  // The work queue: used as it is when it exists, else declared with o.queue_type.
  Status declare_work_queue(const Options& o);

  // queue.delete of `queue`, with its messages; a queue that does not exist counts as
  // deleted.
  Status remove(const std::string& queue);

  // basic.publish through the default exchange to `queue`, persistent.
  Status publish(const std::string& queue, const std::string& body, const PublishProps& props);

 private:
  Connection(amqp_connection_state_t c, std::string where) : conn_(c), where_(std::move(where)) {}
  Status login(const Options& o);
  Status open_channel();

  amqp_connection_state_t conn_;
  std::string where_;  // "HOST:PORT/VHOST", for messages
  bool broken_ = false;
};

amqp_bytes_t bytes(const std::string& s);
std::string to_string(amqp_bytes_t b);
// The entries of an AMQP table whose values are strings, integers or booleans, as text.
Headers table_to_headers(const amqp_table_t& t);

}  // namespace idem::rabbitmq::detail

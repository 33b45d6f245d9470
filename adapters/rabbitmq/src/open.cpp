// open() and the Publisher of the RabbitMQ adapter.
#include <sys/time.h>

#include <set>

#include "connection.hpp"
#include "idem/rabbitmq_source.hpp"
#include "queue_source.hpp"

namespace idem::rabbitmq {
namespace {

constexpr std::size_t kConfirmWindow = 1000;  // messages published before waiting for their confirms

Status check(const Options& o) {
  if (o.queue.empty()) return invalid_argument("amqp: Options::queue is required");
  if (o.queue_type != "classic" && o.queue_type != "quorum") {
    return invalid_argument("amqp: Options::queue_type must be classic or quorum");
  }
  if (o.connect_timeout.count() <= 0 || o.command_timeout.count() <= 0) {
    return invalid_argument("amqp: timeouts must be positive");
  }
  return ok_status();
}

class QueuePublisher final : public Publisher {
 public:
  QueuePublisher(std::unique_ptr<detail::Connection> c, Options o) : conn_(std::move(c)), o_(std::move(o)) {}

  Status start() {
    amqp_confirm_select_t req{};
    amqp_simple_rpc_decoded(conn_->state(), detail::kChannel, AMQP_CONFIRM_SELECT_METHOD, AMQP_CONFIRM_SELECT_OK_METHOD,
                            &req);
    return conn_->check("confirm.select");
  }

  Status publish(std::span<const OutgoingMessage> messages) override {
    for (std::size_t i = 0; i < messages.size(); i += kConfirmWindow) {
      const std::size_t end = std::min(messages.size(), i + kConfirmWindow);
      for (std::size_t j = i; j < end; ++j) {
        detail::PublishProps props;
        props.message_id = messages[j].id;
        props.headers = &messages[j].headers;
        if (Status s = conn_->publish(o_.queue, messages[j].body, props); !s.ok()) return s;
        ++published_;
      }
      if (Status s = wait_confirms(); !s.ok()) return s;
    }
    return ok_status();
  }

 private:
  // Reads the broker's basic.ack / basic.nack frames until every published message is
  // confirmed.
  Status wait_confirms() {
    while (confirmed_ < published_) {
      amqp_frame_t frame;
      timeval tv{static_cast<time_t>(o_.command_timeout.count() / 1000),
                 static_cast<suseconds_t>(o_.command_timeout.count() % 1000 * 1000)};
      const int s = amqp_simple_wait_frame_noblock(conn_->state(), &frame, &tv);
      if (s != AMQP_STATUS_OK) return conn_->lost(s, "waiting for publisher confirms");
      if (frame.frame_type != AMQP_FRAME_METHOD) continue;
      const amqp_method_number_t id = frame.payload.method.id;
      if (id == AMQP_BASIC_ACK_METHOD) {
        const auto* m = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded);
        confirm(m->delivery_tag, m->multiple != 0);
      } else if (id == AMQP_BASIC_NACK_METHOD) {
        return unavailable("amqp: the broker rejected a message published to " + o_.queue);
      } else if (id == AMQP_CHANNEL_CLOSE_METHOD || id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_rpc_reply_t r{};
        r.reply_type = AMQP_RESPONSE_SERVER_EXCEPTION;
        r.reply = frame.payload.method;
        return conn_->check(r, "publishing to " + o_.queue);
      }
    }
    amqp_maybe_release_buffers(conn_->state());
    return ok_status();
  }

  void confirm(std::uint64_t tag, bool multiple) {
    if (multiple) {
      confirmed_ = std::max(confirmed_, tag);
    } else {
      out_of_order_.insert(tag);
    }
    while (!out_of_order_.empty() && *out_of_order_.begin() <= confirmed_ + 1) {
      confirmed_ = std::max(confirmed_, *out_of_order_.begin());
      out_of_order_.erase(out_of_order_.begin());
    }
  }

  std::unique_ptr<detail::Connection> conn_;
  Options o_;
  std::set<std::uint64_t> out_of_order_;  // confirmed singly, beyond confirmed_
  std::uint64_t published_ = 0;           // the delivery tag of the last published message
  std::uint64_t confirmed_ = 0;           // every tag up to this one is confirmed
};

}  // namespace

StatusOr<std::unique_ptr<MessageSource>> open(Options options) {
  if (Status s = check(options); !s.ok()) return s;
  auto source = std::make_unique<detail::QueueSource>(std::move(options));
  if (Status s = source->start(); !s.ok()) return s;
  return std::unique_ptr<MessageSource>(std::move(source));
}

StatusOr<std::unique_ptr<Publisher>> open_publisher(const Options& options) {
  if (Status s = check(options); !s.ok()) return s;
  auto conn = detail::Connection::open(options);
  if (!conn.ok()) return conn.status();
  if (Status s = (*conn)->declare_work_queue(options); !s.ok()) return s;
  auto p = std::make_unique<QueuePublisher>(std::move(conn).value(), options);
  if (Status s = p->start(); !s.ok()) return s;
  return std::unique_ptr<Publisher>(std::move(p));
}

Status remove(const Options& options) {
  if (Status s = check(options); !s.ok()) return s;
  auto conn = detail::Connection::open(options);
  if (!conn.ok()) return conn.status();
  for (const std::string& q : detail::queues_of(options)) {
    if (Status s = (*conn)->remove(q); !s.ok()) return s;
  }
  return ok_status();
}

}  // namespace idem::rabbitmq

// The Pulsar MessageSource (pulsar_source.hpp). Not thread-safe: the runtime calls it
// from its loop thread only.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "idem/pulsar_source.hpp"
#include "producer.hpp"
#include "web.hpp"

namespace idem::pulsar::detail {

class TopicSource final : public MessageSource {
 public:
  explicit TopicSource(Options o);
  ~TopicSource() override;

  // Connects the consumer.
  Status start();

  Status fetch(std::size_t max, Duration timeout, std::vector<Delivery>& out) override;
  Status ack(const Delivery& d) override;
  Status retry(const Delivery& d, Duration delay) override;
  Status dead_letter(const Delivery& d, std::string_view reason, std::string_view detail) override;
  // Negatively acknowledges d: the broker delivers it again after the nack delay (an
  // unacked message would otherwise stay with this consumer while it is connected).
  void hold(const Delivery& d) override;
  StatusOr<bool> drained() override;
  std::string describe() const override;
  void close() override;

 private:
  // The consumer endpoint's path and query.
  std::string consumer_target() const;
  // Connects when the consumer has no connection and its backoff has passed.
  Status ensure_connected();
  void lost(const Status& why);
  // Turns one frame into a delivery in `out`, unless it is no message or a copy of one
  // in flight here.
  void take(const std::string& frame, std::vector<Delivery>& out);
  // Sends {"type": type, "messageId": id} ("" for an ack) and forgets d.
  Status settle(const Delivery& d, const char* type);
  // Publishes d again to the topic, due after `delay`, then acks it.
  Status republish(const Delivery& d, Duration delay);
  // Publishes d through `to` with its properties, `extra` and idem-origin over them,
  // due after `deliver_after` (0: now); acks it once the broker has it, holds it (hold())
  // if the publish fails.
  Status forward(Producer& to, const Delivery& d, Properties extra, Duration deliver_after);

  Options o_;
  std::shared_ptr<Clock> clock_;
  spdlog::logger* log_;
  std::unique_ptr<WebSocket> ws_;
  TimePoint reconnect_at_{};
  Duration backoff_{0};
  std::size_t permits_ = 0;  // granted and not yet used by a message
  std::uint64_t next_handle_ = 1;
  std::unordered_map<std::uint64_t, std::string> in_flight_;  // handle → message id
  std::unordered_set<std::string> in_flight_ids_;
  Producer dead_letters_;
  Producer self_;  // the topic itself, for retries delayed past the nack delay
};

}  // namespace idem::pulsar::detail

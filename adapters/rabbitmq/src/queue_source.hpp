// The RabbitMQ MessageSource (rabbitmq_source.hpp). Not thread-safe: the runtime calls
// it from its loop thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "connection.hpp"
#include "idem/rabbitmq_source.hpp"

namespace idem::rabbitmq::detail {

// The retry queue of `delay`: "<queue>.retry.<bucket>ms", bucket the smallest power of
// two ≥ delay within [kMinRetryBucket, kMaxRetryBucket].
Duration retry_bucket(Duration delay);
std::string retry_queue_name(const std::string& queue, Duration bucket);

// The dead-letter queue: Options::dead_letter_queue, or "<queue>.dlq" when empty.
std::string dead_letter_queue_of(const Options& o);

// Every queue the source declares: the work queue, its dead-letter queue and its retry
// queues.
std::vector<std::string> queues_of(const Options& o);

class QueueSource final : public MessageSource {
 public:
  explicit QueueSource(Options o);

  // Connects and declares the queues.
  Status start();

  Status fetch(std::size_t max, Duration timeout, std::vector<Delivery>& out) override;
  Status ack(const Delivery& d) override;
  Status retry(const Delivery& d, Duration delay) override;
  Status dead_letter(const Delivery& d, std::string_view reason, std::string_view detail) override;
  void hold(const Delivery& d) override { undecided_.erase(d.handle); }
  // Sends the collected acks and a tx.commit, without waiting for its commit-ok
  // (receive() reads it; commits go in order on the channel).
  Status flush() override;
  StatusOr<bool> drained() override;
  std::string describe() const override;
  void close() override;

 private:
  Status connect();
  Status declare_queues();
  // Reconnects when the connection broke; starts consuming when it has not yet.
  Status ready(std::size_t max);
  Status start_consuming(std::size_t max);
  // Receives one delivery into buffered_, waiting up to `timeout`, and reads the
  // commit-oks that come before it. Returns false when none came in time.
  StatusOr<bool> receive(Duration timeout);
  Status handle_other_frame();
  // The delivery tag of d when d came on the current connection, else kUnavailable.
  StatusOr<std::uint64_t> tag_of(const Delivery& d, const char* what);
  Status settle(std::uint64_t tag, bool requeue);
  Status send_acks(bool all);
  // Sends the collected acks and a tx.commit, if anything was settled since the last;
  // then, when `wait` or too many are in flight, reads until every commit in flight
  // is answered.
  Status commit(bool wait);
  Status await_commits();
  // Republishes d to `queue` and acks it, committed together.
  Status move(const Delivery& d, const std::string& queue, const PublishProps& props);

  Options o_;
  std::shared_ptr<Clock> clock_;
  spdlog::logger* log_;
  std::unique_ptr<Connection> conn_;
  std::uint64_t epoch_ = 0;  // which connection: the top 16 bits of a delivery's handle
  bool was_connected_ = false;
  bool consuming_ = false;
  std::uint16_t prefetch_ = 0;
  std::set<std::uint64_t> unsettled_;  // delivery tags received and neither acked nor nacked
  std::vector<std::uint64_t> acks_;    // acked, not yet sent (see send_acks())
  std::size_t uncommitted_ = 0;        // acks and nacks since the last commit, and the acks kept back
  std::size_t commits_in_flight_ = 0;  // tx.commit sent, commit-ok not read yet
  std::deque<Delivery> buffered_;      // received, not yet fetched
  // Fetched and not decided nor held, on this connection: handle → AMQP message-id
  // (empty: none).
  std::unordered_map<std::uint64_t, std::string> undecided_;
};

}  // namespace idem::rabbitmq::detail

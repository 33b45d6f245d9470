// The Kafka MessageSource (kafka_source.hpp). Not thread-safe: the runtime calls it
// from its loop thread only, and librdkafka calls its rebalance callback from inside
// rd_kafka_consumer_poll, on that thread too.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "client.hpp"
#include "idem/kafka_source.hpp"
#include "offset_tracker.hpp"

namespace idem::kafka::detail {

// Sets the retry and dead-letter topics left empty to "<topic>.retry", "<topic>.dlq".
void fill_default_names(Options& o);

class KafkaSource final : public MessageSource {
 public:
  explicit KafkaSource(Options o);
  ~KafkaSource() override;

  // Creates the handles and the topics if absent, checks the brokers, subscribes.
  Status start();

  Status fetch(std::size_t max, Duration timeout, std::vector<Delivery>& out) override;
  Status ack(const Delivery& d) override;
  Status retry(const Delivery& d, Duration delay) override;
  Status dead_letter(const Delivery& d, std::string_view reason, std::string_view detail) override;
  // Its offset stays undecided, and fetch() hands d out again a second later.
  void hold(const Delivery& d) override;
  StatusOr<bool> drained() override;
  void set_assignment_listener(AssignmentListener* listener) override { listener_ = listener; }
  std::string describe() const override;
  void close() override;

 private:
  // One assigned partition of the topic or of its retry topic.
  struct Partition {
    std::string topic;
    std::int32_t id = 0;
    bool is_retry = false;
    OffsetTracker tracker;
    std::unordered_map<std::int64_t, std::string> keys;  // undecided offset → its non-empty key
  };

  static void on_rebalance(void* self, rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts);
  void assign(rd_kafka_topic_partition_list_t* parts);
  void revoke(rd_kafka_topic_partition_list_t* parts);
  // Polls up to `max` messages, blocking up to `timeout` for the first.
  Status poll_some(std::size_t max, Duration timeout, std::vector<Delivery>& out);
  // Turns a message into a delivery: appended to out, or held in waiting_ until due.
  void take(const rd_kafka_message_t* m, std::vector<Delivery>& out);
  // Hands out the waiting deliveries that are due; returns how many.
  std::size_t release_due(std::size_t max, std::vector<Delivery>& out);
  void pause_or_resume_retries();
  // Commits each partition's decided prefix (of `only`, or of all when empty).
  Status commit(bool sync, const std::vector<std::string>& only = {});
  // Whether the group's committed offset of each partition in list is its high watermark.
  StatusOr<bool> group_at_end(rd_kafka_topic_partition_list_t* list);
  Partition* partition_of(const Delivery& d);
  void decided(Partition& p, const Delivery& d);
  // Produces d to `topic` with its headers, less idem's, plus `extra` and idem-origin;
  // then marks it decided, or holds it (hold()) if the produce fails. Its key: the
  // origin when origin_key, else d's own key.
  Status forward(const Delivery& d, const std::string& topic, Headers extra, bool origin_key = false);
  std::int64_t now_ms() const;
  void leave_group();
  // Whether the group rebalances incrementally (cooperative-sticky, chosen where
  // librdkafka is 2.3.0 or newer; see assignor() in kafka_source.cpp).
  bool cooperative() const;

  Options o_;
  std::shared_ptr<Clock> clock_;
  spdlog::logger* log_;
  Context ctx_;
  Handle consumer_;
  Handle producer_;
  std::map<std::string, Partition> parts_;         // by "topic/partition"
  // due (Unix ms) → a retry-topic delivery, or one held or not forwarded (hold())
  std::multimap<std::int64_t, Delivery> waiting_;
  bool retries_paused_ = false;
  bool assigned_ = false;  // an assignment is in force: set by assign(), cleared by revoke()
  bool closed_ = false;
  AssignmentListener* listener_ = nullptr;
  std::vector<Delivery>* filling_ = nullptr;  // the fetch's out, while it polls
  std::size_t filling_from_ = 0;              // where this fetch's deliveries begin in it
  TimePoint next_commit_{};
  Status poll_error_;
};

}  // namespace idem::kafka::detail

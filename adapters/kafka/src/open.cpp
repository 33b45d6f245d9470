// open(), open_publisher() and the Publisher of the Kafka adapter.
#include <chrono>

#include "client.hpp"
#include "idem/kafka_source.hpp"
#include "kafka_source.hpp"

namespace idem::kafka {
namespace {

Status check(const Options& o, bool needs_group) {
  if (o.brokers.empty()) return invalid_argument("kafka: Options::brokers is required");
  if (o.topic.empty()) return invalid_argument("kafka: Options::topic is required");
  if (needs_group && o.group.empty()) return invalid_argument("kafka: Options::group is required");
  if (o.partitions <= 0) return invalid_argument("kafka: Options::partitions must be positive");
  if (o.replication_factor == 0 || o.replication_factor < -1) {
    return invalid_argument("kafka: Options::replication_factor must be positive, or -1 for the broker's default");
  }
  if (o.session_timeout.count() <= 0 || o.connect_timeout.count() <= 0 || o.command_timeout.count() <= 0) {
    return invalid_argument("kafka: timeouts must be positive");
  }
  if (o.max_waiting == 0) return invalid_argument("kafka: Options::max_waiting must be positive");
  return ok_status();
}

class KafkaPublisher final : public Publisher {
 public:
  explicit KafkaPublisher(Options o) : o_(std::move(o)) { ctx_.log = o_.logger.get(); }

  Status start() {
    auto p = detail::make_handle(RD_KAFKA_PRODUCER, o_, &ctx_, {{"enable.idempotence", "true"}});
    if (!p.ok()) return p.status();
    producer_ = std::move(p).value();
    if (Status s = detail::check_reachable(producer_.get(), o_); !s.ok()) return s;
    return detail::ensure_topics(producer_.get(), o_, {o_.topic});
  }

  Status publish(std::span<const OutgoingMessage> messages) override {
    // On the heap: reports that come after a timeout still have somewhere to write.
    auto results = std::make_unique<std::vector<rd_kafka_resp_err_t>>(messages.size());
    for (std::size_t i = 0; i < messages.size(); ++i) {
      detail::Headers headers(messages[i].headers.begin(), messages[i].headers.end());
      if (!messages[i].id.empty()) headers.emplace_back("idem-id", messages[i].id);
      Status s = detail::produce(producer_.get(), o_.topic, {}, messages[i].body, headers, &(*results)[i]);
      if (!s.ok()) {
        results->resize(i);  // the rest were not produced
        (void)wait_for(*results);
        return s;
      }
    }
    const bool complete = wait_for(*results);
    for (rd_kafka_resp_err_t e : *results) {
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR) continue;
      if (!complete) (void)results.release();  // their reports are still to come
      return unavailable("kafka: publish to " + o_.topic + " not confirmed: " + rd_kafka_err2str(e));
    }
    return ok_status();
  }

 private:
  // Waits up to command_timeout for every report; then purges what is left. Returns
  // false when some report has not come even so.
  bool wait_for(const std::vector<rd_kafka_resp_err_t>& results) {
    const auto deadline = std::chrono::steady_clock::now() + o_.command_timeout;
    while (std::chrono::steady_clock::now() < deadline && rd_kafka_outq_len(producer_.get()) > 0) {
      rd_kafka_flush(producer_.get(), 100);
    }
    if (rd_kafka_outq_len(producer_.get()) > 0) {
      rd_kafka_purge(producer_.get(), RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
      rd_kafka_flush(producer_.get(), 1000);
    }
    for (rd_kafka_resp_err_t e : results)
      if (e == RD_KAFKA_RESP_ERR__IN_PROGRESS) return false;
    return true;
  }

  Options o_;
  detail::Context ctx_;
  detail::Handle producer_;
};

}  // namespace

StatusOr<std::unique_ptr<MessageSource>> open(Options options) {
  if (Status s = check(options, true); !s.ok()) return s;
  auto source = std::make_unique<detail::KafkaSource>(std::move(options));
  if (Status s = source->start(); !s.ok()) return s;
  return std::unique_ptr<MessageSource>(std::move(source));
}

StatusOr<std::unique_ptr<Publisher>> open_publisher(const Options& options) {
  if (Status s = check(options, false); !s.ok()) return s;
  auto publisher = std::make_unique<KafkaPublisher>(options);
  if (Status s = publisher->start(); !s.ok()) return s;
  return std::unique_ptr<Publisher>(std::move(publisher));
}

Status remove(const Options& options) {
  if (Status s = check(options, false); !s.ok()) return s;
  detail::Context ctx;
  ctx.log = options.logger.get();
  auto admin = detail::make_handle(RD_KAFKA_PRODUCER, options, &ctx, {});
  if (!admin.ok()) return admin.status();
  if (Status s = detail::check_reachable(admin->get(), options); !s.ok()) return s;
  Options o = options;
  detail::fill_default_names(o);
  return detail::delete_topics(admin->get(), o, {o.topic, o.retry_topic, o.dead_letter_topic});
}

}  // namespace idem::kafka

// librdkafka handles of the Kafka adapter: configuration, topic creation and removal, a
// reachability check and produce-and-wait, shared by the source and the publisher.
#pragma once

#include <librdkafka/rdkafka.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "idem/kafka_source.hpp"

namespace idem::kafka::detail {

using Headers = std::vector<std::pair<std::string, std::string>>;

// What librdkafka's callbacks reach through the handle's opaque pointer.
struct Context {
  spdlog::logger* log = nullptr;
  // Called from rd_kafka_consumer_poll (consumers only); may be null.
  void (*rebalance)(void* self, rd_kafka_t* rk, rd_kafka_resp_err_t err,
                    rd_kafka_topic_partition_list_t* parts) = nullptr;
  void* self = nullptr;
  // librdkafka's last error (error_cb, on its threads), for check_reachable()'s answer:
  // a TLS or authentication failure makes it a refusal rather than an outage.
  std::mutex mu;
  std::string last_error;  // secrets are not in librdkafka's reasons
  std::string refusal;     // the last TLS or authentication failure, kept past later errors
};

struct HandleDeleter {
  void operator()(rd_kafka_t* rk) const;
};
using Handle = std::unique_ptr<rd_kafka_t, HandleDeleter>;

// A handle of `type` for o.brokers, with `settings` (name, value) applied after the
// adapter's own. `ctx` must outlive the handle. kInvalidArgument: a setting refused.
StatusOr<Handle> make_handle(rd_kafka_type_t type, const Options& o, Context* ctx,
                             const std::vector<std::pair<std::string, std::string>>& settings);

// OK when a broker answers a metadata request within o.connect_timeout. Otherwise
// kFailedPrecondition when librdkafka last reported a failed TLS handshake (an
// unverified certificate or name) or authentication, else kUnavailable; either way
// with librdkafka's last error.
Status check_reachable(rd_kafka_t* rk, const Options& o);

// The number of partitions of `topic` (0: no such topic), from a metadata request.
// kUnavailable when the broker does not answer or answers for the topic with another
// error (e.g. no leader yet).
StatusOr<int> partition_count(rd_kafka_t* rk, const Options& o, const std::string& topic);

// Creates each of `topics` that does not exist yet (o.partitions each).
Status ensure_topics(rd_kafka_t* rk, const Options& o, const std::vector<std::string>& topics);

// Deletes each of `topics`; one that does not exist counts as deleted.
Status delete_topics(rd_kafka_t* rk, const Options& o, const std::vector<std::string>& topics);

// Produces one message (a producer handle made by make_handle) and waits up to
// o.command_timeout for its delivery report. kUnavailable when it was not delivered.
Status produce_and_wait(rd_kafka_t* producer, const Options& o, const std::string& topic, const std::string& key,
                        const std::string& body, const Headers& headers);

// Produces one message whose delivery report writes its result to *result (set to
// RD_KAFKA_RESP_ERR__IN_PROGRESS first); waits while the local queue is full.
Status produce(rd_kafka_t* producer, const std::string& topic, const std::string& key, const std::string& body,
               const Headers& headers, rd_kafka_resp_err_t* result);

// The comma-joined broker list, for messages.
std::string broker_list(const Options& o);

}  // namespace idem::kafka::detail

// librdkafka's mock Kafka cluster, started inside the test process (Debian has no
// Kafka broker). Its brokers listen on real loopback ports, so `idem` child processes
// connect to it too. Stopped (and its ports closed) when destroyed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "idem/status.hpp"

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_mock_cluster_s rd_kafka_mock_cluster_t;

namespace idem::kafka_test {

class MockCluster {
 public:
  static StatusOr<std::unique_ptr<MockCluster>> start(int brokers = 1);
  ~MockCluster();

  // "127.0.0.1:PORT[,…]".
  const std::string& bootstraps() const { return bootstraps_; }
  // "kafka://BOOTSTRAPS/TOPIC?group=G&…more" (no group when empty).
  std::string uri(const std::string& topic, const std::string& group, const std::string& more = "") const;

  // Creates `topic` with `partitions` partitions (replication 1).
  Status create_topic(const std::string& topic, int partitions);

  // Every message in `topic` (all partitions, from the start): key → bodies.
  std::multimap<std::string, std::string> records(const std::string& topic);
  // Every message body in `topic`.
  std::multiset<std::string> bodies(const std::string& topic);
  // The sum over `topic`'s partitions of high watermark minus the group's committed
  // offset (the group's unread or uncommitted messages); -1 when unknown.
  std::int64_t lag(const std::string& topic, const std::string& group);

  void set_down(bool down);  // every broker of the cluster down or up again

 private:
  MockCluster() = default;
  rd_kafka_t* rk_ = nullptr;  // the handle that owns the cluster
  rd_kafka_mock_cluster_t* mc_ = nullptr;
  int brokers_ = 0;
  std::string bootstraps_;
};

}  // namespace idem::kafka_test

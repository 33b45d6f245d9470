// librdkafka's mock Kafka cluster, started inside the test process: kept for what only
// it can do (a broker set down, errors injected into chosen requests). Its brokers
// listen on real loopback ports, so `idem` child processes connect to it too. Stopped
// (and its ports closed) when destroyed.
#pragma once

#include <memory>

#include "support/cluster.hpp"

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_mock_cluster_s rd_kafka_mock_cluster_t;

namespace idem::kafka_test {

class MockCluster final : public Cluster {
 public:
  static StatusOr<std::unique_ptr<MockCluster>> start(int brokers = 1);
  ~MockCluster() override;

  // Creates `topic` with `partitions` partitions (replication 1).
  Status create_topic(const std::string& topic, int partitions) override;

  void set_down(bool down);  // every broker of the cluster down or up again
  // The next `count` requests of Kafka API `api_key` (e.g. 8, OffsetCommit) fail with `error`.
  void fail_requests(int api_key, int count, int error);

 private:
  MockCluster() = default;
  rd_kafka_t* rk_ = nullptr;  // the handle that owns the cluster
  rd_kafka_mock_cluster_t* mc_ = nullptr;
  int brokers_ = 0;
};

}  // namespace idem::kafka_test

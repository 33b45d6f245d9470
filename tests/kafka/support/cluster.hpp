// What the Kafka tests ask of a cluster, real (kafka_server.hpp) or librdkafka's mock
// (mock_cluster.hpp): its bootstrap list, URIs for the adapter, topics, and reading
// back what a topic and a group hold, all through librdkafka's client API.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "idem/status.hpp"

namespace idem::kafka_test {

class Cluster {
 public:
  virtual ~Cluster() = default;

  // "127.0.0.1:PORT[,…]".
  const std::string& bootstraps() const { return bootstraps_; }
  // "kafka://BOOTSTRAPS/TOPIC?group=G&…more" (no group when empty).
  std::string uri(const std::string& topic, const std::string& group, const std::string& more = "") const;

  // Creates `topic` with `partitions` partitions.
  virtual Status create_topic(const std::string& topic, int partitions) = 0;

  // Every message in `topic` (all partitions, from the start): key → bodies.
  std::multimap<std::string, std::string> records(const std::string& topic);
  // Every message body in `topic`.
  std::multiset<std::string> bodies(const std::string& topic);
  // The sum over `topic`'s partitions of high watermark minus the group's committed
  // offset (the group's unread or uncommitted messages); -1 when unknown.
  std::int64_t lag(const std::string& topic, const std::string& group);

 protected:
  std::string bootstraps_;
};

}  // namespace idem::kafka_test

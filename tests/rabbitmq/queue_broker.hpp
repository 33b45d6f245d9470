// RabbitMQ as the Broker of the shared `idem consume` kill and partition tests
// (support/consume_kills.hpp), over a RabbitServer (support/rabbitmq_server.hpp).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "support/consume_kills.hpp"
#include "support/rabbitmq_server.hpp"

namespace idem::rabbitmq_test {

// The retry queues the adapter declares (rabbitmq_source.hpp's buckets).
inline std::vector<std::string> retry_queues(const std::string& queue) {
  std::vector<std::string> out;
  for (long long b = 128; b <= 4194304; b *= 2) out.push_back(queue + ".retry." + std::to_string(b) + "ms");
  return out;
}

class QueueBroker final : public consume_kills::Broker {
 public:
  explicit QueueBroker(const RabbitServer& server) : server_(server) {}

  // A queue is its own consumer group.
  std::string source_uri(const std::string& topic, const std::string&) override { return server_.uri(topic); }
  std::string publish_uri(const std::string& topic) override { return server_.uri(topic); }
  std::multiset<std::string> dead_letter_bodies(const std::string& topic) override {
    auto dlq = server_.take_all(topic + ".dlq");
    EXPECT_TRUE(dlq.ok()) << dlq.status().to_string();
    std::multiset<std::string> out;
    if (dlq.ok())
      for (const auto& m : *dlq) out.insert(m.body);
    return out;
  }
  // Once every consumer has exited, unacked deliveries are ready again: the work queue
  // and the retry queues hold whatever was not settled.
  std::int64_t unsettled(const std::string& topic, const std::string&) override {
    std::int64_t n = 0;
    std::vector<std::string> queues = retry_queues(topic);
    queues.push_back(topic);
    for (const auto& q : queues) {
      auto r = server_.ready(q);
      EXPECT_TRUE(r.ok()) << q << ": " << r.status().to_string();
      n += r.ok() ? *r : 0;
    }
    return n;
  }

 private:
  const RabbitServer& server_;
};

}  // namespace idem::rabbitmq_test

// NATS JetStream as the Broker of the shared `idem consume` kill and partition tests
// (support/consume_kills.hpp), over a NatsServer (support/nats_server.hpp).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "support/consume_kills.hpp"
#include "support/nats_server.hpp"

namespace idem::nats_test {

class JetStreamBroker final : public consume_kills::Broker {
 public:
  explicit JetStreamBroker(const NatsServer& server) : server_(server) {}

  std::string source_uri(const std::string& topic, const std::string& group) override {
    return publish_uri(topic) + "&durable=" + group;
  }
  std::string publish_uri(const std::string& topic) override { return server_.uri() + "?stream=" + topic; }
  std::multiset<std::string> dead_letter_bodies(const std::string& topic) override {
    auto stored = server_.messages(topic + "_DLQ");
    EXPECT_TRUE(stored.ok()) << stored.status().to_string();
    std::multiset<std::string> out;
    if (stored.ok())
      for (const auto& m : *stored) out.insert(m.body);
    return out;
  }
  std::int64_t unsettled(const std::string& topic, const std::string& group) override {
    auto c = server_.consumer(topic, group);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? c->ack_pending + static_cast<std::int64_t>(c->pending) : -2;
  }

 private:
  const NatsServer& server_;
};

}  // namespace idem::nats_test

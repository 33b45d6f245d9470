// Redis Streams as the Broker of the shared `idem consume` kill test
// (support/consume_kills.hpp), over a RedisServer (tests/redis/support).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "support/consume_kills.hpp"
#include "support/redis_server.hpp"

namespace idem::redis_streams_test {

// The values of `field` in every entry of an XRANGE reply.
inline std::multiset<std::string> field_values(const redis_test::RedisServer& server, const std::string& stream,
                                               const std::string& field) {
  auto range = server.command({"XRANGE", stream, "-", "+"});
  EXPECT_TRUE(range.ok());
  std::multiset<std::string> out;
  if (!range.ok()) return out;
  for (const auto& entry : range->elements) {
    const auto& fields = entry.elements.at(1).elements;
    for (std::size_t i = 0; i + 1 < fields.size(); i += 2)
      if (fields[i].str == field) out.insert(fields[i + 1].str);
  }
  return out;
}

class StreamBroker final : public consume_kills::Broker {
 public:
  explicit StreamBroker(const redis_test::RedisServer& server) : server_(server) {}

  std::string source_uri(const std::string& topic, const std::string& group) override {
    return publish_uri(topic) + "?group=" + group;
  }
  std::string publish_uri(const std::string& topic) override {
    return "redis-stream://127.0.0.1:" + std::to_string(server_.port()) + "/" + topic;
  }
  std::multiset<std::string> dead_letter_bodies(const std::string& topic) override {
    return field_values(server_, topic + ":dlq", "body");
  }
  std::int64_t unsettled(const std::string& topic, const std::string& group) override {
    auto pending = server_.command({"XPENDING", topic, group});
    EXPECT_TRUE(pending.ok());
    return pending.ok() ? pending->elements.at(0).integer : -2;
  }

 private:
  const redis_test::RedisServer& server_;
};

}  // namespace idem::redis_streams_test

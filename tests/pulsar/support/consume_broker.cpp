#include "support/consume_broker.hpp"

#include <gtest/gtest.h>

#include <iostream>
#include <map>

namespace idem::pulsar_test {

std::string PulsarBroker::source_uri(const std::string& topic, const std::string& group) {
  return s_.uri(topic, group, "nack_delay_ms=200" + (params_.empty() ? "" : "&" + params_));
}

std::string PulsarBroker::publish_uri(const std::string& topic) { return s_.uri(topic, ""); }

std::multiset<std::string> PulsarBroker::dead_letter_bodies(const std::string& topic) {
  std::multiset<std::string> out;
  for (const StoredMessage& m : s_.read_all(topic + "-DLQ")) {
    EXPECT_TRUE(m.properties.count("idem-origin") == 1) << "a dead letter without its origin";
    out.insert(m.payload);
  }
  return out;
}

std::int64_t PulsarBroker::unsettled(const std::string& topic, const std::string& group) {
  const auto [backlog, unacked] = s_.backlog(topic, group);
  EXPECT_GE(backlog, 0);
  return backlog < 0 ? -2 : backlog + unacked;
}

}  // namespace idem::pulsar_test

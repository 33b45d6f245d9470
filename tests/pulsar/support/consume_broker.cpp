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
  std::map<std::string, std::string> by_origin;
  const auto all = s_.read_all(topic + "-DLQ");
  for (const StoredMessage& m : all) {
    const auto it = m.properties.find("idem-origin");
    EXPECT_TRUE(it != m.properties.end()) << "a dead letter without its origin";
    if (it != m.properties.end()) by_origin.emplace(it->second, m.payload);
  }
  std::multiset<std::string> out;
  for (const auto& [origin, body] : by_origin) out.insert(body);
  std::cout << "pulsar: " << all.size() << " dead letters for " << out.size() << " origins ("
            << all.size() - out.size() << " written again after a kill)\n";
  return out;
}

std::int64_t PulsarBroker::unsettled(const std::string& topic, const std::string& group) {
  const auto [backlog, unacked] = s_.backlog(topic, group);
  EXPECT_GE(backlog, 0);
  return backlog < 0 ? -2 : backlog + unacked;
}

}  // namespace idem::pulsar_test

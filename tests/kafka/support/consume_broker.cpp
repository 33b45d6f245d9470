#include "support/consume_broker.hpp"

#include <gtest/gtest.h>

#include <iostream>

namespace idem::kafka_test {

std::string KafkaBroker::idem_uri(const std::string& topic, const std::string& group, const std::string& more) const {
  std::string params = more;
  for (const std::string* p : {&params_, &idem_params_})
    if (!p->empty()) params += (params.empty() ? "" : "&") + *p;
  std::string u = c_.uri(topic, group, params);
  if (!idem_bootstraps_.empty()) u.replace(u.find(c_.bootstraps()), c_.bootstraps().size(), idem_bootstraps_);
  return u;
}

std::string KafkaBroker::source_uri(const std::string& topic, const std::string& group) {
  return idem_uri(topic, group, "session_timeout_ms=1500");
}

std::string KafkaBroker::source_uri_from(const std::string&, const std::string& topic, const std::string& group) {
  std::string u = source_uri(topic, group);
  return u.replace(u.find(c_.bootstraps()), c_.bootstraps().size(), link_);
}

std::string KafkaBroker::publish_uri(const std::string& topic) {
  if (params_.empty()) {
    EXPECT_TRUE(c_.create_topic(topic, 4).ok());
    EXPECT_TRUE(c_.create_topic(topic + ".retry", 2).ok());
    EXPECT_TRUE(c_.create_topic(topic + ".dlq", 1).ok());
  }
  return idem_uri(topic, "", "");
}

std::multiset<std::string> KafkaBroker::dead_letter_bodies(const std::string& topic) {
  std::multiset<std::string> out;
  for (const auto& [origin, body] : c_.records(topic + ".dlq")) {
    EXPECT_FALSE(origin.empty()) << "a dead letter without its origin as key";
    out.insert(body);
  }
  return out;
}

std::int64_t KafkaBroker::unsettled(const std::string& topic, const std::string& group) {
  const std::int64_t a = c_.lag(topic, group), b = c_.lag(topic + ".retry", group);
  EXPECT_GE(a, 0);
  EXPECT_GE(b, 0);
  return a < 0 || b < 0 ? -2 : a + b;
}

}  // namespace idem::kafka_test

// A Pulsar standalone as the shared kill test (tests/support/consume_kills.hpp) sees it.
// A killed consumer's WebSocket closes with its process, and the broker redelivers
// what it had not acked to the subscription's other consumers (or its restart).
#pragma once

#include <string>

#include "support/consume_kills.hpp"
#include "support/pulsar_server.hpp"

namespace idem::pulsar_test {

class PulsarBroker final : public consume_kills::Broker {
 public:
  // `params` ("NAME=VALUE&…", e.g. "type=key_shared") go on every source URI.
  explicit PulsarBroker(PulsarServer& s, std::string params = "") : s_(s), params_(std::move(params)) {}

  std::string source_uri(const std::string& topic, const std::string& group) override;
  std::string publish_uri(const std::string& topic) override;
  // One body per origin: a consumer killed between a dead letter's publish and its ack
  // dead-letters the redelivered message again, with the same idem-origin. How often
  // that happened is printed.
  std::multiset<std::string> dead_letter_bodies(const std::string& topic) override;
  bool dead_letters_may_repeat() const override { return true; }
  // The subscription's backlog (delayed retries included).
  std::int64_t unsettled(const std::string& topic, const std::string& group) override;

 private:
  PulsarServer& s_;
  std::string params_;
};

}  // namespace idem::pulsar_test

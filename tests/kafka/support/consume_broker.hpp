// A Kafka cluster as the shared kill test (tests/support/consume_kills.hpp) sees it.
//
// A killed member keeps its place in the group until its session times out, so the
// consumers use a short session (1.5 s; the test brokers allow sessions from 0.5 s).
#pragma once

#include <string>

#include "support/cluster.hpp"
#include "support/consume_kills.hpp"

namespace idem::kafka_test {

class KafkaBroker final : public consume_kills::Broker {
 public:
  // `params` ("NAME=VALUE&…") go on every URI. Without them the topics are created here
  // (4 partitions, the retry topic 2, the dead-letter topic 1) before publishing;
  // with them, `idem publish` and `idem consume` create them as the parameters say.
  // `link_bootstraps`: the listeners a partition test's host reaches (KafkaServer's
  // link_bootstraps()), for source_uri_from.
  explicit KafkaBroker(Cluster& c, std::string params = "", std::string link_bootstraps = "")
      : c_(c), params_(std::move(params)), link_(std::move(link_bootstraps)) {}

  // The `idem` processes reach the cluster at `bootstraps` with `params` added (a TLS
  // listener and its credentials), while the test reads the topics as before.
  void connect_idem(std::string bootstraps, std::string params) {
    idem_bootstraps_ = std::move(bootstraps);
    idem_params_ = std::move(params);
  }

  std::string source_uri(const std::string& topic, const std::string& group) override;
  // source_uri() with the link's listeners as bootstraps: the brokers advertise
  // addresses of the listener a client came in on.
  std::string source_uri_from(const std::string& address, const std::string& topic,
                              const std::string& group) override;
  std::string publish_uri(const std::string& topic) override;
  // One body per origin: a consumer killed between a dead letter's produce and the
  // commit of its offset dead-letters the redelivered message again, under the same
  // key (its origin). How often that happened is printed.
  std::multiset<std::string> dead_letter_bodies(const std::string& topic) override;
  bool dead_letters_may_repeat() const override { return true; }
  // Messages of the topic and its retry topic past the group's committed offsets.
  std::int64_t unsettled(const std::string& topic, const std::string& group) override;

 private:
  // c_.uri() with idem's bootstraps and parameters (connect_idem).
  std::string idem_uri(const std::string& topic, const std::string& group, const std::string& more) const;

  Cluster& c_;
  std::string params_, link_, idem_bootstraps_, idem_params_;
};

}  // namespace idem::kafka_test

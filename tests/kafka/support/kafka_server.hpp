// A real Kafka broker, or a cluster of them, for the tests: scripts/broker.sh starts
// KRaft nodes from Kafka's Maven Central jars on 127.0.0.1 (free ports, a private
// folder, ready once a metadata request lists every node) and stops them by PID when
// the object goes, or when the test process dies.
#pragma once

#include <memory>
#include <string>

#include "support/cluster.hpp"

namespace idem::kafka_test {

class KafkaServer final : public Cluster {
 public:
  // `nodes` combined broker+controller nodes; with 3, topics get 3 replicas and
  // min.insync.replicas=2. With `also_listen` (a partition test's Host::here()), each
  // node has one more PLAINTEXT listener there, advertised there (link_bootstraps()).
  static StatusOr<std::unique_ptr<KafkaServer>> start(int nodes = 1, const std::string& also_listen = "");
  // One broker (or cluster of `nodes`) for the whole test binary, started on first
  // use with the first call's `nodes`; aborts the binary when it cannot start.
  static KafkaServer& shared(int nodes = 1);
  ~KafkaServer() override;

  // The SASL_PLAINTEXT listeners (mechanism PLAIN) and their one user.
  const std::string& sasl_bootstraps() const { return sasl_bootstraps_; }
  const std::string& sasl_user() const { return sasl_user_; }
  const std::string& sasl_password() const { return sasl_password_; }
  const std::string& version() const { return version_; }
  // The listeners on start()'s also_listen address; empty without one.
  const std::string& link_bootstraps() const { return link_bootstraps_; }

  // Creates `topic` with the broker's default replication factor.
  Status create_topic(const std::string& topic, int partitions) override;

  // SIGKILLs node n (1-based), or starts it again and waits until it serves.
  Status kill_node(int n);
  Status start_node(int n);
  // The node id that leads `topic`'s `partition`; -1 when unknown.
  int leader(const std::string& topic, int partition);
  // How many replicas `topic`'s partition 0 has; -1 when unknown.
  int replicas(const std::string& topic);

 private:
  KafkaServer() = default;
  Status run_script(const std::string& args, std::string* out);

  std::string dir_;
  std::string sasl_bootstraps_, sasl_user_, sasl_password_, version_, link_bootstraps_;
};

}  // namespace idem::kafka_test

// A real Kafka broker, or a cluster of them, for the tests: scripts/broker.sh starts
// KRaft nodes from Kafka's Maven Central jars on 127.0.0.1 (free ports, a private
// folder, ready once a metadata request lists every node) and stops them by PID when
// the object goes, or when the test process dies.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "support/cluster.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_files.hpp"

namespace idem::kafka_test {

class KafkaServer final : public Cluster {
 public:
  // `nodes` combined broker+controller nodes; with 3, topics get 3 replicas and
  // min.insync.replicas=2. With `also_listen` (a partition test's Host::here()), each
  // node has one more PLAINTEXT listener there, advertised there (link_bootstraps()).
  // With `tls`, each node also has the TLS listeners below, certified by tls_files().
  static StatusOr<std::unique_ptr<KafkaServer>> start(int nodes = 1, const std::string& also_listen = "",
                                                      bool tls = false);
  // One broker (or cluster of `nodes`) with TLS for the whole test binary, started on
  // first use with the first call's `nodes`; aborts the binary when it cannot start.
  static KafkaServer& shared(int nodes = 1);
  ~KafkaServer() override;

  // The SASL_PLAINTEXT listeners (mechanism PLAIN) and their one user.
  const std::string& sasl_bootstraps() const { return sasl_bootstraps_; }
  const std::string& sasl_user() const { return sasl_user_; }
  const std::string& sasl_password() const { return sasl_password_; }
  const std::string& version() const { return version_; }
  // The listeners on start()'s also_listen address; empty without one.
  const std::string& link_bootstraps() const { return link_bootstraps_; }
  // With TLS (empty otherwise): SSL requiring a client certificate signed by
  // tls_files().ca; SASL_SSL with SCRAM-SHA-256 and -512 for sasl_user()/sasl_password();
  // SSL without client certificates on 127.0.0.2, which the certificate does not name.
  const std::string& ssl_bootstraps() const { return ssl_bootstraps_; }
  const std::string& sasl_ssl_bootstraps() const { return sasl_ssl_bootstraps_; }
  const std::string& alt_bootstraps() const { return alt_bootstraps_; }
  const test_support::TlsFiles& tls_files() const { return *tls_; }

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
  std::string ssl_bootstraps_, sasl_ssl_bootstraps_, alt_bootstraps_;
  std::unique_ptr<testing::TempDir> tls_dir_;
  std::optional<test_support::TlsFiles> tls_;
};

}  // namespace idem::kafka_test

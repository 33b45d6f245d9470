#include "support/kafka_server.hpp"

#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include "support/broker_script.hpp"
#include "support/client.hpp"

namespace idem::kafka_test {
namespace {


// CreateTopics with the broker's default replication factor; "exists" is success.
Status create_topics(const std::string& bootstraps, const std::string& topic, int partitions) {
  rd_kafka_t* rk = new_handle(RD_KAFKA_PRODUCER, {{"bootstrap.servers", bootstraps}});
  if (rk == nullptr) return internal_error("cannot create a client");
  char err[256];
  rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(topic.c_str(), partitions, -1, err, sizeof err);
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_CreateTopics(rk, &nt, 1, nullptr, q);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30'000);
  Status s = ok_status();
  if (ev == nullptr) {
    s = unavailable("no answer to CreateTopics");
  } else if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    s = unavailable(rd_kafka_event_error_string(ev));
  } else {
    std::size_t n = 0;
    const rd_kafka_topic_result_t** r = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    const rd_kafka_resp_err_t e = n == 1 ? rd_kafka_topic_result_error(r[0]) : RD_KAFKA_RESP_ERR__FAIL;
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
      s = internal_error("CreateTopics " + topic + ": " + rd_kafka_err2str(e));
    }
  }
  if (ev != nullptr) rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(q);
  rd_kafka_NewTopic_destroy(nt);
  rd_kafka_destroy(rk);
  return s;
}

}  // namespace

Status KafkaServer::run_script(const std::string& args, std::string* out) {
  return testing::run_broker_script(IDEM_BROKER_SCRIPT, args, out);
}

StatusOr<std::unique_ptr<KafkaServer>> KafkaServer::start(int nodes, const std::string& also_listen, bool tls) {
  std::unique_ptr<KafkaServer> s(new KafkaServer());
  std::string args = "start kafka --nodes " + std::to_string(nodes) + " --owner " + std::to_string(::getpid());
  if (!also_listen.empty()) args += " --also-listen " + also_listen;
  if (tls) {
    s->tls_dir_ = std::make_unique<testing::TempDir>("kafka-tls");
    std::string error;
    s->tls_ = test_support::make_tls_files(s->tls_dir_->str(), &error);
    if (!s->tls_) return internal_error("cannot make the TLS files: " + error);
    args += " --tls '" + s->tls_dir_->str() + "'";
  }
  std::string out;
  Status st = s->run_script(args, &out);
  auto kv = testing::parse_broker_lines(out);
  s->dir_ = kv["DIR"];
  if (!st.ok()) return st;
  s->bootstraps_ = kv["KAFKA_BOOTSTRAP"];
  s->sasl_bootstraps_ = kv["KAFKA_SASL_BOOTSTRAP"];
  s->sasl_user_ = kv["KAFKA_SASL_USER"];
  s->sasl_password_ = kv["KAFKA_SASL_PASSWORD"];
  s->version_ = kv["KAFKA_VERSION"];
  s->link_bootstraps_ = kv["KAFKA_LINK_BOOTSTRAP"];
  s->ssl_bootstraps_ = kv["KAFKA_SSL_BOOTSTRAP"];
  s->sasl_ssl_bootstraps_ = kv["KAFKA_SASL_SSL_BOOTSTRAP"];
  s->alt_bootstraps_ = kv["KAFKA_ALT_BOOTSTRAP"];
  if (s->bootstraps_.empty()) return internal_error("broker.sh printed no KAFKA_BOOTSTRAP");
  if (tls && s->alt_bootstraps_.empty()) return internal_error("broker.sh printed no TLS listeners");
  return s;
}

KafkaServer& KafkaServer::shared(int nodes) {
  static std::unique_ptr<KafkaServer> server = [nodes] {
    auto s = start(nodes, "", true);
    if (!s.ok()) {
      std::fprintf(stderr, "cannot start Kafka: %s\n", s.status().to_string().c_str());
      std::abort();
    }
    return std::move(s).value();
  }();
  return *server;
}

KafkaServer::~KafkaServer() {
  if (!dir_.empty()) (void)run_script("stop '" + dir_ + "' >&2", nullptr);
}

Status KafkaServer::create_topic(const std::string& topic, int partitions) {
  return create_topics(bootstraps_, topic, partitions);
}

Status KafkaServer::kill_node(int n) { return run_script("kill-node '" + dir_ + "' " + std::to_string(n), nullptr); }

Status KafkaServer::start_node(int n) { return run_script("start-node '" + dir_ + "' " + std::to_string(n), nullptr); }

namespace {

// Partition `partition` of `topic` as the cluster's metadata tells it, given to `read`;
// false when unknown.
template <class Read>
bool with_partition(const std::string& bootstraps, const std::string& topic, int partition, Read read) {
  rd_kafka_t* rk = new_handle(RD_KAFKA_PRODUCER, {{"bootstrap.servers", bootstraps}});
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const struct rd_kafka_metadata* md = nullptr;
  bool found = false;
  if (rd_kafka_metadata(rk, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (md->topic_cnt == 1 && partition < md->topics[0].partition_cnt) {
      read(md->topics[0].partitions[partition]);
      found = true;
    }
    rd_kafka_metadata_destroy(md);
  }
  rd_kafka_topic_destroy(t);
  rd_kafka_destroy(rk);
  return found;
}

}  // namespace

int KafkaServer::leader(const std::string& topic, int partition) {
  int leader = -1;
  with_partition(bootstraps_, topic, partition, [&](const rd_kafka_metadata_partition& p) { leader = p.leader; });
  return leader;
}

int KafkaServer::replicas(const std::string& topic) {
  int n = -1;
  with_partition(bootstraps_, topic, 0, [&](const rd_kafka_metadata_partition& p) { n = p.replica_cnt; });
  return n;
}

}  // namespace idem::kafka_test

// The Kafka rows of idem_bench_runtime (see bench_runtime.cpp), on a real Kafka broker
// that scripts/broker.sh starts on 127.0.0.1 for the run.
#include <librdkafka/rdkafka.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "idem/kafka_source.hpp"
#include "idem/memory_store.hpp"
#include "idem/sqlite_store.hpp"
#include "runtime_rows.hpp"
#include "support/kafka_server.hpp"

namespace idem::bench {
namespace {

// A consumer of `group` on `topic` with librdkafka: poll up to `batch` messages, then
// one asynchronous commit of the highest offset + 1, until n; no dedup. Timed from its
// first message (after the group join).
double plain_kafka(const std::string& bootstraps, std::size_t n, std::size_t batch) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[256];
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{{"bootstrap.servers", bootstraps},
                                                                             {"group.id", "g"},
                                                                             {"enable.auto.commit", "false"},
                                                                             {"auto.offset.reset", "earliest"},
                                                                             {"queued.min.messages", "1000"}}) {
    rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err);
  }
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  rd_kafka_poll_set_consumer(rk);
  rd_kafka_topic_partition_list_t* t = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(t, "plain", RD_KAFKA_PARTITION_UA);
  rd_kafka_subscribe(rk, t);
  rd_kafka_topic_partition_list_destroy(t);
  std::size_t got = 0;
  Clock::time_point t0{};
  while (got < n) {
    rd_kafka_topic_partition_list_t* commit = rd_kafka_topic_partition_list_new(1);
    for (std::size_t i = 0; i < batch && got < n; ++i) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, i == 0 ? 1000 : 0);
      if (m == nullptr) break;
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (got++ == 0) t0 = Clock::now();
        rd_kafka_topic_partition_list_add(commit, rd_kafka_topic_name(m->rkt), m->partition)->offset = m->offset + 1;
      }
      rd_kafka_message_destroy(m);
    }
    if (commit->cnt > 0) rd_kafka_commit(rk, commit, 1);
    rd_kafka_topic_partition_list_destroy(commit);
  }
  const double r = rate(got - 1, Clock::now() - t0);
  rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  return r;
}

// idem's runtime over the Kafka source with a transactional SQLite consumer whose
// handler inserts one effect row (prepared once), 2 workers, batch b. Timed once the
// source has its first message (the group joined), which it acks itself.
double idem_kafka(const std::string& uri, std::size_t n, std::size_t batch, const std::string& db) {
  auto src = kafka::open(kafka::parse_uri(uri).value()).value();
  std::vector<Delivery> first;
  while (first.empty()) (void)src->fetch(1, Duration(1000), first);
  (void)src->ack(first[0]);
  return idem_rate(*src, n - 1, batch, db);
}

// The workers curve on Kafka: a topic of 16 partitions holding workers × 1,000 keyed
// messages, the runtime with `workers` workers over the Kafka source and the memory
// store (whose handlers run outside any lock), a handler that sleeps 1 ms. Timed from
// the first message (the group joined).
double kafka_curve_point(kafka_test::KafkaServer& cluster, std::size_t workers) {
  constexpr int kPartitions = 16;
  constexpr std::size_t kPerWorker = 1000;
  const std::string topic = "curve" + std::to_string(workers);
  const std::size_t n = workers * kPerWorker;
  (void)cluster.create_topic(topic, kPartitions);
  std::vector<OutgoingMessage> bodies;
  for (std::size_t i = 0; i < n; ++i)
    bodies.push_back({.body = topic + "-" + std::to_string(i), .key = "k" + std::to_string(i)});
  auto p = kafka::open_publisher(kafka::parse_uri(cluster.uri(topic, "")).value());
  if (!p.ok() || !(*p)->publish(bodies).ok()) return 0;
  auto src = kafka::open(kafka::parse_uri(cluster.uri(topic, "g" + topic, "session_timeout_ms=6000")).value()).value();
  std::vector<Delivery> first;
  while (first.empty()) (void)src->fetch(1, Duration(1000), first);
  (void)src->ack(first[0]);
  return sleeping_rate(*src, memory::open().value(), false, workers, n - 1, nullptr);
}

}  // namespace

void kafka_curve_rows(kafka_test::KafkaServer& cluster, std::vector<Row>& rows) {
  for (std::size_t w : {1, 4, 8, 16}) {
    rows.push_back({"kafka_sleep1ms_w" + std::to_string(w),
                    "Kafka (16 partitions), memory store, handler sleeps 1 ms, " + std::to_string(w) + " workers",
                    kafka_curve_point(cluster, w)});
  }
}

bool kafka_rows(std::size_t n, std::size_t batch, bool curve, std::vector<Row>& rows) {
  auto cluster = kafka_test::KafkaServer::start();
  if (!cluster.ok()) {
    std::fprintf(stderr, "cannot start a Kafka broker: %s\n", cluster.status().to_string().c_str());
    return false;
  }
  std::printf("kafka: broker %s (KRaft, one node, scripts/broker.sh)\n", (*cluster)->version().c_str());
  std::vector<OutgoingMessage> bodies;
  for (std::size_t i = 0; i < n; ++i) bodies.push_back({.body = "msg-" + std::to_string(i)});
  for (const char* topic : {"plain", "idem"}) {
    (void)(*cluster)->create_topic(topic, 1);
    auto p = kafka::open_publisher(kafka::parse_uri((*cluster)->uri(topic, "")).value());
    if (!p.ok() || !(*p)->publish(bodies).ok()) {
      std::fprintf(stderr, "cannot publish to %s\n", topic);
      return false;
    }
  }
  const auto dir = std::filesystem::temp_directory_path() / ("idem-bench-kafka-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  rows.push_back({"plain_kafka", "Kafka consumer: poll b + one async commit per batch, no dedup",
                  plain_kafka((*cluster)->bootstraps(), n, batch)});
  rows.push_back(
      {"idem_kafka", "runtime, Kafka source, SQLite transactional, 2 workers, batch b",
       idem_kafka((*cluster)->uri("idem", "gi", "session_timeout_ms=6000"), n, batch, (dir / "idem.db").string())});
  std::filesystem::remove_all(dir);
  if (curve) kafka_curve_rows(**cluster, rows);
  return true;
}

}  // namespace idem::bench

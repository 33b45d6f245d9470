#include "support/cluster.hpp"

#include <chrono>
#include <thread>

#include "support/client.hpp"

namespace idem::kafka_test {

rd_kafka_t* new_handle(rd_kafka_type_t type, const std::vector<std::pair<std::string, std::string>>& settings) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[256];
  for (const auto& [k, v] : settings) rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err);
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);
  if (rk == nullptr) rd_kafka_conf_destroy(conf);
  return rk;
}

int partition_count(rd_kafka_t* rk, const std::string& topic) {
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const struct rd_kafka_metadata* md = nullptr;
  int n = -1;
  if (rd_kafka_metadata(rk, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) n = md->topics[0].partition_cnt;
    rd_kafka_metadata_destroy(md);
  }
  rd_kafka_topic_destroy(t);
  return n;
}

std::string Cluster::uri(const std::string& topic, const std::string& group, const std::string& more) const {
  std::string u = "kafka://" + bootstraps_ + "/" + topic;
  std::string q = group.empty() ? "" : "group=" + group;
  if (!more.empty()) q += (q.empty() ? "" : "&") + more;
  return q.empty() ? u : u + "?" + q;
}

std::multiset<std::string> Cluster::bodies(const std::string& topic) {
  std::multiset<std::string> out;
  for (const auto& [key, body] : records(topic)) out.insert(body);
  return out;
}

std::multimap<std::string, std::string> Cluster::records(const std::string& topic) {
  std::multimap<std::string, std::string> out;
  rd_kafka_t* rk =
      new_handle(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstraps_}, {"group.id", "idem-test-reader"}});
  const int n = partition_count(rk, topic);
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(n > 0 ? n : 1);
  std::int64_t expected = 0;
  for (int p = 0; p < n; ++p) {
    std::int64_t low = 0, high = 0;
    rd_kafka_query_watermark_offsets(rk, topic.c_str(), p, &low, &high, 5000);
    expected += high - low;
    rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  rd_kafka_assign(rk, list);
  rd_kafka_topic_partition_list_destroy(list);
  for (int idle = 0; static_cast<std::int64_t>(out.size()) < expected && idle < 50;) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (m == nullptr) {
      ++idle;
      continue;
    }
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      out.emplace(std::string(m->key ? static_cast<const char*>(m->key) : "", m->key_len),
                  std::string(static_cast<const char*>(m->payload), m->len));
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return out;
}

namespace {

// The group's committed offsets of `list`'s partitions, asked again (for up to 10 s)
// while the request or any partition fails: after a node restarts, the coordinator
// answers each partition with an error until it has loaded the group's offsets, and
// such a partition's offset reads as "none committed".
bool read_committed(rd_kafka_t* rk, rd_kafka_topic_partition_list_t* list) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    bool ok = rd_kafka_committed(rk, list, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR;
    for (int p = 0; ok && p < list->cnt; ++p) ok = list->elems[p].err == RD_KAFKA_RESP_ERR_NO_ERROR;
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return false;
}

}  // namespace

std::int64_t Cluster::lag(const std::string& topic, const std::string& group) {
  rd_kafka_t* rk = new_handle(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstraps_}, {"group.id", group}});
  const int n = partition_count(rk, topic);
  std::int64_t lag = n > 0 ? 0 : -1;
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(n > 0 ? n : 1);
  for (int p = 0; p < n; ++p) rd_kafka_topic_partition_list_add(list, topic.c_str(), p);
  if (n > 0 && !read_committed(rk, list)) lag = -1;
  for (int p = 0; lag >= 0 && p < n; ++p) {
    std::int64_t low = 0, high = 0;
    if (rd_kafka_query_watermark_offsets(rk, topic.c_str(), p, &low, &high, 5000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      lag = -1;
      break;
    }
    const std::int64_t committed = list->elems[p].offset >= 0 ? list->elems[p].offset : low;
    lag += high - committed;
  }
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy(rk);
  return lag;
}

}  // namespace idem::kafka_test

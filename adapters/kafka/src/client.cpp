#include "client.hpp"

#include <spdlog/logger.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string_view>

#include "idem/backend/store_uri.hpp"

namespace idem::kafka::detail {
namespace {

// librdkafka's syslog levels: 0..3 errors, 4 warning, 5..6 notice/info, 7 debug.
void log_cb(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  auto* ctx = static_cast<Context*>(rd_kafka_opaque(rk));
  if (ctx == nullptr || ctx->log == nullptr) return;
  if (level <= 4) {
    ctx->log->warn("librdkafka {}: {}", fac, buf);
  } else {
    ctx->log->debug("librdkafka {}: {}", fac, buf);
  }
}

// A failure that waiting does not cure: the handshake, the credentials, or a TLS alert
// the broker sent (under TLS 1.3 a refused client certificate arrives as one, on the
// first read after the handshake).
bool is_refusal(rd_kafka_resp_err_t e, std::string_view reason) {
  return e == RD_KAFKA_RESP_ERR__SSL || e == RD_KAFKA_RESP_ERR__AUTHENTICATION ||
         e == RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED ||
         (e == RD_KAFKA_RESP_ERR__TRANSPORT && reason.find("SSL alert number") != std::string_view::npos);
}

void error_cb(rd_kafka_t* rk, int err, const char* reason, void*) {
  auto* ctx = static_cast<Context*>(rd_kafka_opaque(rk));
  if (ctx == nullptr) return;
  const auto e = static_cast<rd_kafka_resp_err_t>(err);
  {
    std::lock_guard lock(ctx->mu);
    ctx->last_error = reason;
    if (is_refusal(e, reason)) ctx->refusal = reason;
  }
  if (ctx->log != nullptr) ctx->log->warn("idem kafka: {}: {}", rd_kafka_err2str(e), reason);
}

void rebalance_cb(rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts, void* opaque) {
  auto* ctx = static_cast<Context*>(opaque);
  if (ctx != nullptr && ctx->rebalance != nullptr) {
    ctx->rebalance(ctx->self, rk, err, parts);
  } else {
    rd_kafka_assign(rk, err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS ? parts : nullptr);
  }
}

void dr_msg_cb(rd_kafka_t*, const rd_kafka_message_t* m, void*) {
  if (m->_private != nullptr) *static_cast<rd_kafka_resp_err_t*>(m->_private) = m->err;
}

}  // namespace

void HandleDeleter::operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }

std::string broker_list(const Options& o) {
  std::string s;
  for (const std::string& b : o.brokers) s += (s.empty() ? "" : ",") + b;
  return s;
}

StatusOr<Handle> make_handle(rd_kafka_type_t type, const Options& o, Context* ctx,
                             const std::vector<std::pair<std::string, std::string>>& settings) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[512];
  std::vector<std::pair<std::string, std::string>> all{{"bootstrap.servers", broker_list(o)},
                                                       {"log.connection.close", "false"}};
  all.insert(all.end(), settings.begin(), settings.end());
  all.insert(all.end(), o.properties.begin(), o.properties.end());
  for (const auto& [name, value] : all) {
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      std::string why = err;
      if (secret_name(name) && !value.empty()) {  // a secret's value is never shown
        for (auto at = why.find(value); at != std::string::npos; at = why.find(value, at)) {
          why.replace(at, value.size(), "***");
        }
      }
      return invalid_argument("kafka: setting " + name + ": " + why);
    }
  }
  rd_kafka_conf_set_opaque(conf, ctx);
  rd_kafka_conf_set_log_cb(conf, log_cb);
  rd_kafka_conf_set_error_cb(conf, error_cb);
  if (type == RD_KAFKA_CONSUMER) rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
  if (type == RD_KAFKA_PRODUCER) rd_kafka_conf_set_dr_msg_cb(conf, dr_msg_cb);
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);  // owns conf on success
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    return invalid_argument(std::string("kafka: cannot create a client: ") + err);
  }
  return Handle(rk);
}

namespace {

// librdkafka's last error and last refusal (TLS or authentication) on rk's handle.
std::pair<std::string, std::string> reported_errors(rd_kafka_t* rk) {
  rd_kafka_poll(rk, 0);  // serves the errors queued meanwhile (error_cb)
  auto* ctx = static_cast<Context*>(rd_kafka_opaque(rk));
  if (ctx == nullptr) return {};
  std::lock_guard lock(ctx->mu);
  return {ctx->last_error, ctx->refusal};
}

}  // namespace

Status check_reachable(rd_kafka_t* rk, const Options& o) {
  // Asked in slices, so that a refusal ends the wait at once.
  constexpr Duration kSlice{250};
  const auto deadline = std::chrono::steady_clock::now() + o.connect_timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<Duration>(deadline - std::chrono::steady_clock::now());
    const struct rd_kafka_metadata* md = nullptr;
    const rd_kafka_resp_err_t e =
        rd_kafka_metadata(rk, 0, nullptr, &md, static_cast<int>(std::clamp(left, Duration(1), kSlice).count()));
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_metadata_destroy(md);
      return ok_status();
    }
    auto [last, refusal] = reported_errors(rk);
    if (!refusal.empty())
      return failed_precondition("kafka: " + broker_list(o) + " refused the connection: " + refusal);
    if (left <= kSlice) {
      return unavailable("kafka: no broker of " + broker_list(o) + " answered within " +
                         std::to_string(o.connect_timeout.count()) + " ms (" +
                         (last.empty() ? rd_kafka_err2str(e) : last) + ")");
    }
  }
}

namespace {

// A metadata request's answer for one topic: its error and its partitions.
struct TopicAnswer {
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
  int partitions = 0;
};

// Asks with `rk` (a producer's metadata request lets a broker with
// auto.create.topics.enable create the topic).
StatusOr<TopicAnswer> ask_topic(rd_kafka_t* rk, const Options& o, const std::string& topic) {
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const struct rd_kafka_metadata* md = nullptr;
  const rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, t, &md, static_cast<int>(o.connect_timeout.count()));
  rd_kafka_topic_destroy(t);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return unavailable("kafka: metadata of " + topic + " from " + broker_list(o) + ": " + rd_kafka_err2str(e));
  }
  TopicAnswer a;
  if (md->topic_cnt == 1) a = {md->topics[0].err, md->topics[0].partition_cnt};
  rd_kafka_metadata_destroy(md);
  return a;
}

// Whether `topic` exists: any error for it reads as "not yet" (then it is created,
// where "already exists" is success).
StatusOr<bool> topic_exists(rd_kafka_t* rk, const Options& o, const std::string& topic) {
  StatusOr<TopicAnswer> a = ask_topic(rk, o, topic);
  if (!a.ok()) return a.status();
  return a->err == RD_KAFKA_RESP_ERR_NO_ERROR && a->partitions > 0;
}

}  // namespace

StatusOr<int> partition_count(rd_kafka_t* rk, const Options& o, const std::string& topic) {
  StatusOr<TopicAnswer> a = ask_topic(rk, o, topic);
  if (!a.ok()) return a.status();
  if (a->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) return 0;
  if (a->err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return unavailable("kafka: metadata of " + topic + ": " + rd_kafka_err2str(a->err));
  return a->partitions;
}

namespace {

// The parts of one topic admin request (CreateTopics, DeleteTopics) that differ.
struct AdminCall {
  const char* name;       // for messages
  rd_kafka_admin_op_t op;
  std::function<void(rd_kafka_AdminOptions_t*, rd_kafka_queue_t*)> send;
  std::function<const rd_kafka_topic_result_t**(rd_kafka_event_t*, std::size_t*)> results;
  rd_kafka_resp_err_t also_fine;  // a per-topic error that counts as success
  const char* failed;             // "create", "delete": in "cannot <failed> topic T"
};

// Sends `call`, waits up to o.connect_timeout for its answer and checks every topic's
// result.
Status run_admin(rd_kafka_t* rk, const Options& o, const AdminCall& call) {
  char err[512];
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t* opts = rd_kafka_AdminOptions_new(rk, call.op);
  rd_kafka_AdminOptions_set_request_timeout(opts, static_cast<int>(o.connect_timeout.count()), err, sizeof err);
  call.send(opts, q);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, static_cast<int>(o.connect_timeout.count()) + 1000);
  Status result = ok_status();
  if (ev == nullptr) {
    result = unavailable(std::string("kafka: no answer to ") + call.name + " from " + broker_list(o));
  } else if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    result = unavailable(std::string("kafka: ") + call.name + ": " + rd_kafka_event_error_string(ev));
  } else {
    std::size_t n = 0;
    const rd_kafka_topic_result_t** res = call.results(ev, &n);
    for (std::size_t i = 0; i < n && result.ok(); ++i) {
      const rd_kafka_resp_err_t e = rd_kafka_topic_result_error(res[i]);
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR || e == call.also_fine) continue;
      const char* msg = rd_kafka_topic_result_error_string(res[i]);
      result = failed_precondition(std::string("kafka: cannot ") + call.failed + " topic " +
                                   rd_kafka_topic_result_name(res[i]) + ": " + (msg ? msg : rd_kafka_err2str(e)));
    }
  }
  if (ev != nullptr) rd_kafka_event_destroy(ev);
  rd_kafka_AdminOptions_destroy(opts);
  rd_kafka_queue_destroy(q);
  return result;
}

// CreateTopics for `topics`, o.partitions and o.replication_factor each; "already
// exists" counts as success.
Status create_topics(rd_kafka_t* rk, const Options& o, const std::vector<std::string>& topics) {
  std::vector<rd_kafka_NewTopic_t*> news;
  char err[512];
  for (const std::string& t : topics) {
    rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(t.c_str(), o.partitions, o.replication_factor, err, sizeof err);
    if (nt == nullptr) {
      for (auto* n : news) rd_kafka_NewTopic_destroy(n);
      return invalid_argument("kafka: topic " + t + ": " + err);
    }
    news.push_back(nt);
  }
  const Status s = run_admin(
      rk, o,
      {"CreateTopics", RD_KAFKA_ADMIN_OP_CREATETOPICS,
       [&](rd_kafka_AdminOptions_t* opts, rd_kafka_queue_t* q) {
         rd_kafka_CreateTopics(rk, news.data(), news.size(), opts, q);
       },
       [](rd_kafka_event_t* ev, std::size_t* n) {
         return rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), n);
       },
       RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS, "create"});
  for (auto* n : news) rd_kafka_NewTopic_destroy(n);
  return s;
}

}  // namespace

Status ensure_topics(rd_kafka_t* rk, const Options& o, const std::vector<std::string>& topics) {
  std::vector<std::string> missing;
  for (const std::string& t : topics) {
    auto exists = topic_exists(rk, o, t);
    if (!exists.ok()) return exists.status();
    if (!*exists) missing.push_back(t);
  }
  if (missing.empty()) return ok_status();
  Status s = create_topics(rk, o, missing);
  if (s.ok()) return s;
  // A broker without CreateTopics (or that refuses it) may still create topics on
  // first use; those still missing are reported.
  std::string absent;
  for (const std::string& t : missing) {
    auto exists = topic_exists(rk, o, t);
    if (exists.ok() && !*exists) absent += (absent.empty() ? "" : ", ") + t;
  }
  if (absent.empty()) return ok_status();
  return failed_precondition("kafka: topics " + absent + " do not exist and could not be created (" + s.message() +
                             ")");
}

Status delete_topics(rd_kafka_t* rk, const Options& o, const std::vector<std::string>& topics) {
  std::vector<rd_kafka_DeleteTopic_t*> dels;
  for (const std::string& t : topics) dels.push_back(rd_kafka_DeleteTopic_new(t.c_str()));
  const Status s = run_admin(
      rk, o,
      {"DeleteTopics", RD_KAFKA_ADMIN_OP_DELETETOPICS,
       [&](rd_kafka_AdminOptions_t* opts, rd_kafka_queue_t* q) {
         rd_kafka_DeleteTopics(rk, dels.data(), dels.size(), opts, q);
       },
       [](rd_kafka_event_t* ev, std::size_t* n) {
         return rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), n);
       },
       RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, "delete"});
  for (auto* d : dels) rd_kafka_DeleteTopic_destroy(d);
  return s;
}

Status produce(rd_kafka_t* producer, const std::string& topic, const std::string& key, const std::string& body,
               const Headers& headers, rd_kafka_resp_err_t* result) {
  *result = RD_KAFKA_RESP_ERR__IN_PROGRESS;
  for (;;) {
    rd_kafka_headers_t* hdrs = rd_kafka_headers_new(headers.size());
    for (const auto& [name, value] : headers) {
      rd_kafka_header_add(hdrs, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                          static_cast<ssize_t>(value.size()));
    }
    const rd_kafka_resp_err_t e =
        rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                          RD_KAFKA_V_VALUE(const_cast<char*>(body.data()), body.size()),
                          RD_KAFKA_V_KEY(key.empty() ? nullptr : key.data(), key.size()), RD_KAFKA_V_HEADERS(hdrs),
                          RD_KAFKA_V_OPAQUE(result), RD_KAFKA_V_END);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR) return ok_status();  // hdrs now owned by the message
    rd_kafka_headers_destroy(hdrs);
    if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      return failed_precondition("kafka: produce to " + topic + ": " + rd_kafka_err2str(e));
    }
    rd_kafka_poll(producer, 100);  // serve delivery reports until there is room
  }
}

Status produce_and_wait(rd_kafka_t* producer, const Options& o, const std::string& topic, const std::string& key,
                        const std::string& body, const Headers& headers) {
  // On the heap: a report that comes after a timeout still has somewhere to write.
  auto result = std::make_unique<rd_kafka_resp_err_t>();
  if (Status s = produce(producer, topic, key, body, headers, result.get()); !s.ok()) return s;
  const auto deadline = std::chrono::steady_clock::now() + o.command_timeout;
  while (*result == RD_KAFKA_RESP_ERR__IN_PROGRESS && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_flush(producer, 100);
  }
  if (*result == RD_KAFKA_RESP_ERR__IN_PROGRESS) {
    rd_kafka_purge(producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_flush(producer, 1000);  // serves the purged message's report
    if (*result == RD_KAFKA_RESP_ERR__IN_PROGRESS) {
      (void)result.release();  // its report is still to come
      return unavailable("kafka: produce to " + topic + " not confirmed in time");
    }
  }
  if (*result != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return unavailable("kafka: produce to " + topic + " not confirmed: " + rd_kafka_err2str(*result));
  }
  return ok_status();
}

}  // namespace idem::kafka::detail

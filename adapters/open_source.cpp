// One block per broker adapter, each built when its adapter is (adapters/CMakeLists.txt).
#include "idem/open_source.hpp"

#include <string_view>

#ifdef IDEM_WITH_REDIS_STREAMS
#include "idem/redis_stream_source.hpp"
#endif
#ifdef IDEM_WITH_RABBITMQ
#include "idem/rabbitmq_source.hpp"
#endif
#ifdef IDEM_WITH_NATS
#include "idem/nats_source.hpp"
#endif
#ifdef IDEM_WITH_KAFKA
#include "idem/kafka_source.hpp"
#endif
#ifdef IDEM_WITH_PULSAR
#include "idem/pulsar_source.hpp"
#endif

namespace idem {
namespace {

bool has_scheme(std::string_view uri, std::string_view scheme) {
  return uri.size() > scheme.size() + 3 && uri.substr(0, scheme.size()) == scheme &&
         uri.substr(scheme.size(), 3) == "://";
}

Status unknown_scheme(std::string_view uri) {
  const std::size_t colon = uri.find(':');
  const std::string scheme(uri.substr(0, colon == std::string_view::npos ? 0 : colon));
  return invalid_argument("unknown broker URI scheme \"" + scheme + "\"; this idem knows:\n" + broker_uri_forms());
}

}  // namespace

StatusOr<std::unique_ptr<MessageSource>> open_source(std::string_view uri, const OpenSourceOptions& options) {
#ifdef IDEM_WITH_REDIS_STREAMS
  if (has_scheme(uri, "redis-stream") || has_scheme(uri, "rediss-stream")) {
    auto o = redis_streams::parse_uri(uri);
    if (!o.ok()) return o.status();
    if (o->group.empty()) return invalid_argument("needs ?group=NAME (the consumer group)");
    o->lease = options.lease;
    if (o->consumer.empty()) o->consumer = options.consumer_name;
    return redis_streams::open(*std::move(o));
  }
#endif
#ifdef IDEM_WITH_RABBITMQ
  if (has_scheme(uri, "amqp") || has_scheme(uri, "amqps")) {
    auto o = rabbitmq::parse_uri(uri);
    if (!o.ok()) return o.status();
    return rabbitmq::open(*std::move(o));
  }
#endif
#ifdef IDEM_WITH_NATS
  if (has_scheme(uri, "nats") || has_scheme(uri, "tls")) {
    auto o = nats::parse_uri(uri);
    if (!o.ok()) return o.status();
    if (o->durable.empty()) return invalid_argument("needs &durable=NAME (the durable consumer)");
    o->lease = options.lease;
    return nats::open(*std::move(o));
  }
#endif
#ifdef IDEM_WITH_KAFKA
  if (has_scheme(uri, "kafka")) {
    auto o = kafka::parse_uri(uri);
    if (!o.ok()) return o.status();
    if (o->group.empty()) return invalid_argument("needs ?group=NAME (the consumer group)");
    return kafka::open(*std::move(o));
  }
#endif
#ifdef IDEM_WITH_PULSAR
  if (has_scheme(uri, "pulsar-ws") || has_scheme(uri, "pulsar-wss")) {
    auto o = pulsar::parse_uri(uri);
    if (!o.ok()) return o.status();
    if (o->subscription.empty()) return invalid_argument("needs ?subscription=NAME");
    return pulsar::open(*std::move(o));
  }
#endif
  (void)options;
  return unknown_scheme(uri);
}

StatusOr<std::unique_ptr<Publisher>> open_publisher(const std::string& uri) {
#ifdef IDEM_WITH_REDIS_STREAMS
  if (has_scheme(uri, "redis-stream") || has_scheme(uri, "rediss-stream")) {
    auto o = redis_streams::parse_uri(uri);
    if (!o.ok()) return o.status();
    return redis_streams::open_publisher(*o);
  }
#endif
#ifdef IDEM_WITH_RABBITMQ
  if (has_scheme(uri, "amqp") || has_scheme(uri, "amqps")) {
    auto o = rabbitmq::parse_uri(uri);
    if (!o.ok()) return o.status();
    return rabbitmq::open_publisher(*o);
  }
#endif
#ifdef IDEM_WITH_NATS
  if (has_scheme(uri, "nats") || has_scheme(uri, "tls")) {
    auto o = nats::parse_uri(uri);
    if (!o.ok()) return o.status();
    return nats::open_publisher(*o);
  }
#endif
#ifdef IDEM_WITH_KAFKA
  if (has_scheme(uri, "kafka")) {
    auto o = kafka::parse_uri(uri);
    if (!o.ok()) return o.status();
    return kafka::open_publisher(*o);
  }
#endif
#ifdef IDEM_WITH_PULSAR
  if (has_scheme(uri, "pulsar-ws") || has_scheme(uri, "pulsar-wss")) {
    auto o = pulsar::parse_uri(uri);
    if (!o.ok()) return o.status();
    return pulsar::open_publisher(*o);
  }
#endif
  return unknown_scheme(uri);
}

Status remove_destination(std::string_view uri) {
#ifdef IDEM_WITH_REDIS_STREAMS
  if (has_scheme(uri, "redis-stream") || has_scheme(uri, "rediss-stream")) {
    auto o = redis_streams::parse_uri(uri);
    return o.ok() ? redis_streams::remove(*o) : o.status();
  }
#endif
#ifdef IDEM_WITH_RABBITMQ
  if (has_scheme(uri, "amqp") || has_scheme(uri, "amqps")) {
    auto o = rabbitmq::parse_uri(uri);
    return o.ok() ? rabbitmq::remove(*o) : o.status();
  }
#endif
#ifdef IDEM_WITH_NATS
  if (has_scheme(uri, "nats") || has_scheme(uri, "tls")) {
    auto o = nats::parse_uri(uri);
    return o.ok() ? nats::remove(*o) : o.status();
  }
#endif
#ifdef IDEM_WITH_KAFKA
  if (has_scheme(uri, "kafka")) {
    auto o = kafka::parse_uri(uri);
    return o.ok() ? kafka::remove(*o) : o.status();
  }
#endif
#ifdef IDEM_WITH_PULSAR
  if (has_scheme(uri, "pulsar-ws") || has_scheme(uri, "pulsar-wss")) {
    auto o = pulsar::parse_uri(uri);
    return o.ok() ? pulsar::remove(*o) : o.status();
  }
#endif
  return unknown_scheme(uri);
}

StatusOr<std::string> with_destination_suffix(std::string_view uri, std::string_view suffix) {
  const std::size_t colon = uri.find("://");
  const std::string scheme(uri.substr(0, colon == std::string_view::npos ? 0 : colon));
  if (broker_uri_forms().find("  " + scheme + "://") == std::string::npos) return unknown_scheme(uri);
  const std::size_t q = uri.find('?');
  std::string base(uri.substr(0, q));
  const bool named_by_path =
      scheme == "redis-stream" || scheme == "rediss-stream" || scheme == "kafka" || scheme.starts_with("pulsar-ws");
  if (named_by_path) {
    const std::size_t slash = base.rfind('/');
    if (slash == std::string::npos || slash < colon + 3 || slash + 1 == base.size())
      return invalid_argument("the URI names no " + std::string(scheme.starts_with("redis") ? "stream" : "topic"));
    base += suffix;
  }
  if (q == std::string_view::npos) return base;
  std::string query;
  for (std::string_view rest = uri.substr(q + 1); !rest.empty();) {
    const std::size_t amp = rest.find('&');
    const std::string_view param = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const std::string_view key = param.substr(0, param.find('='));
    const bool names_destination = key == "queue" || key == "stream" || key == "subject" || key == "dlq" ||
                                   key == "dlq_stream" || key == "retry_topic";
    query += (query.empty() ? "" : "&") + std::string(param);
    if (names_destination && param.size() > key.size() + 1) query += suffix;
  }
  return base + "?" + query;
}

std::string broker_uri_forms() {
  std::string help;
#ifdef IDEM_WITH_REDIS_STREAMS
  help += "  redis-stream://[[USER:]PASSWORD@]HOST:PORT/STREAM?group=G[&consumer=NAME][&db=N]\n";
  help += "  rediss-stream://[[USER:]PASSWORD@]HOST:PORT/STREAM?group=G[&…]  (redis-stream:// over TLS)\n";
#endif
#ifdef IDEM_WITH_RABBITMQ
  help += "  amqp://USER:PASSWORD@HOST:PORT/VHOST?queue=Q[&queue_type=quorum][&prefetch=N]  (%2F: vhost /)\n";
  help += "  amqps://USER:PASSWORD@HOST:PORT/VHOST?queue=Q[&…]  (amqp:// over TLS)\n";
#endif
#ifdef IDEM_WITH_NATS
  help += "  nats://[USER:PASSWORD@]HOST:PORT?stream=S&durable=D[&subject=SUBJ][&dlq=SUBJ][&max_ack_pending=N]\n";
  help += "  tls://[USER:PASSWORD@]HOST:PORT?stream=S&durable=D[&…]  (nats:// over TLS)\n";
#endif
#ifdef IDEM_WITH_KAFKA
  help += "  kafka://HOST:PORT[,HOST:PORT...]/TOPIC?group=G[&partitions=N][&session_timeout_ms=N]\n";
#endif
#ifdef IDEM_WITH_PULSAR
  help += "  pulsar-ws://HOST:WEB_PORT/TENANT/NAMESPACE/TOPIC?subscription=S[&type=shared|key_shared|failover|exclusive]\n"
          "      [&dlq=TOPIC][&token=T][&ack_timeout_ms=N][&nack_delay_ms=N]\n";
  help += "  pulsar-wss://HOST:WEB_TLS_PORT/TENANT/NAMESPACE/TOPIC?subscription=S[&…]  (pulsar-ws:// over TLS)\n";
#endif
  return help;
}

}  // namespace idem

// pulsar-ws[s]://HOST:PORT/TENANT/NAMESPACE/TOPIC?subscription=S&… → Options.
#include <array>

#include "idem/backend/store_uri.hpp"
#include "idem/backend/tls_options.hpp"
#include "idem/pulsar_source.hpp"

namespace idem::pulsar {
namespace {

Status bad(const std::string& what) { return invalid_argument("pulsar URI: " + what); }

constexpr std::array<std::pair<std::string_view, SubscriptionType>, 4> kTypes{{
    {"shared", SubscriptionType::kShared},
    {"key_shared", SubscriptionType::kKeyShared},
    {"failover", SubscriptionType::kFailover},
    {"exclusive", SubscriptionType::kExclusive},
}};

// "TENANT/NAMESPACE/TOPIC" into o.
Status take_path(std::string_view path, Options& o) {
  std::array<std::string, 3> parts;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::size_t slash = i + 1 < parts.size() ? path.find('/') : std::string_view::npos;
    parts[i] = std::string(path.substr(0, slash));
    if (parts[i].empty() || parts[i].find('/') != std::string::npos) return bad("want /TENANT/NAMESPACE/TOPIC");
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
  }
  o.tenant = parts[0];
  o.name_space = parts[1];
  o.topic = parts[2];
  return ok_status();
}

// Reads the millisecond parameter `name` into *d, in 1..max (0 allowed when zero_ok).
Status take_ms(const StoreUri& u, const char* name, Duration* d, bool zero_ok) {
  auto v = u.param_uint(name, static_cast<std::uint64_t>(d->count()));
  if (!v.ok()) return v.status();
  if ((*v == 0 && !zero_ok) || *v > 3'600'000) {
    return bad(std::string(name) + " must be in " + (zero_ok ? "0" : "1") + "..3600000");
  }
  *d = Duration(static_cast<std::int64_t>(*v));
  return ok_status();
}

Status take_type(const StoreUri& u, Options& o) {
  auto t = u.param("type");
  if (!t) return ok_status();
  for (const auto& [name, type] : kTypes) {
    if (*t == name) {
      o.type = type;
      return ok_status();
    }
  }
  return bad("type must be shared, key_shared, failover or exclusive");
}

Status take_params(const StoreUri& u, Options& o) {
  if (Status s = u.check_params({"subscription", "type", "dlq", "token", "ack_timeout_ms", "nack_delay_ms",
                                 "receiver_queue", "connect_timeout_ms"},
                                kTlsParams);
      !s.ok()) {
    return s;
  }
  auto tls = parse_tls(u, u.scheme == "pulsar-wss");
  if (!tls.ok()) return bad(tls.status().message());
  o.tls = std::move(tls).value();
  if (auto v = u.param("subscription")) o.subscription = *v;
  if (auto v = u.param("dlq")) o.dead_letter_topic = *v;
  if (auto v = u.param("token")) o.token = *v;
  if (Status s = take_type(u, o); !s.ok()) return s;
  for (Status s : {take_ms(u, "ack_timeout_ms", &o.ack_timeout, true), take_ms(u, "nack_delay_ms", &o.nack_delay, false),
                   take_ms(u, "connect_timeout_ms", &o.connect_timeout, false)}) {
    if (!s.ok()) return s;
  }
  auto queue = u.param_uint("receiver_queue", o.receiver_queue);
  if (!queue.ok()) return queue.status();
  if (*queue == 0 || *queue > 1000) return bad("receiver_queue must be in 1..1000");
  o.receiver_queue = static_cast<std::uint32_t>(*queue);
  return ok_status();
}

// parse_uri() before its errors lose the URI's token.
StatusOr<Options> parse_uri_unscrubbed(std::string_view uri) {
  auto u = StoreUri::parse(uri);
  if (!u.ok())
    return bad("not a URI (want pulsar-ws://HOST:PORT/TENANT/NAMESPACE/TOPIC?subscription=S): " + u.status().message());
  if (u->scheme != "pulsar-ws" && u->scheme != "pulsar-wss")
    return bad("scheme must be pulsar-ws:// or pulsar-wss:// (TLS)");
  std::string_view rest = u->body;
  if (rest.substr(0, 2) != "//") return bad("want pulsar-ws://HOST:PORT/TENANT/NAMESPACE/TOPIC");
  rest.remove_prefix(2);
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return bad("want /TENANT/NAMESPACE/TOPIC after HOST:PORT");
  if (rest.substr(0, slash).find('@') != std::string_view::npos) return bad("no user part (give a token with ?token=)");
  auto hp = parse_host_port(rest.substr(0, slash));
  if (!hp.ok()) return bad(hp.status().message());
  Options o;
  o.host = std::move(hp->host);
  o.port = hp->port;
  if (Status s = take_path(rest.substr(slash + 1), o); !s.ok()) return s;
  if (Status s = take_params(*u, o); !s.ok()) return s;
  return o;
}

}  // namespace

StatusOr<Options> parse_uri(std::string_view uri) {
  auto o = parse_uri_unscrubbed(uri);
  if (!o.ok()) return Status(o.status().code(), scrub_secrets(o.status().message(), uri));
  return o;
}

}  // namespace idem::pulsar

// kafka://HOST:PORT[,HOST:PORT…]/TOPIC?group=G&… → Options.
#include "idem/backend/store_uri.hpp"
#include "idem/kafka_source.hpp"

namespace idem::kafka {
namespace {

Status bad(const std::string& what) { return invalid_argument("kafka URI: " + what); }

Status take_brokers(std::string_view list, Options& o) {
  for (;;) {
    const auto comma = list.find(',');
    const std::string_view hp = list.substr(0, comma);
    // Echoed: credentials are query parameters, never in the broker list (an '@' is refused).
    if (auto parsed = parse_host_port(hp); !parsed.ok())
      return bad("\"" + std::string(hp) + "\": " + parsed.status().message());
    o.brokers.emplace_back(hp);
    if (comma == std::string_view::npos) return ok_status();
    list.remove_prefix(comma + 1);
  }
}

Status take_ms(const StoreUri& u, const char* name, Duration& d) {
  auto v = u.param_uint(name, static_cast<std::uint64_t>(d.count()));
  if (!v.ok()) return v.status();
  if (*v == 0 || *v > 3'600'000) return bad(std::string(name) + " must be in 1..3600000");
  d = Duration(static_cast<std::int64_t>(*v));
  return ok_status();
}

// The URI's security parameters and their librdkafka names.
constexpr std::pair<const char*, const char*> kSecurity[] = {{"security_protocol", "security.protocol"},
                                                             {"sasl_mechanism", "sasl.mechanisms"},
                                                             {"sasl_username", "sasl.username"},
                                                             {"sasl_password", "sasl.password"}};
constexpr std::string_view kRdkafka = "rdkafka.";

// The librdkafka name of security parameter `name`; null when it is not one.
const char* security_property(std::string_view name) {
  for (const auto& [param, property] : kSecurity)
    if (name == param) return property;
  return nullptr;
}

// Moves the security and "rdkafka." parameters of `u` into o.properties.
Status take_properties(StoreUri& u, Options& o) {
  std::vector<std::pair<std::string, std::string>> rest;
  for (auto& [name, value] : u.params) {
    if (name.starts_with(kRdkafka)) {
      if (name.size() == kRdkafka.size()) return bad("rdkafka. needs a property name after it");
      o.properties.emplace_back(name.substr(kRdkafka.size()), value);
    } else if (const char* property = security_property(name)) {
      o.properties.emplace_back(property, value);
    } else {
      rest.emplace_back(std::move(name), std::move(value));
    }
  }
  u.params = std::move(rest);
  return ok_status();
}

Status take_params(StoreUri u, Options& o) {
  if (Status s = take_properties(u, o); !s.ok()) return s;
  if (Status s = u.check_params({"group", "retry_topic", "dlq", "partitions", "replication_factor",
                                 "session_timeout_ms", "connect_timeout_ms"});
      !s.ok()) {
    return s;
  }
  if (auto g = u.param("group")) o.group = *g;
  if (auto r = u.param("retry_topic")) o.retry_topic = *r;
  if (auto d = u.param("dlq")) o.dead_letter_topic = *d;
  auto parts = u.param_uint("partitions", static_cast<std::uint64_t>(o.partitions));
  if (!parts.ok()) return parts.status();
  if (*parts == 0 || *parts > 100'000) return bad("partitions must be in 1..100000");
  o.partitions = static_cast<int>(*parts);
  if (u.param("replication_factor")) {
    auto rf = u.param_uint("replication_factor", 1);
    if (!rf.ok()) return rf.status();
    if (*rf == 0 || *rf > 32'767) return bad("replication_factor must be in 1..32767");
    o.replication_factor = static_cast<int>(*rf);
  }
  if (Status s = take_ms(u, "session_timeout_ms", o.session_timeout); !s.ok()) return s;
  return take_ms(u, "connect_timeout_ms", o.connect_timeout);
}

}  // namespace

namespace {

// parse_uri() before its errors lose a password written into the URI.
StatusOr<Options> parse_uri_unscrubbed(std::string_view uri) {
  auto u = StoreUri::parse(uri);
  if (!u.ok()) return bad("not a URI (want kafka://HOST:PORT/TOPIC?group=G): " + u.status().message());
  if (u->scheme != "kafka") return bad("scheme must be kafka://");
  std::string_view rest = u->body;
  if (rest.substr(0, 2) != "//") return bad("want kafka://HOST:PORT/TOPIC?group=G");
  rest.remove_prefix(2);
  if (rest.find('@') != std::string_view::npos) return bad("credentials in the URI are not supported");
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size()) return bad("no /TOPIC after HOST:PORT");
  Options o;
  if (Status s = take_brokers(rest.substr(0, slash), o); !s.ok()) return s;
  o.topic = std::string(rest.substr(slash + 1));
  if (o.topic.find('/') != std::string::npos) return bad("a topic name has no '/'");
  if (Status s = take_params(*std::move(u), o); !s.ok()) return s;
  return o;
}

}  // namespace

StatusOr<Options> parse_uri(std::string_view uri) {
  auto o = parse_uri_unscrubbed(uri);
  if (!o.ok()) return Status(o.status().code(), scrub_secrets(o.status().message(), uri));
  return o;
}

}  // namespace idem::kafka

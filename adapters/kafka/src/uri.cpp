// kafka://HOST:PORT[,HOST:PORT…]/TOPIC?group=G&… → Options.
#include "idem/backend/store_uri.hpp"
#include "idem/backend/tls_options.hpp"
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

constexpr std::string_view kRdkafka = "rdkafka.";

using Properties = std::vector<std::pair<std::string, std::string>>;

// Moves each "rdkafka.NAME" parameter of `u` into `out`.
Status take_passthrough(StoreUri& u, Properties& out) {
  std::vector<std::pair<std::string, std::string>> rest;
  for (auto& [name, value] : u.params) {
    if (!name.starts_with(kRdkafka)) {
      rest.emplace_back(std::move(name), std::move(value));
    } else if (name.size() == kRdkafka.size()) {
      return bad("rdkafka. needs a property name after it");
    } else {
      out.emplace_back(name.substr(kRdkafka.size()), value);
    }
  }
  u.params = std::move(rest);
  return ok_status();
}

// librdkafka's ssl.* properties for `t` (enabled). Verification is spelled out, not left
// to librdkafka's defaults: the certificate and the host name or address, unless insecure.
void add_tls(const TlsOptions& t, Options& o) {
  auto& p = o.properties;
  if (!t.ca_file.empty()) p.emplace_back("ssl.ca.location", t.ca_file);
  if (!t.cert_file.empty()) p.emplace_back("ssl.certificate.location", t.cert_file);
  if (!t.key_file.empty()) p.emplace_back("ssl.key.location", t.key_file);
  if (!t.key_password.empty()) p.emplace_back("ssl.key.password", t.key_password);
  p.emplace_back("enable.ssl.certificate.verification", t.insecure ? "false" : "true");
  p.emplace_back("ssl.endpoint.identification.algorithm", t.insecure ? "none" : "https");
}

// security.protocol, sasl.* and ssl.* from the URI's security and TLS parameters. The
// protocol follows from the others when not given (TLS → SSL, SASL → SASL_PLAINTEXT,
// both → SASL_SSL); a given one must agree with them.
Status take_security(const StoreUri& u, Options& o) {
  const auto mechanism = u.param("sasl_mechanism");
  const auto user = u.param("sasl_username");
  const auto password = u.param("sasl_password");
  if ((user || password) && !mechanism) return bad("sasl_username needs sasl_mechanism (PLAIN, SCRAM-SHA-256, …)");
  const auto given = u.param("security_protocol");
  const bool given_tls = given && (*given == "SSL" || *given == "SASL_SSL");
  auto tls = parse_tls(u, given_tls);
  if (!tls.ok()) return bad(tls.status().message());
  const bool sasl = mechanism.has_value();
  const std::string inferred = std::string(sasl ? "SASL_" : "") + (tls->enabled ? "SSL" : "PLAINTEXT");
  if (given && *given != inferred && (given_tls || *given == "PLAINTEXT" || *given == "SASL_PLAINTEXT"))
    return bad("security_protocol=" + *given + " disagrees with the sasl_mechanism and tls parameters, which make it " +
               inferred);
  if (given || sasl || tls->enabled) o.properties.emplace_back("security.protocol", given.value_or(inferred));
  if (sasl) o.properties.emplace_back("sasl.mechanisms", *mechanism);
  if (user) o.properties.emplace_back("sasl.username", *user);
  if (password) o.properties.emplace_back("sasl.password", *password);
  if (tls->enabled) add_tls(*tls, o);
  return ok_status();
}

Status take_params(StoreUri u, Options& o) {
  Properties passthrough;  // set last: a property given by name overrides idem's
  if (Status s = take_passthrough(u, passthrough); !s.ok()) return s;
  if (Status s = u.check_params({"group", "retry_topic", "dlq", "partitions", "replication_factor",
                                 "session_timeout_ms", "connect_timeout_ms", "security_protocol",
                                 "sasl_mechanism", "sasl_username", "sasl_password"},
                                kTlsParams);
      !s.ok()) {
    return s;
  }
  if (Status s = take_security(u, o); !s.ok()) return s;
  o.properties.insert(o.properties.end(), passthrough.begin(), passthrough.end());
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

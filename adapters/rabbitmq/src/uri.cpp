// amqp[s]://[USER[:PASSWORD]@]HOST[:PORT][/VHOST]?queue=Q&… → Options.
#include "idem/backend/store_uri.hpp"
#include "idem/backend/tls_options.hpp"
#include "idem/rabbitmq_source.hpp"

namespace idem::rabbitmq {
namespace {

Status bad(const std::string& what) { return invalid_argument("amqp URI: " + what); }

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `in` into *out; false on a bad escape.
bool decode(std::string_view in, std::string* out) {
  out->clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// Reads "[USER[:PASSWORD]@]" off the front of `rest` into o, each part %-decoded (this
// parser splits the URI before decoding it).
Status take_userinfo(std::string_view& rest, Options& o) {
  const auto u = idem::take_userinfo(&rest);
  if (!u) return ok_status();
  if (!decode(u->user, &o.user)) return bad("bad %-escape in the user");
  o.password.clear();
  if (u->password && !decode(*u->password, &o.password)) return bad("bad %-escape in the password");
  if (o.user.empty()) return bad("empty user");
  return ok_status();
}

// "HOST[:PORT]": the port is optional here (AMQP's default).
Status take_host_port(std::string_view hostport, Options& o) {
  if (hostport.empty() || hostport.front() == ':') return bad("no host");
  if (hostport.find(':') == std::string_view::npos) {
    o.host = std::string(hostport);
    return ok_status();
  }
  auto hp = parse_host_port(hostport);
  if (!hp.ok()) return bad(hp.status().message());
  o.host = std::move(hp->host);
  o.port = hp->port;
  return ok_status();
}

Status take_params(const StoreUri& u, Options& o) {
  if (Status s = u.check_params(
          {"queue", "queue_type", "dlq", "prefetch", "connect_timeout_ms", "password", "sasl_mechanism"}, kTlsParams);
      !s.ok())
    return s;
  if (auto p = u.param("password")) {
    if (!o.password.empty()) return bad("the password is given twice (in the user part and as a parameter)");
    if (o.user.empty()) return bad("a password parameter needs USER@ before the host");
    o.password = *p;
  }
  if (auto q = u.param("queue")) o.queue = *q;
  if (o.queue.empty()) return bad("needs ?queue=NAME");
  if (auto t = u.param("queue_type")) o.queue_type = *t;
  if (o.queue_type != "classic" && o.queue_type != "quorum") return bad("queue_type must be classic or quorum");
  if (auto d = u.param("dlq")) o.dead_letter_queue = *d;
  auto prefetch = u.param_uint("prefetch", 0);
  auto connect = u.param_uint("connect_timeout_ms", static_cast<std::uint64_t>(o.connect_timeout.count()));
  for (const Status& s : {prefetch.status(), connect.status()})
    if (!s.ok()) return s;
  if (*prefetch > 65535) return bad("prefetch must be in 0..65535");
  if (*connect == 0 || *connect > 3'600'000) return bad("connect_timeout_ms must be in 1..3600000");
  o.prefetch = static_cast<std::uint16_t>(*prefetch);
  o.connect_timeout = Duration(static_cast<std::int64_t>(*connect));
  return ok_status();
}

// sasl_mechanism=PLAIN (default) or EXTERNAL (by the client certificate alone).
Status take_mechanism(const StoreUri& u, bool named_user, Options& o) {
  const std::string m = u.param("sasl_mechanism").value_or("PLAIN");
  if (m == "PLAIN") return ok_status();
  if (m != "EXTERNAL") return bad("sasl_mechanism must be PLAIN or EXTERNAL");
  if (o.tls.cert_file.empty()) return bad("sasl_mechanism=EXTERNAL needs a client certificate (tls_cert, tls_key)");
  if (named_user || u.param("password"))
    return bad("sasl_mechanism=EXTERNAL takes the user from the certificate: no user or password");
  o.external_auth = true;
  o.user.clear();
  o.password.clear();
  return ok_status();
}

// parse_uri() before its errors lose the URI's password.
StatusOr<Options> parse_uri_unscrubbed(std::string_view uri) {
  const bool tls_scheme = uri.starts_with("amqps://");
  const std::string_view kScheme = tls_scheme ? "amqps://" : "amqp://";
  if (!uri.starts_with(kScheme)) return bad("want amqp://USER:PASSWORD@HOST:PORT/VHOST?queue=Q (or amqps://)");
  const auto q = uri.find('?');
  // The parameters only: the rest is split here, before any decoding.
  auto u = StoreUri::parse("amqp:" + std::string(q == std::string_view::npos ? "" : uri.substr(q)));
  if (!u.ok()) return bad("malformed parameters: " + u.status().message());
  std::string_view rest =
      uri.substr(kScheme.size(), q == std::string_view::npos ? std::string_view::npos : q - kScheme.size());
  Options o;
  o.port = 0;  // until the URI gives one
  const bool rest_had_user = rest.substr(0, rest.find('/')).find('@') != std::string_view::npos;
  if (Status s = take_userinfo(rest, o); !s.ok()) return s;
  const auto slash = rest.find('/');
  if (Status s = take_host_port(rest.substr(0, slash), o); !s.ok()) return s;
  if (slash != std::string_view::npos && slash + 1 < rest.size()) {
    if (!decode(rest.substr(slash + 1), &o.vhost)) return bad("bad %-escape in the vhost");
  }
  if (Status s = take_params(*u, o); !s.ok()) return s;
  auto tls = parse_tls(*u, tls_scheme);
  if (!tls.ok()) return bad(tls.status().message());
  o.tls = std::move(tls).value();
  if (Status s = take_mechanism(*u, rest_had_user, o); !s.ok()) return s;
  if (o.port == 0) o.port = o.tls.enabled ? 5671 : 5672;
  return o;
}

}  // namespace

StatusOr<Options> parse_uri(std::string_view uri) {
  auto o = parse_uri_unscrubbed(uri);
  if (!o.ok()) return Status(o.status().code(), scrub_secrets(o.status().message(), uri));
  return o;
}

}  // namespace idem::rabbitmq

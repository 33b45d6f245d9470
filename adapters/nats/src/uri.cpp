// nats://[USER:PASSWORD@]HOST:PORT?stream=S&durable=D&subject=SUBJ&… → Options.
#include "idem/backend/store_uri.hpp"
#include "idem/nats_source.hpp"

namespace idem::nats {
namespace {

Status bad(const std::string& what) { return invalid_argument("nats URI: " + what); }

// Reads "USER:PASSWORD@" off the front of `rest` into o.
Status take_userinfo(std::string_view& rest, Options& o) {
  auto u = idem::take_userinfo(&rest);
  if (!u) return ok_status();
  if (!u->password) return bad("want USER:PASSWORD@ before the host");
  if (u->user.empty()) return bad("empty user");
  o.user = std::move(u->user);
  o.password = std::move(*u->password);
  return ok_status();
}

Status take_host_port(std::string_view hostport, Options& o) {
  auto hp = parse_host_port(hostport);
  if (!hp.ok()) return bad(hp.status().message());
  o.host = std::move(hp->host);
  o.port = hp->port;
  return ok_status();
}

Status take_params(const StoreUri& u, Options& o) {
  if (Status s = u.check_params(
          {"stream", "durable", "subject", "dlq", "dlq_stream", "max_ack_pending", "connect_timeout_ms"});
      !s.ok()) {
    return s;
  }
  if (auto v = u.param("stream")) o.stream = *v;
  if (auto v = u.param("durable")) o.durable = *v;
  if (auto v = u.param("subject")) o.subject = *v;
  if (auto v = u.param("dlq")) o.dead_letter_subject = *v;
  if (auto v = u.param("dlq_stream")) o.dead_letter_stream = *v;
  auto pending = u.param_uint("max_ack_pending", static_cast<std::uint64_t>(o.max_ack_pending));
  auto connect = u.param_uint("connect_timeout_ms", static_cast<std::uint64_t>(o.connect_timeout.count()));
  for (const Status& s : {pending.status(), connect.status()})
    if (!s.ok()) return s;
  if (*pending == 0 || *pending > 10'000'000) return bad("max_ack_pending must be in 1..10000000");
  if (*connect == 0 || *connect > 3'600'000) return bad("connect_timeout_ms must be in 1..3600000");
  o.max_ack_pending = static_cast<std::int64_t>(*pending);
  o.connect_timeout = Duration(static_cast<std::int64_t>(*connect));
  if (o.stream.empty()) return bad("needs ?stream=NAME");
  return ok_status();
}

// parse_uri() before its errors lose the URI's password.
StatusOr<Options> parse_uri_unscrubbed(std::string_view uri) {
  auto u = StoreUri::parse(uri);
  if (!u.ok()) return bad("not a URI (want nats://HOST:PORT?stream=S&durable=D)");
  if (u->scheme != "nats") return bad("scheme must be nats://");
  std::string_view rest = u->body;
  if (rest.substr(0, 2) != "//") return bad("want nats://HOST:PORT?stream=S&durable=D");
  rest.remove_prefix(2);
  Options o;
  if (Status s = take_userinfo(rest, o); !s.ok()) return s;
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) return bad("no path after HOST:PORT (name the stream with ?stream=)");
  if (Status s = take_host_port(rest, o); !s.ok()) return s;
  if (Status s = take_params(*u, o); !s.ok()) return s;
  return o;
}

}  // namespace

StatusOr<Options> parse_uri(std::string_view uri) {
  auto o = parse_uri_unscrubbed(uri);
  if (!o.ok()) return Status(o.status().code(), scrub_secrets(o.status().message(), uri));
  return o;
}

}  // namespace idem::nats

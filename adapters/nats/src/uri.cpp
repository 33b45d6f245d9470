// nats://[USER:PASSWORD@]HOST:PORT?stream=S&durable=D&subject=SUBJ&… → Options.
#include "idem/backend/store_uri.hpp"
#include "idem/backend/tls_options.hpp"
#include "idem/nats_source.hpp"

namespace idem::nats {
namespace {

Status bad(const std::string& what) { return invalid_argument("nats URI: " + what); }

// Reads "USER:PASSWORD@" off the front of `rest` into o, or "USER@" with the password
// as the parameter (password_file=, password_env=).
Status take_userinfo(std::string_view& rest, const StoreUri& uri, Options& o) {
  auto c = credentials(idem::take_userinfo(&rest), uri, /*lone_is_password=*/false);
  if (!c.ok()) return bad(c.status().message());
  if (c->user.empty() && !c->password) return ok_status();
  if (!c->password) return bad("want USER:PASSWORD@ before the host");
  if (c->user.empty()) return bad("a password needs a user: USER@ before the host");
  o.user = std::move(c->user);
  o.password = std::move(*c->password);
  return ok_status();
}

Status take_host_port(std::string_view hostport, Options& o) {
  auto hp = parse_host_port(hostport);
  if (!hp.ok()) return bad(hp.status().message());
  o.host = std::move(hp->host);
  o.port = hp->port;
  return ok_status();
}

// The token, NKey or credentials file, at most one of them and of a password.
Status take_authentication(const StoreUri& u, Options& o) {
  o.token = u.param("token").value_or("");
  o.nkey = u.param("nkey").value_or("");
  o.nkey_seed_file = u.param("nkey_seed_file").value_or("");
  o.credentials_file = u.param("creds").value_or("");
  if (o.nkey.empty() != o.nkey_seed_file.empty()) return bad("nkey and nkey_seed_file go together");
  const int ways = !o.user.empty() + !o.token.empty() + !o.nkey.empty() + !o.credentials_file.empty();
  if (ways > 1) return bad("give one of a user and password, a token, an NKey and a credentials file");
  return ok_status();
}

Status take_params(const StoreUri& u, Options& o) {
  if (Status s = u.check_params({"stream", "durable", "subject", "dlq", "dlq_stream", "max_ack_pending",
                                 "connect_timeout_ms", "password", "token", "nkey", "nkey_seed_file", "creds"},
                                kTlsParams);
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
  return take_authentication(u, o);
}

// parse_uri() before its errors lose the URI's password.
StatusOr<Options> parse_uri_unscrubbed(std::string_view uri) {
  auto u = StoreUri::parse(uri);
  if (!u.ok()) return bad("not a URI (want nats://HOST:PORT?stream=S&durable=D): " + u.status().message());
  if (u->scheme != "nats" && u->scheme != "tls") return bad("scheme must be nats:// or tls://");
  std::string_view rest = u->body;
  if (rest.substr(0, 2) != "//") return bad("want nats://HOST:PORT?stream=S&durable=D");
  rest.remove_prefix(2);
  Options o;
  if (Status s = take_userinfo(rest, *u, o); !s.ok()) return s;
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) return bad("no path after HOST:PORT (name the stream with ?stream=)");
  if (Status s = take_host_port(rest, o); !s.ok()) return s;
  if (Status s = take_params(*u, o); !s.ok()) return s;
  auto tls = parse_tls(*u, u->scheme == "tls");
  if (!tls.ok()) return bad(tls.status().message());
  if (!tls->key_password.empty())
    return bad("nats.c reads only an unencrypted tls_key; give one readable by idem's user alone");
  o.tls = std::move(tls).value();
  return o;
}

}  // namespace

StatusOr<Options> parse_uri(std::string_view uri) {
  auto o = parse_uri_unscrubbed(uri);
  if (!o.ok()) return Status(o.status().code(), scrub_secrets(o.status().message(), uri));
  return o;
}

}  // namespace idem::nats

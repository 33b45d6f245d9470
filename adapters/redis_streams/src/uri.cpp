// redis[s]-stream://[[USER:]PASSWORD@]HOST:PORT/STREAM?group=G&… → Options.
#include "idem/backend/store_uri.hpp"
#include "idem/backend/tls_options.hpp"
#include "idem/redis_stream_source.hpp"

namespace idem::redis_streams {
namespace {

Status bad(const std::string& what) { return invalid_argument("redis-stream URI: " + what); }

// Reads "[[USER:]PASSWORD@]" off the front of `rest` into o: without a ':' the whole
// user part is the password, as redis-cli -u reads it.
Status take_userinfo(std::string_view& rest, const StoreUri& uri, Options& o) {
  auto c = credentials(idem::take_userinfo(&rest), uri, /*lone_is_password=*/true);
  if (!c.ok()) return bad(c.status().message());
  o.user = std::move(c->user);
  o.password = c->password.value_or("");
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
  if (Status s = u.check_params({"group", "consumer", "db", "dlq", "connect_timeout_ms", "claim_every_ms", "password"},
                                kTlsParams);
      !s.ok()) {
    return s;
  }
  auto tls = parse_tls(u, u.scheme == "rediss-stream");
  if (!tls.ok()) return bad(tls.status().message());
  o.tls = std::move(tls).value();
  if (auto g = u.param("group")) o.group = *g;
  if (auto c = u.param("consumer")) o.consumer = *c;
  if (auto d = u.param("dlq")) o.dead_letter_stream = *d;
  auto db = u.param_uint("db", 0);
  auto connect = u.param_uint("connect_timeout_ms", static_cast<std::uint64_t>(o.connect_timeout.count()));
  auto claim = u.param_uint("claim_every_ms", static_cast<std::uint64_t>(o.claim_every.count()));
  for (const Status& s : {db.status(), connect.status(), claim.status()})
    if (!s.ok()) return s;
  if (*db > 1'000'000) return bad("db out of range");
  if (*connect == 0 || *connect > 3'600'000) return bad("connect_timeout_ms must be in 1..3600000");
  if (*claim == 0 || *claim > 3'600'000) return bad("claim_every_ms must be in 1..3600000");
  o.db = static_cast<int>(*db);
  o.connect_timeout = Duration(static_cast<std::int64_t>(*connect));
  o.claim_every = Duration(static_cast<std::int64_t>(*claim));
  return ok_status();
}

// parse_uri() before its errors lose the URI's password.
StatusOr<Options> parse_uri_unscrubbed(std::string_view uri) {
  auto u = StoreUri::parse(uri);
  if (!u.ok()) return bad("not a URI (want redis-stream://HOST:PORT/STREAM?group=G): " + u.status().message());
  if (u->scheme != "redis-stream" && u->scheme != "rediss-stream")
    return bad("scheme must be redis-stream:// or rediss-stream:// (TLS)");
  std::string_view rest = u->body;
  if (rest.substr(0, 2) != "//") return bad("want redis-stream://HOST:PORT/STREAM?group=G");
  rest.remove_prefix(2);
  Options o;
  if (Status s = take_userinfo(rest, *u, o); !s.ok()) return s;
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size()) return bad("no /STREAM after HOST:PORT");
  if (Status s = take_host_port(rest.substr(0, slash), o); !s.ok()) return s;
  o.stream = std::string(rest.substr(slash + 1));
  if (Status s = take_params(*u, o); !s.ok()) return s;
  return o;
}

}  // namespace

StatusOr<Options> parse_uri(std::string_view uri) {
  auto o = parse_uri_unscrubbed(uri);
  if (!o.ok()) return Status(o.status().code(), scrub_secrets(o.status().message(), uri));
  return o;
}

}  // namespace idem::redis_streams

// Opening the Redis store: options, URI, connections and scripts.
#include <charconv>

#include "cluster/cluster_executor.hpp"
#include "idem/backend/tls_options.hpp"
#include "redis_store_impl.hpp"
#include "tls_context.hpp"

namespace idem::redis {
namespace detail {

Status RedisStoreImpl::load_scripts() {
  for (Script* s :
       {&claim_, &commit_, &release_, &extend_, &inspect_, &claim_many_, &commit_many_, &claim_entity_, &commit_entity_,
        &write_entity_, &buffer_put_, &buffer_read_, &buffer_remove_, &buffer_key_info_, &buffer_account_}) {
    auto r = ex_->run_anywhere({"SCRIPT", "LOAD", s->body});
    if (!r.ok()) return r.status();
    if (r->is_error()) return error_status(r->str, "(SCRIPT LOAD)");
    s->sha = r->str;
  }
  return ok_status();
}

Status validate(const Options& o) {
  if (o.endpoints.empty()) return invalid_argument("redis: no server given");
  for (const Endpoint& e : o.endpoints)
    if (e.host.empty() || e.port == 0) return invalid_argument("redis: an endpoint needs a host and a port > 0");
  if (o.prefix.find_first_of("{}") != std::string::npos)
    return invalid_argument("redis: prefix \"" + o.prefix +
                            "\" contains '{' or '}'; the store adds the hash tag itself");
  if (o.db < 0) return invalid_argument("redis: db must be >= 0");
  if (o.cluster && o.db != 0) return invalid_argument("redis: a cluster has only database 0");
  if (!o.cluster && o.endpoints.size() > 1) return invalid_argument("redis: several servers given without cluster=1");
  if (o.password.empty() && !o.user.empty()) return invalid_argument("redis: a user needs a password");
  if (o.connect_timeout.count() <= 0 || o.command_timeout.count() <= 0)
    return invalid_argument("redis: connect and command timeouts must be > 0");
  if (o.wait_replicas < 0) return invalid_argument("redis: wait_replicas must be >= 0");
  if (o.wait_replicas > 0 && o.wait_timeout.count() <= 0) return invalid_argument("redis: wait_timeout must be > 0");
  if (o.reconnect_min.count() <= 0 || o.reconnect_max < o.reconnect_min)
    return invalid_argument("redis: need 0 < reconnect_min <= reconnect_max");
  if (o.cluster_retries < 0 || o.max_redirects < 0) return invalid_argument("redis: retry limits must be >= 0");
  if (o.expiry_slack.count() < 0) return invalid_argument("redis: expiry_slack must be >= 0");
  return ok_status();
}

namespace {

// True iff the server `probe` talks to runs in cluster mode (INFO cluster answers
// cluster_enabled:1). A server that refuses INFO (e.g. an ACL without it) counts as
// standalone, as before this question was asked.
StatusOr<bool> is_cluster_node(Executor& probe) {
  auto r = probe.run_anywhere({"INFO", "cluster"});
  if (!r.ok()) return r.status();
  if (r->is_error()) return false;
  return r->str.find("cluster_enabled:1") != std::string::npos;
}

// The executor for `o`. Without o.cluster, the server is asked whether it is a
// cluster node; if it is, o.cluster is set and the cluster executor is used, so a
// URI that names one node of a cluster without cluster=1 works like one with it.
StatusOr<std::unique_ptr<Executor>> connect(Options& o, const ConnectOptions& co) {
  if (o.cluster) return make_cluster_executor(o, co);
  ConnectOptions probe_co = co;
  probe_co.db = 0;  // a cluster node refuses SELECT of any other database
  std::unique_ptr<Executor> probe = make_standalone_executor(o, probe_co);
  auto cluster = is_cluster_node(*probe);
  if (!cluster.ok()) return cluster.status();
  if (*cluster) {
    const Endpoint& e = o.endpoints.front();
    if (o.db != 0)
      return invalid_argument("redis: " + e.host + ":" + std::to_string(e.port) +
                              " is a Redis Cluster node, which has only database 0");
    o.cluster = true;
    return make_cluster_executor(o, co);
  }
  if (o.db == 0) return probe;
  return make_standalone_executor(o, co);
}

}  // namespace
}  // namespace detail

StatusOr<std::shared_ptr<RedisStore>> open(const Options& options) {
  if (Status s = detail::validate(options); !s.ok()) return s;
  detail::ConnectOptions co;
  if (options.tls.enabled) {
    auto tls = redis_tls::Context::make(options.tls);
    if (!tls.ok()) return invalid_argument("redis: " + tls.status().message());
    co.tls = std::move(tls).value();
  }
  co.connect_timeout = options.connect_timeout;
  co.command_timeout = options.command_timeout;
  co.user = options.user;
  co.password = options.password;
  co.db = options.db;
  Options o = options;
  auto ex = detail::connect(o, co);
  if (!ex.ok()) return ex.status();
  auto store = std::make_shared<detail::RedisStoreImpl>(std::move(o), std::move(ex).value());
  if (Status s = store->load_scripts(); !s.ok()) return s;
  return std::shared_ptr<RedisStore>(std::move(store));
}

namespace {

StatusOr<Endpoint> parse_endpoint(std::string_view s) {
  auto hp = parse_host_port(s);
  if (!hp.ok()) return invalid_argument("redis URI: " + hp.status().message());
  Endpoint e;
  e.host = std::move(hp->host);
  e.port = hp->port;
  return e;
}

// Reads "[[USER:]PASSWORD@]" off the front of `*body` into o: without a ':' the whole
// user part is the password (redis://password@host, as redis-cli -u reads it).
Status take_credentials(std::string_view* body, const StoreUri& u, Options& o) {
  auto c = credentials(take_userinfo(body), u, /*lone_is_password=*/true);
  if (!c.ok()) return invalid_argument("redis URI: " + c.status().message());
  o.user = std::move(c->user);
  o.password = c->password.value_or("");
  return ok_status();
}

}  // namespace

StatusOr<Options> parse_uri(const StoreUri& u) {
  if (u.scheme != "redis" && u.scheme != "rediss")
    return invalid_argument("redis URI: scheme must be redis:// or rediss:// (TLS), got \"" + u.scheme + ":\"");
  if (Status s = u.check_params({"prefix", "cluster", "connect_timeout_ms", "command_timeout_ms", "wait_replicas",
                                 "wait_timeout_ms", "pool_max_idle", "expiry_slack_ms", "password"},
                                kTlsParams);
      !s.ok())
    return s;
  std::string_view body = u.body;
  if (body.substr(0, 2) != "//") return invalid_argument("redis URI: expected redis://HOST:PORT");
  body.remove_prefix(2);
  Options o;
  auto tls = parse_tls(u, u.scheme == "rediss");
  if (!tls.ok()) return invalid_argument("redis URI: " + tls.status().message());
  o.tls = std::move(tls).value();
  if (Status s = take_credentials(&body, u, o); !s.ok()) return s;
  std::string_view hosts = body;
  if (const auto slash = body.find('/'); slash != std::string_view::npos) {
    hosts = body.substr(0, slash);
    const std::string_view db = body.substr(slash + 1);
    if (!db.empty()) {
      auto [end, ec] = std::from_chars(db.data(), db.data() + db.size(), o.db);
      if (ec != std::errc{} || end != db.data() + db.size() || o.db < 0)
        return invalid_argument("redis URI: bad database number \"" + std::string(db) + "\"");
    }
  }
  if (hosts.empty()) return invalid_argument("redis URI: no HOST:PORT");
  while (!hosts.empty()) {
    const auto comma = hosts.find(',');
    auto e = parse_endpoint(hosts.substr(0, comma));
    if (!e.ok()) return e.status();
    o.endpoints.push_back(std::move(e).value());
    hosts = comma == std::string_view::npos ? std::string_view{} : hosts.substr(comma + 1);
  }
  if (auto p = u.param("prefix")) o.prefix = *p;
  auto cluster = u.param_bool("cluster", false);
  auto connect = u.param_uint("connect_timeout_ms", static_cast<std::uint64_t>(o.connect_timeout.count()));
  auto command = u.param_uint("command_timeout_ms", static_cast<std::uint64_t>(o.command_timeout.count()));
  auto wait_n = u.param_uint("wait_replicas", 0);
  auto wait_ms = u.param_uint("wait_timeout_ms", static_cast<std::uint64_t>(o.wait_timeout.count()));
  auto idle = u.param_uint("pool_max_idle", o.pool_max_idle);
  auto slack = u.param_uint("expiry_slack_ms", static_cast<std::uint64_t>(o.expiry_slack.count()));
  for (const Status& s : {cluster.status(), connect.status(), command.status(), wait_n.status(), wait_ms.status(),
                          idle.status(), slack.status()})
    if (!s.ok()) return s;
  if (*wait_n > 1000) return invalid_argument("redis URI: wait_replicas out of range");
  o.cluster = *cluster;
  o.connect_timeout = Duration(static_cast<std::int64_t>(*connect));
  o.command_timeout = Duration(static_cast<std::int64_t>(*command));
  o.wait_replicas = static_cast<int>(*wait_n);
  o.wait_timeout = Duration(static_cast<std::int64_t>(*wait_ms));
  o.pool_max_idle = *idle;
  o.expiry_slack = Duration(static_cast<std::int64_t>(*slack));
  return o;
}

StatusOr<std::shared_ptr<RedisStore>> open(const StoreUri& uri) {
  auto o = parse_uri(uri);
  if (!o.ok()) return o.status();
  return open(*o);
}

}  // namespace idem::redis

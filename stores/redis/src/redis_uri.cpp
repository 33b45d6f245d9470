// redis://[user:password@]HOST:PORT[,HOST:PORT…][/DB]?… → Options.
#include <charconv>

#include "idem/redis_store.hpp"

namespace idem::redis {
namespace {

StatusOr<Endpoint> parse_endpoint(std::string_view s) {
  const auto colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    return invalid_argument("redis URI: \"" + std::string(s) + "\" is not HOST:PORT");
  Endpoint e;
  e.host = std::string(s.substr(0, colon));
  const std::string_view p = s.substr(colon + 1);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (ec != std::errc{} || end != p.data() + p.size() || port == 0 || port > 65535)
    return invalid_argument("redis URI: bad port \"" + std::string(p) + "\"");
  e.port = static_cast<std::uint16_t>(port);
  return e;
}

}  // namespace

StatusOr<Options> parse_uri(const StoreUri& u) {
  if (u.scheme != "redis") return invalid_argument("redis URI: scheme must be redis://, got \"" + u.scheme + ":\"");
  if (Status s = u.check_params({"prefix", "cluster", "connect_timeout_ms", "command_timeout_ms", "wait_replicas",
                                 "wait_timeout_ms", "pool_max_idle", "expiry_slack_ms"});
      !s.ok())
    return s;
  std::string_view body = u.body;
  if (body.substr(0, 2) != "//") return invalid_argument("redis URI: expected redis://HOST:PORT");
  body.remove_prefix(2);
  Options o;
  if (const auto at = body.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = body.substr(0, at);
    body.remove_prefix(at + 1);
    const auto colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      o.password = std::string(userinfo);  // redis://password@host (as redis-cli -u)
    } else {
      o.user = std::string(userinfo.substr(0, colon));
      o.password = std::string(userinfo.substr(colon + 1));
    }
    if (o.password.empty()) return invalid_argument("redis URI: empty password");
  }
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

StatusOr<std::shared_ptr<Store>> open(const StoreUri& uri) {
  auto o = parse_uri(uri);
  if (!o.ok()) return o.status();
  auto s = open(*o);
  if (!s.ok()) return s.status();
  return std::shared_ptr<Store>(std::move(s).value());
}

}  // namespace idem::redis

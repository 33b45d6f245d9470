#include "support/redis_cluster.hpp"

#include <chrono>
#include <thread>

namespace idem::redis_test {

StatusOr<std::unique_ptr<RedisCluster>> RedisCluster::start(int masters, int replicas, ServerConfig cfg) {
  std::unique_ptr<RedisCluster> c(new RedisCluster());
  cfg.cluster = true;
  for (int i = 0; i < masters * (1 + replicas); ++i) {
    auto s = RedisServer::start(cfg);
    if (!s.ok()) return s.status();
    c->nodes_.push_back(std::move(s).value());
  }
  if (Status s = c->create(masters, replicas); !s.ok()) return s;
  return c;
}

StatusOr<std::unique_ptr<RedisCluster>> RedisCluster::start_on(const test_support::Lan& lan, int per_host,
                                                               int masters, int replicas) {
  std::unique_ptr<RedisCluster> c(new RedisCluster());
  for (int round = 0; round < per_host; ++round) {
    for (int h = 0; h < lan.hosts(); ++h) {  // host by host: redis-cli spreads the masters
      ServerConfig cfg;
      cfg.cluster = true;
      cfg.address = lan.address(h);
      cfg.netns = lan.netns(h);
      auto s = RedisServer::start(cfg);
      if (!s.ok()) return s.status();
      c->nodes_.push_back(std::move(s).value());
    }
  }
  if (Status s = c->create(masters, replicas); !s.ok()) return s;
  return c;
}

Status RedisCluster::create(int masters, int replicas) {
  std::vector<std::string> argv = {"redis-cli", "--cluster", "create"};
  for (auto& n : nodes_) argv.push_back(n->address() + ":" + std::to_string(n->port()));
  argv.insert(argv.end(), {"--cluster-replicas", std::to_string(replicas), "--cluster-yes"});
  const ServerConfig& tls = nodes_.front()->config();
  if (!tls.tls_cert.empty()) {
    argv.insert(argv.end(), {"--tls", "--cacert", tls.tls_ca});
    if (!tls.tls_client_cert.empty())
      argv.insert(argv.end(), {"--cert", tls.tls_client_cert, "--key", tls.tls_client_key});
  }
  const auto log = nodes_.front()->dir() / "cluster-create.log";
  auto rc = run_program(argv, log, 60'000);
  if (!rc.ok()) return rc.status();
  if (*rc != 0)
    return unavailable("redis-cli --cluster create failed (exit " + std::to_string(*rc) + "), see " + log.string());
  if (Status s = wait_ok(30'000); !s.ok()) return s;
  return wait_replicas_synced(static_cast<std::size_t>(masters * replicas), 30'000);
}

Status RedisCluster::wait_replicas_synced(std::size_t expected, int timeout_ms) {
  // A node that redis-cli made a replica may still report role:master for a moment,
  // so count the replicas whose link is up rather than accept every master.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    std::size_t synced = 0;
    for (auto& n : nodes_) {
      auto r = n->command({"INFO", "replication"});
      if (r.ok() && r->str.find("role:slave") != std::string::npos &&
          r->str.find("master_link_status:up") != std::string::npos)
        ++synced;
    }
    if (synced >= expected) return wait_streaming(timeout_ms);
    if (std::chrono::steady_clock::now() > deadline)
      return unavailable(std::to_string(synced) + " of " + std::to_string(expected) + " replicas synced in time");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string RedisCluster::uri() const {
  const ServerConfig& tls = nodes_.front()->config();
  std::string u = tls.tls_cert.empty() ? "redis://" : "rediss://";
  bool first = true;
  for (const auto& n : nodes_) {
    if (!first) u += ",";
    first = false;
    u += n->address() + ":" + std::to_string(n->port());
  }
  if (!tls.tls_cert.empty()) u += "?cluster=1&tls_ca=" + tls.tls_ca;
  if (!tls.tls_client_cert.empty()) u += "&tls_cert=" + tls.tls_client_cert + "&tls_key=" + tls.tls_client_key;
  return tls.tls_cert.empty() ? u + "?cluster=1" : u;
}

RedisServer* RedisCluster::master_of(int slot) {
  for (auto& n : nodes_) {
    if (!n->running()) continue;
    auto r = n->command({"CLUSTER", "SLOTS"});
    if (!r.ok() || r->type != Reply::Type::kArray) continue;
    for (const Reply& range : r->elements) {
      if (range.elements.size() < 3) continue;
      if (range.elements[0].integer <= slot && slot <= range.elements[1].integer) {
        const std::string& address = range.elements[2].elements[0].str;
        const auto port = range.elements[2].elements[1].integer;
        for (auto& m : nodes_)
          if (m->port() == port && (address.empty() || m->address() == address)) return m.get();
      }
    }
    return nullptr;
  }
  return nullptr;
}

StatusOr<std::string> RedisCluster::id_of(RedisServer& node) {
  auto r = node.command({"CLUSTER", "MYID"});
  if (!r.ok()) return r.status();
  return r->str;
}

Status RedisCluster::wait_ok(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (auto& n : nodes_) {
    if (!n->running()) continue;
    while (true) {
      auto r = n->command({"CLUSTER", "INFO"});
      if (r.ok() && r->str.find("cluster_state:ok") != std::string::npos &&
          r->str.find("cluster_slots_ok:16384") != std::string::npos)
        break;
      if (std::chrono::steady_clock::now() > deadline)
        return unavailable("node " + std::to_string(n->port()) +
                           " did not reach cluster_state:ok: " + (r.ok() ? r->str : r.status().to_string()));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return ok_status();
}

Status RedisCluster::wait_streaming(int timeout_ms) {
  // After a diskless full sync a master holds back its replication stream until the
  // replica's first REPLCONF ACK, sent up to a second later: writes made before it
  // are lost if the master dies then. WAIT returns once a replica acknowledged, which
  // happens only after the stream flows.
  for (auto& n : nodes_) {
    auto info = n->command({"INFO", "replication"});
    if (!info.ok() || info->str.find("role:master") == std::string::npos ||
        info->str.find("connected_slaves:0") != std::string::npos)
      continue;
    auto acked = n->command({"WAIT", "1", std::to_string(timeout_ms)});
    if (!acked.ok()) return acked.status();
    if (acked->integer < 1)
      return unavailable("the replica of node " + std::to_string(n->port()) + " did not acknowledge in time");
  }
  return ok_status();
}

}  // namespace idem::redis_test

// Test support: a Redis Cluster of real servers (masters × (1 + replicas)), made with
// `redis-cli --cluster create … --cluster-replicas R --cluster-yes`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "support/netns.hpp"
#include "support/redis_server.hpp"

namespace idem::redis_test {

class RedisCluster {
 public:
  // Starts the servers, creates the cluster and waits until every node reports
  // cluster_state:ok with all 16384 slots and every replica is in sync. Every node
  // starts with `node` (its TLS settings, e.g.), made a cluster node.
  static StatusOr<std::unique_ptr<RedisCluster>> start(int masters = 3, int replicas = 1, ServerConfig node = {});
  // The same over a partition test's hosts: `per_host` nodes on each host of `lan`,
  // with masters * (1 + replicas) == lan.hosts() * per_host. redis-cli puts the
  // masters on different hosts and no replica on its master's host.
  static StatusOr<std::unique_ptr<RedisCluster>> start_on(const test_support::Lan& lan, int per_host, int masters,
                                                           int replicas);

  // "redis://ADDRESS1:P1,ADDRESS2:P2?cluster=1" over all nodes ("rediss://…&tls_ca=…"
  // with TLS).
  std::string uri() const;
  std::vector<std::unique_ptr<RedisServer>>& nodes() { return nodes_; }
  // The node serving `slot` as master (asked of any live node), or nullptr.
  RedisServer* master_of(int slot);
  // The node id of a node (CLUSTER MYID).
  StatusOr<std::string> id_of(RedisServer& node);
  // Waits until every live node says cluster_state:ok and all slots are served.
  Status wait_ok(int timeout_ms);
  // Waits until `expected` nodes are replicas whose link to their master is up and
  // every master's replication stream flows (a write reaches its replica).
  Status wait_replicas_synced(std::size_t expected, int timeout_ms);

 private:
  // Waits until every master with a replica has had a write stream acknowledged.
  Status wait_streaming(int timeout_ms);

  // Makes a cluster of the started nodes_ and waits until it serves every slot.
  Status create(int masters, int replicas);

  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace idem::redis_test

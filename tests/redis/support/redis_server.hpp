// Test support: real redis-server processes on 127.0.0.1, on free ports, each in its
// own temporary directory, with readiness checks; stopped by PID when the object is
// destroyed, and killed by the kernel if the test process dies first
// (PR_SET_PDEATHSIG). Never touches any address but 127.0.0.1, or a partition test's
// own hosts.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "idem/status.hpp"
#include "reply.hpp"
#include "tls_context.hpp"

namespace idem::redis_test {

using redis::detail::Reply;

struct ServerConfig {
  bool persistence = false;          // AOF with appendfsync always; default: none (--save "")
  bool cluster = false;              // --cluster-enabled yes, node timeout cluster_node_timeout_ms
  int cluster_node_timeout_ms = 1000;
  std::string password;              // requirepass; empty: none
  std::vector<std::string> extra;    // more arguments, e.g. {"--replicaof", "127.0.0.1", "1234"}
  // Where it listens, and the network namespace it runs in (`ip netns exec`; empty:
  // this process's): a partition test's host (support/netns.hpp).
  std::string address = "127.0.0.1";
  std::string netns;
  // TLS only (--port 0 --tls-port P) when tls_cert is set: the server's certificate
  // and key, the CA its clients' certificates must chain to (also what its own checks
  // trust), and whether a client must present one (--tls-auth-clients). A cluster's
  // bus uses TLS too (--tls-cluster).
  std::string tls_cert, tls_key, tls_ca;
  bool tls_auth_clients = false;
  std::string tls_client_cert, tls_client_key;  // what its own checks present
};

class RedisServer {
 public:
  // Starts a server on a free port (port and port+10000 free, for the cluster bus) and
  // waits until it answers PING. Retries with other ports if one was taken meanwhile.
  static StatusOr<std::unique_ptr<RedisServer>> start(ServerConfig config);
  ~RedisServer();  // kill()s and removes the directory
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  std::uint16_t port() const { return port_; }
  const std::string& address() const { return config_.address; }
  const ServerConfig& config() const { return config_; }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  const std::filesystem::path& dir() const { return dir_; }
  // "redis://ADDRESS:PORT" (with the password when one is set); with TLS,
  // "rediss://ADDRESS:PORT?tls_ca=…" (and the client certificate it was given).
  std::string uri() const;

  // SIGKILL and reap: a crash (what the AOF holds survives). Idempotent.
  void kill();
  // SIGTERM and reap: a clean shutdown.
  void stop();
  // Starts again on the same port, in the same directory, with the same config.
  Status restart();

  // One command on a fresh connection (AUTH as needed). kUnavailable if unreachable.
  StatusOr<Reply> command(const std::vector<std::string>& argv) const;

 private:
  RedisServer() = default;
  Status launch();
  Status wait_ready(int timeout_ms);

  ServerConfig config_;
  std::shared_ptr<const redis_tls::Context> tls_;  // its own checks' TLS, or null
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
  std::filesystem::path dir_;
};

// Runs argv (argv[0] looked up in PATH) with stdout/stderr to `log`, waits up to
// timeout_ms. Returns its exit status or kUnavailable on timeout (then killed).
StatusOr<int> run_program(const std::vector<std::string>& argv, const std::filesystem::path& log, int timeout_ms);

}  // namespace idem::redis_test

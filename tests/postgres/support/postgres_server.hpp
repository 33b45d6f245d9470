// Test support: a private PostgreSQL server — a cluster made by initdb (once per
// machine, then copied into a folder per server, under /dev/shm when it need not
// survive a power loss), postgres on a free port of
// 127.0.0.1 and a private unix-socket folder, ready when pg_isready
// says so; stopped by PID when the object is destroyed, and killed by the kernel if
// the test process dies first (PR_SET_PDEATHSIG). PostgreSQL refuses to run as root:
// when the tests run as root, initdb and postgres run as the `postgres` system user on
// folders it owns.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "idem/status.hpp"

namespace idem::postgres_test {

struct ServerConfig {
  bool fsync = false;  // default off: tests need no durability against power loss
  // One more address to listen on beside 127.0.0.1 (a partition test's link,
  // support/netns.hpp), trusting clients of its /24. Empty: none.
  std::string also_listen;
  // TLS only on 127.0.0.1 (ssl=on with this certificate and key, copied into the data
  // folder): user "idem" by password (kTlsPassword), user "idem-client" by a client
  // certificate chained to tls_ca whose CN is its name; plaintext TCP is rejected (the
  // socket stays trusted). Empty: no TLS, every TCP client of 127.0.0.1 trusted.
  std::string tls_cert, tls_key, tls_ca;
};

inline constexpr char kTlsPassword[] = "pg-tls-hunter2";

class PostgresServer {
 public:
  // Starts a server (trust authentication, user "idem") and waits until it accepts
  // connections. Retries with another port if one was taken meanwhile.
  static StatusOr<std::unique_ptr<PostgresServer>> start(ServerConfig config = {});
  ~PostgresServer();  // stops and removes the folder
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  std::uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::filesystem::path& socket_dir() const { return sock_; }
  // "postgres://idem@127.0.0.1:PORT/postgres" with `params` appended ("?schema=s").
  std::string uri(const std::string& params = "") const;
  // libpq keywords for idem::postgres::Options::connection.
  std::vector<std::pair<std::string, std::string>> connection() const;

  // SIGKILL and reap (the server's children exit when their postmaster is gone).
  void kill();

 private:
  PostgresServer() = default;
  Status configure_tls();
  Status create_tls_users();
  Status launch();

  ServerConfig config_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
  std::filesystem::path dir_;
  std::filesystem::path sock_;
};

// One server for the whole test binary, started at first use (nullptr if it failed,
// after an ADD_FAILURE-style message on stderr).
PostgresServer* shared_server();

// A schema name unique in this process ("t_<pid>_<n>").
std::string fresh_schema();

}  // namespace idem::postgres_test

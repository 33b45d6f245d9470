// Test support: a private nats-server with JetStream on 127.0.0.1 (or a partition test's
// link, support/netns.hpp), on a free port, with its own store directory; readiness is
// a JetStream account-info answer. Stopped by PID when the object is destroyed, and
// killed by the kernel if the test process dies first (PR_SET_PDEATHSIG). Never
// touches any other address nor a system service.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "idem/status.hpp"

namespace idem::nats_test {

struct ServerConfig {
  std::string user;      // --user; empty: no authentication
  std::string password;  // --pass
  std::string token;     // --auth; empty: none
  // The one user, by NKey (a configuration file: nats-server has no flag for it); the
  // server's own checks sign with the seed in nkey_seed_file. Empty: none.
  std::string nkey, nkey_seed_file;
  // Operator mode (support/nkeys.hpp): the operator's JWT, its system account and the
  // one account (public keys and JWTs, preloaded into a memory resolver); the server's
  // own checks connect with the credentials file `creds_file`. Empty: not operator
  // mode.
  std::string operator_jwt, system_public_key, system_jwt, account_public_key, account_jwt, creds_file;
  // TLS only (--tls): the server's certificate and key, and with tls_verify the CA a
  // client's certificate must chain to (--tlsverify: a client without one is refused).
  std::string tls_cert, tls_key, tls_ca;
  bool tls_verify = false;
  // The one address it listens on (nats-server takes one): 127.0.0.1, or a partition
  // test's Host::here(), which this namespace reaches too.
  std::string address = "127.0.0.1";
};

// One message as a stream stores it.
struct StoredMessage {
  std::uint64_t seq = 0;
  std::string subject;
  std::string body;
  std::map<std::string, std::string> headers;
};

// A durable's counters, as the server reports them.
struct ConsumerCounts {
  std::int64_t ack_pending = 0;  // delivered, not acked (retries waiting included)
  std::uint64_t pending = 0;     // not delivered yet
  std::int64_t redelivered = 0;
  std::int64_t ack_wait_ms = 0;
};

class NatsServer {
 public:
  // Starts a server on a free port and waits until JetStream answers. Retries with
  // another port if one was taken meanwhile.
  static StatusOr<std::unique_ptr<NatsServer>> start(ServerConfig config = {});
  ~NatsServer();  // kill()s and removes the directory
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  std::uint16_t port() const { return port_; }
  // "nats://[USER:PASSWORD@]ADDRESS:PORT" (append "?stream=…").
  std::string uri() const;

  // SIGKILL and reap: a crash (the store directory stays). Idempotent.
  void kill();
  // Starts again on the same port with the same store directory.
  Status restart();

  // Every message of `stream`, in order (empty if the stream does not exist).
  StatusOr<std::vector<StoredMessage>> messages(const std::string& stream) const;
  // The durable's counters; kNotFound if it does not exist.
  StatusOr<ConsumerCounts> consumer(const std::string& stream, const std::string& durable) const;

 private:
  NatsServer() = default;
  Status launch();
  Status wait_ready(int timeout_ms);

  ServerConfig config_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
  std::filesystem::path dir_;
};

}  // namespace idem::nats_test

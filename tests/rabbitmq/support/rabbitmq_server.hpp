// Test support: a private RabbitMQ node on 127.0.0.1 — its own node name, AMQP,
// distribution and epmd ports (free ones), data, log and home folder (Erlang cookie) in
// a temporary directory — so a test never touches a system broker. The node and its
// epmd are this process's children, stopped by PID when the object is destroyed and
// killed by the kernel if the test process dies first (PR_SET_PDEATHSIG). Starting
// takes several seconds: share one node across the tests of a binary (shared()).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "idem/status.hpp"
#include "support/tls_files.hpp"

namespace idem::rabbitmq_test {

// One message read back from a queue.
struct Message {
  std::string body;
  std::string message_id;
  std::map<std::string, std::string> headers;  // the text-valued ones
};

class RabbitServer {
 public:
  // Starts epmd and the node, listening for AMQP on `address` (127.0.0.1, or a
  // partition test's Host::here(), which this namespace reaches too; guest may then log
  // in from any address), and waits until an AMQP login as guest succeeds. On
  // 127.0.0.1 the node also takes AMQP over TLS on tls_port(), at 127.0.0.1 and at
  // 127.0.0.2 (an address its certificate does not name), with tls()'s server
  // certificate; a client certificate is verified when one is sent, not required. A
  // consumer_timeout above 0 is the node's delivery acknowledgement timeout, checked
  // every quarter of it.
  static StatusOr<std::unique_ptr<RabbitServer>> start(
      std::string address = "127.0.0.1", std::chrono::milliseconds consumer_timeout = std::chrono::milliseconds(0));
  // A node started on first use and stopped when the process exits; aborts the test
  // binary if it cannot start.
  static RabbitServer& shared();
  ~RabbitServer();  // kill()s the node, stops epmd, removes the directory
  RabbitServer(const RabbitServer&) = delete;
  RabbitServer& operator=(const RabbitServer&) = delete;

  std::uint16_t port() const { return port_; }
  std::uint16_t tls_port() const { return tls_port_; }  // 0 when not on 127.0.0.1
  const test_support::TlsFiles& tls() const { return tls_; }
  const std::string& node() const { return node_; }
  // "amqp://guest:guest@ADDRESS:PORT/%2F?queue=QUEUE".
  std::string uri(const std::string& queue) const;

  // SIGKILL and reap: a crash (durable queues and persistent messages survive).
  void kill();
  // SIGTERM and reap: a clean shutdown.
  void stop();
  // Starts the node again on the same ports and data.
  Status restart();

  // Ready messages in `queue` (passive queue.declare). kNotFound when it is absent.
  StatusOr<std::uint32_t> ready(const std::string& queue) const;
  // Runs `rabbitmqctl -n NODE args…` against this node (e.g. add_user); its output in
  // the error when it fails.
  Status ctl(const std::vector<std::string>& args) const;
  // Takes every ready message of `queue` (basic.get, acked) in order.
  StatusOr<std::vector<Message>> take_all(const std::string& queue) const;

 private:
  RabbitServer() = default;
  Status start_epmd();
  void write_config() const;
  Status launch();
  Status wait_ready(int timeout_ms);

  std::filesystem::path dir_;
  std::string address_;
  std::string node_;
  std::uint16_t port_ = 0, dist_port_ = 0, epmd_port_ = 0, tls_port_ = 0;
  test_support::TlsFiles tls_;
  pid_t pid_ = -1, epmd_pid_ = -1;
};

}  // namespace idem::rabbitmq_test

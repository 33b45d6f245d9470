// A real Pulsar standalone broker for the tests: scripts/broker.sh starts it from
// Pulsar's Maven Central jars on 127.0.0.1 (free ports, a private folder, ready once
// the admin health check answers) and stops it by PID when the object goes, or when
// the test process dies. One per test binary (shared()).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "idem/status.hpp"
#include "support/tls_files.hpp"

namespace idem::pulsar_test {

// One message read back from a topic.
struct StoredMessage {
  std::string payload;
  std::string key;
  std::map<std::string, std::string> properties;
};

class PulsarServer {
 public:
  // On `address`: 127.0.0.1, or a partition test's Host::here(), which this namespace
  // reaches too.
  // With `tls_dir` (ca.pem, server.pem, server.key: support/tls_files.hpp) the web
  // APIs are served over TLS too, on tls_port().
  static StatusOr<std::unique_ptr<PulsarServer>> start(const std::string& address = "127.0.0.1",
                                                       const std::string& tls_dir = "");
  // One broker for the whole test binary, started on first use, with TLS too (files
  // made for it: tls()); aborts the binary when it cannot start.
  static PulsarServer& shared();
  // The certificates a broker started by shared() serves TLS with.
  const test_support::TlsFiles& tls() const { return *tls_; }
  ~PulsarServer();

  std::uint16_t web_port() const { return web_port_; }
  std::uint16_t tls_port() const { return tls_port_; }  // 0 without TLS
  const std::string& version() const { return version_; }
  // "pulsar-ws://ADDRESS:PORT/public/default/TOPIC?subscription=SUB[&PARAMS]"
  // (without "subscription=" when sub is empty).
  std::string uri(const std::string& topic, const std::string& sub, const std::string& params = "") const;

  // An admin REST call; returns the HTTP status (-1 when unreachable), *body the answer.
  int admin(const std::string& method, const std::string& path, std::string* body = nullptr,
            const std::string& request = "") const;
  // Unloads public/default/TOPIC: its owner closes it and the next load rewinds every
  // subscription to its mark-delete position.
  Status unload(const std::string& topic) const;
  // The subscription's msgBacklog and unackedMessages; -1 each when unknown.
  std::pair<std::int64_t, std::int64_t> backlog(const std::string& topic, const std::string& sub) const;
  // Every message of public/default/TOPIC from the earliest, read until none comes for
  // `quiet`.
  std::vector<StoredMessage> read_all(const std::string& topic,
                                      std::chrono::milliseconds quiet = std::chrono::milliseconds(1500)) const;

  // Stops the broker (SIGTERM; SIGKILL with kill) and starts it again on the same
  // ports and data, waiting until it serves.
  Status restart(bool kill = false);

 private:
  PulsarServer() = default;
  Status run_script(const std::string& args, std::string* out) const;

  std::string dir_, version_;
  std::uint16_t web_port_ = 0;
  std::uint16_t tls_port_ = 0;
  std::optional<test_support::TlsFiles> tls_;
  std::string tls_dir_;  // removed with the object when set
  std::string address_;
};

}  // namespace idem::pulsar_test

// `idem consume --metrics-listen HOST:PORT`: Prometheus text at GET /metrics, liveness
// at GET /healthz and readiness at GET /readyz, served on a thread of its own
// (cpp-httplib).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "idem/status.hpp"

namespace idem::cli {

class MetricsServer {
 public:
  // Listens on `listen` ("HOST:PORT"; port 0: any free one) and serves `metrics()`'s
  // text at /metrics, "ok\n" at /healthz (the process serves), and at /readyz "ok\n"
  // when `not_ready()` is empty, else 503 with its text. Both functions are called on
  // the server's thread and must be thread-safe. kInvalidArgument for a malformed
  // address, kUnavailable when it cannot be bound.
  static StatusOr<std::unique_ptr<MetricsServer>> start(const std::string& listen,
                                                        std::function<std::string()> metrics,
                                                        std::function<std::string()> not_ready);
  ~MetricsServer();  // stops serving and joins the thread

  int port() const { return port_; }

  class Impl;

 private:
  MetricsServer(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_;
};

}  // namespace idem::cli

// `idem consume --metrics-listen HOST:PORT`: Prometheus text at GET /metrics and a
// health check at GET /healthz, served on a thread of its own (cpp-httplib).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "idem/status.hpp"

namespace idem::cli {

class MetricsServer {
 public:
  // Listens on `listen` ("HOST:PORT"; port 0: any free one) and serves `metrics()`'s
  // text at /metrics (called on the server's thread; must be thread-safe) and
  // "ok\n" at /healthz. kInvalidArgument for a malformed address, kUnavailable when
  // it cannot be bound.
  static StatusOr<std::unique_ptr<MetricsServer>> start(const std::string& listen,
                                                        std::function<std::string()> metrics);
  ~MetricsServer();  // stops serving and joins the thread

  int port() const { return port_; }

  class Impl;

 private:
  MetricsServer(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_;
};

}  // namespace idem::cli

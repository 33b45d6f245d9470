#include "metrics_server.hpp"

#include <httplib.h>

#include <thread>
#include <utility>

#include "idem/backend/store_uri.hpp"

namespace idem::cli {

class MetricsServer::Impl {
 public:
  httplib::Server server;
  std::thread thread;
};

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& listen,
                                                              std::function<std::string()> metrics,
                                                              std::function<std::string()> not_ready) {
  const std::size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return invalid_argument("--metrics-listen: \"" + listen + "\" is not HOST:PORT");
  const std::string host = listen.substr(0, colon);
  int port = 0;
  if (listen.substr(colon + 1) != "0") {
    auto p = parse_port(listen.substr(colon + 1));
    if (!p.ok()) return invalid_argument("--metrics-listen: " + p.status().message());
    port = *p;
  }
  auto impl = std::make_unique<Impl>();
  impl->server.Get("/metrics", [metrics = std::move(metrics)](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics(), "text/plain; version=0.0.4");
  });
  impl->server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  impl->server.Get("/readyz", [not_ready = std::move(not_ready)](const httplib::Request&, httplib::Response& res) {
    const std::string why = not_ready();
    if (!why.empty()) res.status = 503;
    res.set_content(why.empty() ? "ok\n" : why + "\n", "text/plain");
  });
  if (port == 0) {
    port = impl->server.bind_to_any_port(host);
    if (port < 0) return unavailable("--metrics-listen: cannot listen on " + listen);
  } else if (!impl->server.bind_to_port(host, port)) {
    return unavailable("--metrics-listen: cannot listen on " + listen);
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->server.listen_after_bind(); });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl), port));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl, int port) : impl_(std::move(impl)), port_(port) {}

MetricsServer::~MetricsServer() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace idem::cli

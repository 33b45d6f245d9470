// `idem consume --handler URL|exec:COMMAND`: idem in front of a service written in any
// language (tools/idem/README.md). Messages are read through idem::json::Format (any
// body; the fields from JSON pointers, headers or the broker's id), each is handed to
// the service over HTTP or JSON lines, and its answer becomes the decision.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <condition_variable>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "consume_handler.hpp"
#include "consume_run.hpp"
#include "exit_codes.hpp"
#include "external_handler.hpp"
#include "handler_pause.hpp"
#include "idem/consumer.hpp"
#include "idem/json_format.hpp"
#include "idem/outbox.hpp"
#include "metrics_server.hpp"

namespace idem::cli {
namespace {

// One line per message that left the reorder buffer, with its body when it did not
// run (dead-lettered by the gap policy or its retries): the operator's record of it.
void print_buffered_outcome(const BufferedOutcome& b, std::mutex& mu) {
  std::optional<std::string> body;
  if (b.decision.action == Action::kDeadLetter) {
    auto parts = decode_headers(b.message);
    if (parts && !parts->empty()) body = (*parts)[0].second;
  }
  const std::string line = buffered_line(b, body);
  std::lock_guard lock(mu);
  std::cout << line << '\n';
}

// A line on stderr every second while stderr is a terminal: rates and gauges.
class ProgressLine {
 public:
  ProgressLine(Runtime<json::Message>& rt, Consumer<json::Message>& c) : rt_(rt), c_(c), thread_([this] { loop(); }) {}
  ~ProgressLine() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
    std::cerr << '\n';
  }

 private:
  void loop() {
    std::uint64_t last = 0;
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; })) {
      const std::uint64_t decided = rt_.metrics().get(RuntimeMetrics::kDecided);
      const MetricsSnapshot m = c_.metrics().snapshot();
      std::cerr << "\r" << (decided - last) << " msg/s  in flight " << rt_.metrics().in_flight() << "  retries "
                << m.actions_for(Action::kRetry) << "  dead letters " << m.actions_for(Action::kDeadLetter)
                << "  buffered " << m.buffered << "   " << std::flush;
      last = decided;
    }
  }
  Runtime<json::Message>& rt_;
  Consumer<json::Message>& c_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the rest is set
};

// The consumer: the settings' options, the store, and the external handler's calls.
StatusOr<Consumer<json::Message>> make_consumer(const ConsumerSettings& s, const json::Format& format,
                                                std::shared_ptr<HandlerPause> calls, std::mutex& out_mu,
                                                int& exit_code) {
  ConsumerOptions o = consumer_options_from(s);
  std::string error;
  if (int rc = open_consumer_store(s, o, error); rc != kExitOk) {
    exit_code = rc;
    return invalid_argument(error);
  }
  o.on_buffered = [&out_mu](const BufferedOutcome& b) { print_buffered_outcome(b, out_mu); };
  return Consumer<json::Message>::create(
      std::move(o), format.extractors(),
      [calls](const json::Message& m, HandlerContext& ctx) { return calls->call(m, ctx); });
}

// Runs rt until it stops; SIGINT and SIGTERM stop it gracefully and end the calls'
// waits for an unavailable handler.
Status run_until_signalled(Runtime<json::Message>& rt, HandlerPause& calls) {
  struct Targets {
    Runtime<json::Message>* rt;
    HandlerPause* calls;
  } targets{&rt, &calls};
  set_stop_target(&targets, [](void* p) {
    auto* t = static_cast<Targets*>(p);
    t->calls->stop();
    t->rt->stop();
  });
  const Status s = rt.run();
  set_stop_target(nullptr, nullptr);
  return s;
}

int run_sidecar_with(const ConsumeArgs& a, const ConsumerSettings& s, const json::Format& format,
                     std::shared_ptr<ExternalHandler> handler, Duration timeout) {
  std::unique_ptr<MessageSource> source;
  if (int rc = open_consume_source(a, s, source); rc != kExitOk) return rc;
  std::mutex out_mu;
  int exit_code = kExitUsage;
  auto calls = std::make_shared<HandlerPause>(std::move(handler), s.lease, timeout);
  auto consumer = make_consumer(s, format, calls, out_mu, exit_code);
  if (!consumer.ok()) return consume_fail(exit_code, consumer.status().message());
  auto applied = [&out_mu](const Delivery& d, const json::Message* m, const Decision& dec) {
    const std::string line = decision_line(d.broker_id, m != nullptr ? std::optional(m->id) : std::nullopt, dec);
    std::lock_guard lock(out_mu);
    std::cout << line << '\n';
  };
  auto rt = Runtime<json::Message>::create(runtime_options(a), *source, *consumer, format.decoder(), applied);
  if (!rt.ok()) return consume_fail(kExitUsage, rt.status().message());
  std::unique_ptr<MetricsServer> metrics;
  if (!a.sidecar.metrics_listen.empty()) {
    auto m = MetricsServer::start(
        a.sidecar.metrics_listen,
        [c = &*consumer, r = rt->get(), calls] {
          return c->metrics().prometheus() + r->metrics().prometheus() + calls->prometheus();
        },
        [calls] {
          const std::string why = calls->paused_reason();
          return why.empty() ? why : "paused: the handler is unavailable (" + why + ")";
        });
    if (!m.ok()) return consume_fail(kExitUsage, m.status().message());
    metrics = std::move(m).value();
  }
  std::unique_ptr<ProgressLine> progress;
  if (!a.sidecar.quiet && isatty(2)) progress = std::make_unique<ProgressLine>(**rt, *consumer);
  const Status stopped = run_until_signalled(**rt, *calls);
  progress.reset();
  source->close();
  std::cout.flush();
  if (!stopped.ok()) return consume_fail(kExitFailure, stopped.to_string());
  if (consumer->options().store) warn_buffered(*consumer->options().store, s);
  return kExitOk;
}

}  // namespace

void add_sidecar_flags(CLI::App* cmd, SidecarFlags* f) {
  const char* group = "A service's handler (sidecar)";
  cmd->add_option("--handler", f->handler,
                  "The service that handles each message: http://HOST:PORT/PATH (POST) or exec:COMMAND (JSON lines)")
      ->group(group);
  cmd->add_option("--handler-timeout-ms", f->handler_timeout_ms,
                  "How long one call may take (default: --lease-ms less 1 s, so that the lease covers a call)")
      ->check(CLI::Range(std::int64_t{1}, kMaxDurationMs))
      ->group(group);
  cmd->add_option("--handler-ca", f->handler_ca,
                  "https://: the CA certificates (PEM) the service's certificate must chain to (default: the system's)")
      ->check(CLI::ExistingFile)
      ->group(group);
  cmd->add_option("--handler-cert", f->handler_cert, "https://: a client certificate (PEM), with --handler-key")
      ->check(CLI::ExistingFile)
      ->group(group);
  cmd->add_option("--handler-key", f->handler_key, "https://: the client certificate's key (PEM, unencrypted)")
      ->check(CLI::ExistingFile)
      ->group(group);
  cmd->add_flag("--handler-tls-insecure", f->handler_tls_insecure,
                "https://: accept any certificate and name (encrypted, not authenticated; warned at start)")
      ->group(group);
  cmd->add_option("--id", f->id, "Where the message id is: /JSON/POINTER, header:NAME or broker (default /id)")
      ->group(group);
  for (auto [name, field, what] : {std::tuple{"--key", &f->key, "the entity key"},
                                   std::tuple{"--version", &f->version, "the entity version"},
                                   std::tuple{"--event", &f->event, "the state-machine event"}}) {
    cmd->add_option(name, *field, std::string("Where ") + what + " is: /JSON/POINTER or header:NAME")->group(group);
  }
  cmd->add_option("--metrics-listen", f->metrics_listen, "Serve /metrics (Prometheus) and /healthz on HOST:PORT")
      ->group(group);
  cmd->add_flag("--quiet", f->quiet, "No progress line on a terminal")->group(group);
}

bool sidecar_flags_given(const SidecarFlags& f) {
  const SidecarFlags none;
  return f.handler_timeout_ms != none.handler_timeout_ms || f.id != none.id || !f.key.empty() ||
         !f.version.empty() || !f.event.empty() || !f.metrics_listen.empty() || f.quiet || !f.handler_ca.empty() ||
         !f.handler_cert.empty() || !f.handler_key.empty() || f.handler_tls_insecure;
}

int run_sidecar(const ConsumeArgs& a, const ConsumerSettings& s) {
  auto format = json::Format::create(
      {.id = a.sidecar.id, .key = a.sidecar.key, .version = a.sidecar.version, .event = a.sidecar.event});
  if (!format.ok()) return consume_fail(kExitUsage, format.status().message());
  const Duration timeout = a.sidecar.handler_timeout_ms > 0 ? Duration(a.sidecar.handler_timeout_ms)
                           : s.lease > Duration(2'000)      ? s.lease - Duration(1'000)
                                                            : s.lease / 2;
  const SidecarFlags& f = a.sidecar;
  if (f.handler_cert.empty() != f.handler_key.empty())
    return consume_fail(kExitUsage, "--handler-cert and --handler-key go together");
  if (f.handler_tls_insecure)
    std::cerr << "idem consume: warning: --handler-tls-insecure: the service's certificate and name are not "
                 "verified, so anyone on the path can pose as it\n";
  auto handler = open_external_handler(f.handler, {.timeout = timeout,
                                                   .max_result_bytes = ConsumerOptions{}.max_result_bytes,
                                                   .tls = {.enabled = true,
                                                           .ca_file = f.handler_ca,
                                                           .cert_file = f.handler_cert,
                                                           .key_file = f.handler_key,
                                                           .insecure = f.handler_tls_insecure}});
  if (!handler.ok() && handler.status().code() == StatusCode::kFailedPrecondition)
    return consume_fail(kExitFailure, handler.status().message());
  if (!handler.ok()) return consume_fail(kExitUsage, handler.status().message());
  return run_sidecar_with(a, s, *format, std::shared_ptr<ExternalHandler>(std::move(handler).value()), timeout);
}

}  // namespace idem::cli

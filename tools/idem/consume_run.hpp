// What `idem consume` runs with either handler, the built-in one (consume_command.cpp)
// or a service outside (sidecar.cpp): its parsed command line, and the steps both
// share (the source, the runtime's options, signals, the warnings at exit).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "consumer_flags.hpp"
#include "idem/runtime.hpp"
#include "idem/source.hpp"
#include "idem/store.hpp"

namespace idem::cli {

// The flags of a handler outside idem (tools/idem/README.md, "idem consume as a sidecar").
struct SidecarFlags {
  std::string handler;                 // --handler http://…|exec:…; empty: the built-in handler
  std::int64_t handler_timeout_ms = 0;  // --handler-timeout-ms; 0: --lease-ms
  std::string handler_ca, handler_cert, handler_key;  // --handler-ca, -cert, -key (https://)
  bool handler_tls_insecure = false;                  // --handler-tls-insecure
  std::string id = "/id";              // --id: a /JSON/POINTER, header:NAME or broker
  std::string key, version, event;     // --key, --version, --event; empty: not read
  std::string metrics_listen;          // --metrics-listen HOST:PORT; empty: no server
  bool quiet = false;                  // --quiet: no progress line on a terminal
};

struct ConsumeArgs {
  ConsumerFlags consumer;
  SidecarFlags sidecar;
  std::string source;
  std::int64_t workers = 0;
  std::int64_t batch = 1;
  std::int64_t idle_exit_ms = 0;
  std::int64_t source_wait_ms = 30'000;  // how long an unreachable source is tried at start
  std::int64_t max_messages = 0;
  double failure_actions_per_second = 1000;  // RuntimeOptions' failure-path throttle
  std::int64_t failure_burst = 100;
};

// Writes "idem consume: <message>" to stderr; returns code.
int consume_fail(int code, const std::string& message);

// Opens --source with the consumer's lease; a Redis Streams source without consumer=
// takes this host's stable consumer name (take_consumer_name). Returns kExitOk, or the
// exit status after printing why (the password never shown).
int open_consume_source(const ConsumeArgs& a, const ConsumerSettings& s, std::unique_ptr<MessageSource>& out);

// Without --store (and under a guarantee that keeps records), the source's default
// store (consume_defaults.hpp), said on stderr; with --store memory:, a warning that a
// restart forgets every record. Returns kExitOk, or the exit status after printing why.
int choose_store(const ConsumeArgs& a, ConsumerSettings& s);

RuntimeOptions runtime_options(const ConsumeArgs& a);

// Under strict ordering, names on stderr the keys whose messages still wait in the
// reorder buffer for an earlier version (at most 10).
void warn_buffered(Store& store, const ConsumerSettings& s);

// While running, SIGINT and SIGTERM call stop(target) (a second signal exits at once
// with status 130); null: nothing to stop.
void set_stop_target(void* target, void (*stop)(void*));

// Runs rt until it stops, the signals stopping it gracefully.
template <class Msg>
Status run_until_signalled(Runtime<Msg>& rt) {
  set_stop_target(&rt, [](void* p) { static_cast<Runtime<Msg>*>(p)->stop(); });
  const Status s = rt.run();
  set_stop_target(nullptr, nullptr);
  return s;
}

// Declares --handler, --handler-timeout-ms, --id, --key, --version, --event,
// --metrics-listen and --quiet on cmd, writing into f (sidecar.cpp).
void add_sidecar_flags(CLI::App* cmd, SidecarFlags* f);

// Whether any of those flags but --handler was given (they need --handler).
bool sidecar_flags_given(const SidecarFlags& f);

// `idem consume --handler …`: the sidecar (sidecar.cpp), with the checked settings.
int run_sidecar(const ConsumeArgs& a, const ConsumerSettings& s);

}  // namespace idem::cli

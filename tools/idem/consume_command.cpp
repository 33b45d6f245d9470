// `idem consume`: the consumer runtime from the shell (tools/idem/README.md). Reads a
// broker source, runs every message through a consumer with the built-in handler
// (or, with --handler, a service outside: sidecar.cpp), prints effects and decisions
// as JSON lines.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "commands.hpp"
#include "consume_handler.hpp"
#include "consume_run.hpp"
#include "consumer_flags.hpp"
#include "exit_codes.hpp"
#include "idem/backend/store_uri.hpp"
#include "idem/consumer.hpp"
#include "idem/open_source.hpp"
#include "idem/runtime.hpp"
#include "trace_line.hpp"
#ifdef IDEM_TOOL_WITH_YAML
#include "yaml_config.hpp"
#endif

namespace idem::cli {
namespace {

constexpr const char* kFooter =
    "Without --handler, each message body is one JSON object with the fields of a replay line (id,\n"
    "key, version, event, payload, stream, position, fail). On sqlite: and postgres:// stores under\n"
    "effectively_once or manual each effect is a row of idem_effects, written in the dedup record's\n"
    "transaction. With --handler, each message goes to that service (HTTP POST or JSON lines) and\n"
    "its answer decides; --id/--key/--version/--event say where the fields are.\n"
    "SIGINT/SIGTERM stop gracefully; a second one exits at once.\n"
    "Exit status: 0 stopped (signal, --idle-exit-ms, --max-messages); 1 the source or the store\n"
    "failed; 2 invalid options; 130 a second signal.";

// A body without "stream" and "position" takes the broker's (a Kafka partition and
// offset, a Pulsar topic and message id), so --ordering watermark works on what the
// broker resends; one without "key" takes the broker's message key.
StatusOr<TraceLine> decode(const Delivery& d) {
  ParsedLine p = parse_trace_line(d.body);
  if (!p.ok()) return invalid_argument(p.error);
  if (!p.line.stream && !p.line.position && !d.partition.empty() && d.position > 0) {
    p.line.stream = d.partition;
    p.line.position = d.position;
  }
  if (!p.line.key && !d.key.empty()) p.line.key = d.key;
  return std::move(p.line);
}

// Effects go to idem_effects when the store is SQLite or PostgreSQL and commits carry
// the handler.
EffectsIn effects_target(const ConsumerSettings& s, std::string* path) {
  if (s.guarantee != Guarantee::kEffectivelyOnce && s.guarantee != Guarantee::kManual) return EffectsIn::kNowhere;
  auto u = StoreUri::parse(s.store_uri);
  if (!u.ok()) return EffectsIn::kNowhere;
  if (u->scheme == "sqlite") {
    *path = u->body;
    return EffectsIn::kSqlite;
  }
#ifdef IDEM_TOOL_WITH_POSTGRES
  if (u->scheme == "postgres" || u->scheme == "postgresql") return EffectsIn::kPostgres;
#endif
  return EffectsIn::kNowhere;
}

// The outbox, for messages with a "publish" field: on a store that keeps one
// (sqlite:, rocksdb:, postgres://) under effectively_once or manual, in transactional
// mode, each destination through the adapters this binary has (idem/open_source.hpp).
void enable_outbox(const ConsumerSettings& s, ConsumerOptions& o) {
  if (s.guarantee != Guarantee::kEffectivelyOnce && s.guarantee != Guarantee::kManual) return;
  if (!o.store || o.store->outbox() == nullptr || !o.store->capabilities().transactional) return;
  o.transactional = true;
  o.outbox.publishers = [](const std::string& destination) { return open_publisher(destination); };
}

int run_consume(const ConsumeArgs& a) {
  auto settings = settings_from(a.consumer, "consume");
  if (!settings) return kExitUsage;
  if (int rc = choose_store(a, *settings); rc != kExitOk) return rc;
  if (!a.sidecar.handler.empty()) return run_sidecar(a, *settings);
  if (sidecar_flags_given(a.sidecar))
    return consume_fail(kExitUsage, "--id, --key, --version, --event, --handler-timeout-ms, --handler-ca/-cert/-key, "
                                    "--handler-tls-insecure, --metrics-listen and --quiet need --handler (the built-in "
                                    "handler reads replay lines)");
  std::unique_ptr<MessageSource> source;
  if (int rc = open_consume_source(a, *settings, source); rc != kExitOk) return rc;

  ConsumerOptions o = consumer_options_from(*settings);
  std::string error, db_path, pg_table;
  const EffectsIn effects = effects_target(*settings, &db_path);
  if (effects == EffectsIn::kSqlite) {  // before the store opens the file and takes its lock
    if (Status s = create_effects_table(db_path); !s.ok()) return consume_fail(kExitFailure, s.message());
    o.transactional = true;
  }
  if (int rc = open_consumer_store(*settings, o, error); rc != kExitOk) return consume_fail(rc, error);
  if (effects == EffectsIn::kPostgres) {  // after the store created its schema
    if (Status s = create_postgres_effects_table(settings->store_uri, &pg_table); !s.ok())
      return consume_fail(kExitFailure, scrub_secrets(s.message(), settings->store_uri));
    o.transactional = true;
  }
  enable_outbox(*settings, o);
  const std::shared_ptr<Store> store = o.store;
  auto handler = std::make_shared<ConsumeHandler>(effects, std::cout, pg_table);
  o.on_buffered = [handler](const BufferedOutcome& b) { handler->buffered(b); };
  auto consumer =
      Consumer<TraceLine>::create(std::move(o), trace_extractors(),
                                  [handler](const TraceLine& m, HandlerContext& ctx) { return (*handler)(m, ctx); });
  if (!consumer.ok()) return consume_fail(kExitUsage, consumer.status().message());

  auto applied = [handler](const Delivery& d, const TraceLine* m, const Decision& dec) {
    handler->decided(d.broker_id, m != nullptr ? m->id : std::nullopt, dec);
  };
  auto rt = Runtime<TraceLine>::create(runtime_options(a), *source, *consumer, decode, applied);
  if (!rt.ok()) return consume_fail(kExitUsage, rt.status().message());
  const Status s = run_until_signalled(**rt);
  source->close();
  std::cout.flush();
  if (!s.ok()) return consume_fail(kExitFailure, s.to_string());
  warn_buffered(*store, *settings);
  return kExitOk;
}

}  // namespace

void add_consume_command(CLI::App& app, Runner& selected) {
  CLI::App* cmd = app.add_subcommand(
      "consume", "Consume a broker source through idem, with the built-in handler or a service's (--handler)");
  cmd->footer("SOURCE:\n" + broker_uri_forms() + kFooter);
  auto a = std::make_shared<ConsumeArgs>();
  cmd->add_option("--source", a->source, "Broker source URI (see below); required");
  add_consumer_flags(cmd, &a->consumer);
  cmd->add_option("--workers", a->workers, "Worker threads (default: the number of CPUs)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1024}));
  cmd->add_option("--batch", a->batch, "Messages per consumer call (process_batch above 1)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{10'000}))
      ->capture_default_str();
  cmd->add_option("--idle-exit-ms", a->idle_exit_ms,
                  "Exit 0 once idle this long with nothing pending, in flight or drainable (0: never)")
      ->check(CLI::Range(std::int64_t{0}, kMaxDurationMs))
      ->capture_default_str();
  cmd->add_option("--source-wait-ms", a->source_wait_ms,
                  "Try a source that cannot be reached at start again for this long (0: fail at once)")
      ->check(CLI::Range(std::int64_t{0}, kMaxDurationMs))
      ->capture_default_str();
  cmd->add_option("--max-messages", a->max_messages, "Exit 0 after deciding this many deliveries (0: no limit)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 62))
      ->capture_default_str();
  cmd->add_option("--failure-actions-per-second", a->failure_actions_per_second,
                  "Retries and dead letters sent to the broker per second at most (a poison storm waits)")
      ->check(CLI::Range(0.001, 1e9))
      ->capture_default_str();
  cmd->add_option("--failure-burst", a->failure_burst, "Retries and dead letters sent at once before that rate applies")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000}))
      ->capture_default_str();
  cmd->add_option("--clock", a->consumer.clock,
                  "Whose time leases and TTLs are measured in: the store's (one timeline for every consumer of a "
                  "Redis or PostgreSQL store; other stores use the host's) or this host's")
      ->check(CLI::IsMember({"store", "host"}))
      ->capture_default_str();
  add_sidecar_flags(cmd, &a->sidecar);
#ifdef IDEM_TOOL_WITH_YAML
  auto config = std::make_shared<std::string>();
  cmd->add_option("--config", *config, "Read flags from this YAML file (long names without --); a flag given here wins");
  cmd->callback([&selected, a, cmd, config] {
    if (!config->empty()) apply_yaml_config(*cmd, *config);
#else
  cmd->callback([&selected, a] {
#endif
    if (a->source.empty()) throw CLI::RequiredError("--source");
    selected = [a] { return run_consume(*a); };
  });
}

}  // namespace idem::cli

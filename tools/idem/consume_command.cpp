// `idem consume`: the consumer runtime from the shell (tools/idem/README.md). Reads a
// broker source, runs every message through a consumer with the built-in handler,
// prints effects and decisions as JSON lines.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "commands.hpp"
#include "consume_handler.hpp"
#include "consumer_flags.hpp"
#include "exit_codes.hpp"
#include "idem/backend/store_uri.hpp"
#include "idem/consumer.hpp"
#include "idem/open_source.hpp"
#include "idem/runtime.hpp"
#include "operator_session.hpp"
#include "trace_line.hpp"

namespace idem::cli {
namespace {

constexpr const char* kFooter =
    "Each message body is one JSON object with the fields of a replay line (id, key, version,\n"
    "event, payload, stream, position, fail). On sqlite: and postgres:// stores under effectively_once or manual\n"
    "each effect is a row of idem_effects, written in the dedup record's transaction.\n"
    "SIGINT/SIGTERM stop gracefully; a second one exits at once.\n"
    "Exit status: 0 stopped (signal, --idle-exit-ms, --max-messages); 1 the source or the store\n"
    "failed; 2 invalid options; 130 a second signal.";

constexpr int kExitSecondSignal = 130;

struct ConsumeArgs {
  ConsumerFlags consumer;
  std::string source;
  std::int64_t workers = 0;
  std::int64_t batch = 1;
  std::int64_t idle_exit_ms = 0;
  std::int64_t max_messages = 0;
};

std::atomic<Runtime<TraceLine>*> g_runtime{nullptr};
std::atomic<int> g_signals{0};

void on_signal(int) {
  if (g_signals.fetch_add(1) > 0) _exit(kExitSecondSignal);
  if (Runtime<TraceLine>* rt = g_runtime.load()) rt->stop();
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int fail(int code, const std::string& message) {
  std::cerr << "idem consume: " << message << '\n';
  return code;
}

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

// At exit: the keys whose messages still wait in the reorder buffer behind a gap,
// which nothing else reports until the gap timeout acts (on stderr; at most 10 keys).
void warn_buffered(Store& store, const ConsumerSettings& s) {
  EntityStore* entities = store.entities();
  if (entities == nullptr || s.ordering.mode != Ordering::kStrict) return;
  auto summary = entities->buffer_summary(10);
  if (!summary.ok() || summary->count == 0) return;
  std::cerr << "idem consume: warning: " << summary->count
            << (summary->count == 1 ? " message waits" : " messages wait")
            << " in the reorder buffer for an earlier version that has not arrived; it runs when that version "
               "arrives, or the gap policy (" << gap_policy_name(s.ordering.gap_policy) << ") acts "
            << s.ordering.gap_timeout.count() << " ms after it was buffered (idem inspect --store URI shows them):\n";
  for (const BufferedKey& k : summary->keys)
    std::cerr << "  key " << json_text(k.key) << ": " << k.count << " buffered from version " << k.lowest_version
              << ", since " << iso_time(k.oldest_at) << '\n';
  if (summary->keys.size() == 10) std::cerr << "  (the 10 oldest keys shown)\n";
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

RuntimeOptions runtime_options(const ConsumeArgs& a) {
  RuntimeOptions ro;
  ro.workers = static_cast<std::size_t>(a.workers);
  ro.batch = static_cast<std::size_t>(a.batch);
  ro.idle_exit = Duration(a.idle_exit_ms);
  ro.max_messages = static_cast<std::uint64_t>(a.max_messages);
  return ro;
}

int run_consume(const ConsumeArgs& a) {
  auto settings = settings_from(a.consumer, "consume");
  if (!settings) return kExitUsage;
  auto source = open_source(a.source, OpenSourceOptions{.lease = settings->lease});
  if (!source.ok() && source.status().code() == StatusCode::kInvalidArgument) {
    return fail(kExitUsage, scrub_secrets("--source: " + source.status().message(), a.source));
  }
  if (!source.ok())
    return fail(kExitFailure, scrub_secrets("cannot open source: " + source.status().to_string(), a.source));

  ConsumerOptions o = consumer_options_from(*settings);
  std::string error, db_path, pg_table;
  const EffectsIn effects = effects_target(*settings, &db_path);
  if (effects == EffectsIn::kSqlite) {  // before the store opens the file and takes its lock
    if (Status s = create_effects_table(db_path); !s.ok()) return fail(kExitFailure, s.message());
    o.transactional = true;
  }
  if (int rc = open_consumer_store(*settings, o, error); rc != kExitOk) return fail(rc, error);
  if (effects == EffectsIn::kPostgres) {  // after the store created its schema
    if (Status s = create_postgres_effects_table(settings->store_uri, &pg_table); !s.ok())
      return fail(kExitFailure, scrub_secrets(s.message(), settings->store_uri));
    o.transactional = true;
  }
  enable_outbox(*settings, o);
  const std::shared_ptr<Store> store = o.store;
  auto handler = std::make_shared<ConsumeHandler>(effects, std::cout, pg_table);
  o.on_buffered = [handler](const BufferedOutcome& b) {
    if (b.decision.reason == Reason::kProcessed) handler->committed(b.id);
  };
  auto consumer =
      Consumer<TraceLine>::create(std::move(o), trace_extractors(),
                                  [handler](const TraceLine& m, HandlerContext& ctx) { return (*handler)(m, ctx); });
  if (!consumer.ok()) return fail(kExitUsage, consumer.status().message());

  auto applied = [handler](const Delivery& d, const TraceLine* m, const Decision& dec) {
    handler->decided(d.broker_id, m != nullptr ? m->id : std::nullopt, dec);
  };
  auto rt = Runtime<TraceLine>::create(runtime_options(a), **source, *consumer, decode, applied);
  if (!rt.ok()) return fail(kExitUsage, rt.status().message());
  g_runtime.store(rt->get());
  install_signal_handlers();
  const Status s = (*rt)->run();
  g_runtime.store(nullptr);
  (*source)->close();
  std::cout.flush();
  if (!s.ok()) return fail(kExitFailure, s.to_string());
  warn_buffered(*store, *settings);
  return kExitOk;
}

}  // namespace

void add_consume_command(CLI::App& app, Runner& selected) {
  CLI::App* cmd = app.add_subcommand("consume", "Consume a broker source through idem with the built-in handler");
  cmd->footer("SOURCE:\n" + broker_uri_forms() + kFooter);
  auto a = std::make_shared<ConsumeArgs>();
  cmd->add_option("--source", a->source, "Broker source URI (see below)")->required();
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
  cmd->add_option("--max-messages", a->max_messages, "Exit 0 after deciding this many deliveries (0: no limit)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 62))
      ->capture_default_str();
  cmd->callback([&selected, a] { selected = [a] { return run_consume(*a); }; });
}

}  // namespace idem::cli

#include "consumer_flags.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <utility>

#include "exit_codes.hpp"
#include "idem/backend/store_uri.hpp"
#include "idem/open_source.hpp"
#include "idem/open_store.hpp"
#include "idem/store_clock.hpp"

#ifdef IDEM_TOOL_WITH_MACHINE
#include "idem/machine_gate.hpp"
#include "idem/machine_yaml.hpp"
#endif

namespace idem::cli {

void add_consumer_flags(CLI::App* cmd, ConsumerFlags* a) {
  a->store_option = cmd->add_option("--store", a->store,
                                    "Dedup store URI: memory:, sqlite:PATH, … (replay: default memory:; consume: a "
                                    "SQLite file per source in the state folder)");
  cmd->add_option("--guarantee", a->guarantee, "Processing guarantee")
      ->check(CLI::IsMember({"effectively_once", "at_least_once", "at_most_once", "manual"}))
      ->capture_default_str();
  cmd->add_option("--ordering", a->ordering, "Ordering per key (needs key and version; watermark: stream and position)")
      ->check(CLI::IsMember({"none", "watermark", "monotonic", "strict"}))
      ->capture_default_str();
  cmd->add_option("--machine", a->machine, "State-machine file (YAML); the event field of each line is the event");
  cmd->add_option("--max-retries", a->max_retries,
                  "Retry decisions per message id before dead_letter (default: the machine's, else 5)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{UINT32_MAX}));
  cmd->add_option("--backoff-ms", a->backoff_ms,
                  "First retry delay in ms; doubles per retry up to max(60 s, it) (default: the machine's, else 1000)")
      ->check(CLI::Range(std::int64_t{0}, kMaxDurationMs));
  cmd->add_option("--lease-ms", a->lease_ms, "In-progress lease in ms")
      ->check(CLI::Range(std::int64_t{1}, kMaxDurationMs))
      ->capture_default_str();
  cmd->add_option("--ttl-ms", a->ttl_ms, "How long a processed id is remembered, in ms")
      ->check(CLI::Range(std::int64_t{1}, kMaxDurationMs))
      ->capture_default_str();
  cmd->add_option("--gap-timeout-ms", a->gap_timeout_ms, "Strict: how long a gap may stay open (default 60000)")
      ->check(CLI::Range(std::int64_t{1}, kMaxDurationMs));
  cmd->add_option("--gap-policy", a->gap_policy, "Strict: what an expired gap does (default hold)")
      ->check(CLI::IsMember({"hold", "skip", "dead_letter"}));
  cmd->add_option("--buffer-limit", a->buffer_limit, "Strict: buffered messages per key (default 1000)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000}));
  cmd->add_option("--buffered-dead-letters-to", a->buffered_dead_letters_to,
                  "Strict: publish the dead letters of buffered messages to this URI (an 'idem publish --to' "
                  "form) through the store's outbox, so that a crash cannot lose one (sqlite:, rocksdb:, "
                  "postgres://)");
}

std::optional<ConsumerSettings> settings_from(const ConsumerFlags& a, std::string_view command) {
  auto usage_error = [command](const std::string& message) {
    std::cerr << "idem " << command << ": " << message << "\nRun 'idem " << command << " --help' for the options.\n";
  };
  ConsumerSettings s;
  s.ordering.mode = *ordering_from_name(a.ordering);  // checked by CLI::IsMember
  const bool strict = s.ordering.mode == Ordering::kStrict;
  for (auto [given, name] :
       {std::pair{a.gap_timeout_ms.has_value(), "--gap-timeout-ms"},
        std::pair{a.gap_policy.has_value(), "--gap-policy"}, std::pair{a.buffer_limit.has_value(), "--buffer-limit"},
        std::pair{a.buffered_dead_letters_to.has_value(), "--buffered-dead-letters-to"}}) {
    if (given && !strict) {
      usage_error(std::string(name) + " applies to --ordering strict only, not --ordering " + a.ordering);
      return std::nullopt;
    }
  }
  if (a.gap_timeout_ms) s.ordering.gap_timeout = Duration(*a.gap_timeout_ms);
  if (a.gap_policy) s.ordering.gap_policy = *gap_policy_from_name(*a.gap_policy);  // checked by CLI::IsMember
  if (a.buffer_limit) s.ordering.limits.per_key = static_cast<std::size_t>(*a.buffer_limit);
  if (a.buffered_dead_letters_to) s.ordering.dead_letter_to = *a.buffered_dead_letters_to;
  std::optional<std::uint32_t> machine_retries;
  std::optional<Duration> machine_backoff;
  if (a.machine) {
#ifdef IDEM_TOOL_WITH_MACHINE
    BuildResult built = load_machine_file(*a.machine);
    if (!built.ok()) {
      usage_error("--machine " + *a.machine + " is not a valid machine:\n" + built.format(Severity::kError));
      return std::nullopt;
    }
    machine_retries = built.table->max_retries();
    machine_backoff = built.table->backoff().initial;
    // --max-retries and --backoff-ms cap and pace every retry, invalid transitions too.
    MachineGateOptions gate;
    if (a.max_retries) gate.max_retries = static_cast<std::uint32_t>(*a.max_retries);
    if (a.backoff_ms) {
      Backoff b = built.table->backoff();
      b.initial = Duration(*a.backoff_ms);
      b.max = std::max(b.max, b.initial);
      gate.backoff = b;
    }
    s.machine = machine_gate(std::move(*built.table), std::move(gate));
#else
    usage_error("--machine needs idem built with IDEM_WITH_STATEMACHINE=ON");
    return std::nullopt;
#endif
  }
  s.store_uri = a.store;
  s.store_given = a.store_option->count() > 0;
  s.guarantee = *guarantee_from_name(a.guarantee);  // checked by CLI::IsMember
  s.max_retries = static_cast<std::uint32_t>(a.max_retries.value_or(machine_retries.value_or(5)));
  s.backoff = Duration(a.backoff_ms.value_or(machine_backoff.value_or(Duration(1000)).count()));
  s.lease = Duration(a.lease_ms);
  s.ttl = Duration(a.ttl_ms);
  s.host_clock = a.clock == "host";  // checked by CLI::IsMember
  return s;
}

ConsumerOptions consumer_options_from(const ConsumerSettings& s) {
  ConsumerOptions o;
  o.guarantee = s.guarantee;
  o.max_retries = s.max_retries;
  o.backoff.initial = s.backoff;
  o.backoff.max = std::max(o.backoff.max, s.backoff);
  o.lease = s.lease;
  o.ttl = s.ttl;
  o.ordering = s.ordering;
  o.machine = s.machine;
  return o;
}

int open_consumer_store(const ConsumerSettings& s, ConsumerOptions& o, std::string& error) {
  if (!needs_dedup(s.guarantee)) {
    if (!s.store_given) return kExitOk;
    error =
        "--store is not used under --guarantee at_least_once, which keeps no dedup record; "
        "drop --store or choose another guarantee";
    return kExitUsage;
  }
  auto store = open_store(s.store_uri);
  if (!store.ok()) {
    const Status& st = store.status();
    error = scrub_secrets("cannot open store \"" + s.store_uri + "\": " + st.to_string(), s.store_uri);
    return st.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  o.store = std::move(store).value();
  if (int rc = set_store_clock(s, o, error); rc != kExitOk) return rc;
  return enable_buffered_dead_letters(s, o, error);
}

int set_store_clock(const ConsumerSettings& s, ConsumerOptions& o, std::string& error) {
  if (o.clock) return kExitOk;  // chosen by the caller (idem replay's logical clock)
  auto clock = s.host_clock ? StatusOr<std::shared_ptr<Clock>>(system_clock()) : clock_for(o.store);
  if (!clock.ok()) {
    error = "cannot read the time of store " + redact_uri(s.store_uri) + ": " +
            scrub_secrets(clock.status().to_string(), s.store_uri);
    return kExitFailure;
  }
  o.clock = std::move(clock).value();
  return kExitOk;
}

int enable_buffered_dead_letters(const ConsumerSettings& s, ConsumerOptions& o, std::string& error) {
  const std::string& to = s.ordering.dead_letter_to;
  if (to.empty()) return kExitOk;
  if (o.store->outbox() == nullptr) {
    error = "--buffered-dead-letters-to needs a store that keeps an outbox (sqlite:, rocksdb:, postgres://), not " +
            redact_uri(s.store_uri);
    return kExitUsage;
  }
  auto publisher = open_publisher(to);  // once now, so that a wrong URI stops the start
  if (!publisher.ok()) {
    error = scrub_secrets("--buffered-dead-letters-to " + redact_uri(to) + ": " + publisher.status().to_string(), to);
    return publisher.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  o.outbox.publishers = [](const std::string& destination) { return open_publisher(destination); };
  return kExitOk;
}

}  // namespace idem::cli

// The command line of `idem replay` (docs/design.md §8): options → ReplaySettings, the
// trace file, then run_replay().
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "replay.hpp"
#ifdef IDEM_TOOL_WITH_MACHINE
#include "idem/machine_gate.hpp"
#include "idem/machine_yaml.hpp"
#endif

namespace idem::cli {
namespace {

constexpr const char* kFooter =
    "TRACE is a file of JSON objects, one delivery per line, or - (the default) for stdin:\n"
    "  {\"id\":\"order-1\",\"payload\":\"...\",\"at_ms\":1000,\"fail\":false}\n"
    "Output, one JSON object per line: {\"type\":\"effect\",...} when the built-in handler's\n"
    "effect is committed, then exactly one {\"type\":\"decision\",\"line\":N,...} per input line.\n"
    "Exit status: 0 the trace was replayed; 1 the store or the input failed; 2 invalid options.";

// The command line as given, before it is checked against what this version supports.
struct ReplayArgs {
  std::string store = "memory:";
  std::string guarantee = "effectively_once";
  std::string ordering = "none";
  std::optional<std::string> machine;
  std::optional<std::int64_t> max_retries;  // default: the machine's, else 5
  std::optional<std::int64_t> backoff_ms;   // default: the machine's initial delay, else 1000
  std::int64_t lease_ms = 30'000;
  std::int64_t ttl_ms = 7LL * 24 * 3600 * 1000;
  std::optional<std::int64_t> gap_timeout_ms;
  std::optional<std::string> gap_policy;
  std::optional<std::int64_t> buffer_limit;
  std::string trace = "-";
  CLI::Option* store_option = nullptr;
};

int usage_error(const std::string& message) {
  std::cerr << "idem replay: " << message << "\nRun 'idem replay --help' for the options.\n";
  return kExitUsage;
}

// Returns the settings, or prints why the arguments cannot be used and returns nullopt.
std::optional<ReplaySettings> settings_from(const ReplayArgs& a) {
  ReplaySettings s;
  s.ordering.mode = *ordering_from_name(a.ordering);  // checked by CLI::IsMember
  const bool strict = s.ordering.mode == Ordering::kStrict;
  for (auto [given, name] :
       {std::pair{a.gap_timeout_ms.has_value(), "--gap-timeout-ms"},
        std::pair{a.gap_policy.has_value(), "--gap-policy"}, std::pair{a.buffer_limit.has_value(), "--buffer-limit"}}) {
    if (given && !strict) {
      usage_error(std::string(name) + " applies to --ordering strict only, not --ordering " + a.ordering);
      return std::nullopt;
    }
  }
  if (a.gap_timeout_ms) s.ordering.gap_timeout = Duration(*a.gap_timeout_ms);
  if (a.gap_policy) s.ordering.gap_policy = *gap_policy_from_name(*a.gap_policy);  // checked by CLI::IsMember
  if (a.buffer_limit) s.ordering.limits.per_key = static_cast<std::size_t>(*a.buffer_limit);
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
  return s;
}

int run_replay_command(const ReplayArgs& a) {
  auto settings = settings_from(a);
  if (!settings) return kExitUsage;
  if (a.trace == "-") {
    settings->flush_every_line = true;  // stdin may be a live stream
    return run_replay(*settings, std::cin, std::cout, std::cerr);
  }
  std::error_code ec;
  if (std::filesystem::is_directory(a.trace, ec)) {
    std::cerr << "idem replay: cannot read trace \"" << a.trace << "\": it is a directory\n";
    return kExitFailure;
  }
  std::ifstream file(a.trace, std::ios::in | std::ios::binary);
  if (!file) {
    std::cerr << "idem replay: cannot read trace \"" << a.trace << "\": " << std::strerror(errno) << '\n';
    return kExitFailure;
  }
  return run_replay(*settings, file, std::cout, std::cerr);
}

}  // namespace

void add_replay_command(CLI::App& app, Runner& selected) {
  CLI::App* cmd = app.add_subcommand(
      "replay", "Run a trace of deliveries through a consumer; print its effects and decisions as JSON lines");
  cmd->footer(kFooter);
  auto a = std::make_shared<ReplayArgs>();
  a->store_option =
      cmd->add_option("--store", a->store, "Dedup store URI: memory:, sqlite:PATH, …")->capture_default_str();
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
  cmd->add_option("trace", a->trace, "Trace file (JSON lines), or - for stdin")->capture_default_str();
  cmd->callback([&selected, a] { selected = [a] { return run_replay_command(*a); }; });
}

}  // namespace idem::cli

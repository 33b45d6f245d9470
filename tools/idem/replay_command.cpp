// The command line of `idem replay` (DESIGN.md §8): options → ReplaySettings, the
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
  std::int64_t max_retries = 5;
  std::int64_t backoff_ms = 1000;
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
  if (a.ordering != "none") {
    usage_error("--ordering " + a.ordering + " is not available in this version of idem replay (only none)");
    return std::nullopt;
  }
  if (a.machine) {
    usage_error("--machine is not available in this version of idem replay (no state machines yet)");
    return std::nullopt;
  }
  for (auto [given, name] :
       {std::pair{a.gap_timeout_ms.has_value(), "--gap-timeout-ms"},
        std::pair{a.gap_policy.has_value(), "--gap-policy"}, std::pair{a.buffer_limit.has_value(), "--buffer-limit"}}) {
    if (given) {
      usage_error(std::string(name) +
                  " applies to --ordering strict only, and this version of idem replay "
                  "supports --ordering none only");
      return std::nullopt;
    }
  }
  ReplaySettings s;
  s.store_uri = a.store;
  s.store_given = a.store_option->count() > 0;
  s.guarantee = *guarantee_from_name(a.guarantee);  // checked by CLI::IsMember
  s.max_retries = static_cast<std::uint32_t>(a.max_retries);
  s.backoff = Duration(a.backoff_ms);
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
  cmd->add_option("--ordering", a->ordering, "Ordering per key (this version: none)")
      ->check(CLI::IsMember({"none", "watermark", "monotonic", "strict"}))
      ->capture_default_str();
  cmd->add_option("--machine", a->machine, "State-machine file (not available in this version)");
  cmd->add_option("--max-retries", a->max_retries, "Retry decisions per message id before dead_letter")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{UINT32_MAX}))
      ->capture_default_str();
  cmd->add_option("--backoff-ms", a->backoff_ms, "First retry delay in ms; doubles per retry up to max(60 s, it)")
      ->check(CLI::Range(std::int64_t{0}, kMaxDurationMs))
      ->capture_default_str();
  cmd->add_option("--lease-ms", a->lease_ms, "In-progress lease in ms")
      ->check(CLI::Range(std::int64_t{1}, kMaxDurationMs))
      ->capture_default_str();
  cmd->add_option("--ttl-ms", a->ttl_ms, "How long a processed id is remembered, in ms")
      ->check(CLI::Range(std::int64_t{1}, kMaxDurationMs))
      ->capture_default_str();
  cmd->add_option("--gap-timeout-ms", a->gap_timeout_ms, "Strict ordering only (not available in this version)");
  cmd->add_option("--gap-policy", a->gap_policy, "Strict ordering only (not available in this version)");
  cmd->add_option("--buffer-limit", a->buffer_limit, "Strict ordering only (not available in this version)");
  cmd->add_option("trace", a->trace, "Trace file (JSON lines), or - for stdin")->capture_default_str();
  cmd->callback([&selected, a] { selected = [a] { return run_replay_command(*a); }; });
}

}  // namespace idem::cli

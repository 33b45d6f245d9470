// The command line of `idem replay` (docs/design.md §8): options → ConsumerSettings, the
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
#include "consumer_flags.hpp"
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

// The command line as given, before it is checked.
struct ReplayArgs {
  ConsumerFlags consumer;
  std::string trace = "-";
};

int run_replay_command(const ReplayArgs& a) {
  auto settings = settings_from(a.consumer, "replay");
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
  add_consumer_flags(cmd, &a->consumer);
  cmd->add_option("trace", a->trace, "Trace file (JSON lines), or - for stdin")->capture_default_str();
  cmd->callback([&selected, a] { selected = [a] { return run_replay_command(*a); }; });
}

}  // namespace idem::cli

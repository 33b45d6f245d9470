// The idem command: subcommands over the library (docs/design.md §8). Each subcommand lives
// in its own <name>_command.cpp and registers itself in commands.hpp.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string_view>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "idem/backend/store_uri.hpp"

#ifndef IDEM_VERSION
#error "IDEM_VERSION (the project version) must be defined by the build"
#endif

namespace {

// A secret written on the command line still works, with one warning (never the secret).
void warn_of_secrets_in_argv(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (idem::redact_uri(arg) == arg) continue;
    std::cerr << "idem: warning: argument " << i << " holds a password or token, which every user of this host can "
              << "read (ps, /proc/PID/cmdline); give it as NAME_file=PATH or NAME_env=VAR instead "
              << "(docs/security.md)\n";
    return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  CLI::App app("idem: effectively-once message processing, from the shell", "idem");
  app.require_subcommand(1);
  app.set_version_flag("--version", "idem " IDEM_VERSION, "Print the version and exit");
  idem::cli::Runner selected;
  idem::cli::add_replay_command(app, selected);
  idem::cli::add_inspect_command(app, selected);
  idem::cli::add_purge_command(app, selected);
  idem::cli::add_bench_command(app, selected);
#ifdef IDEM_TOOL_WITH_BROKERS
  idem::cli::add_consume_command(app, selected);
  idem::cli::add_publish_command(app, selected);
#endif
#ifdef IDEM_TOOL_WITH_MACHINE
  idem::cli::add_machine_command(app, selected);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help, or the error, as CLI11 formats it
    return rc == 0 ? idem::cli::kExitOk : idem::cli::kExitUsage;
  }
  warn_of_secrets_in_argv(argc, argv);
  try {
    return selected();
  } catch (const std::exception& e) {
    std::cerr << "idem: internal error: " << e.what() << '\n';
    return idem::cli::kExitFailure;
  }
}

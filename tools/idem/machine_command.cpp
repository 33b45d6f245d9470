// `idem machine check FILE` and `idem machine dot FILE`: validate a state-machine file
// and print a summary, or print it as Graphviz DOT (docs/statemachines.md).
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "idem/statemachine.hpp"

namespace idem::cli {
namespace {

constexpr const char* kFooter =
    "Exit status: 0 the machine is valid (warnings allowed); 1 it is invalid or cannot be read\n"
    "(each error on stderr as FILE:LINE:COL: error: message); 2 invalid command line.";

// Loads the file, prints its diagnostics (errors and warnings) on stderr. Returns the
// result; a table iff valid.
BuildResult load(const std::string& path) {
  BuildResult r = load_machine_file(path);
  for (const auto& d : r.diagnostics) std::cerr << d.to_string() << '\n';
  return r;
}

std::string joined_states(const TransitionTable& t, const std::vector<StateId>& ids) {
  std::string out;
  for (StateId s : ids) out += (out.empty() ? "" : ", ") + t.state_name(s);
  return out;
}

int run_check(const std::string& path) {
  const BuildResult r = load(path);
  if (!r.ok()) {
    std::cerr << path << ": invalid: " << r.error_count() << " error(s), " << r.warning_count() << " warning(s)\n";
    return kExitFailure;
  }
  const TransitionTable& t = *r.table;
  std::vector<StateId> all(t.state_count());
  for (std::size_t s = 0; s < all.size(); ++s) all[s] = static_cast<StateId>(s);
  std::string events;
  for (std::size_t e = 0; e < t.event_count(); ++e) events += (e ? ", " : "") + t.event_name(static_cast<EventId>(e));
  std::cout << "machine: " << t.name() << " (valid)\n"
            << "states: " << t.state_count() << " (" << joined_states(t, all) << ")\n"
            << "events: " << t.event_count() << " (" << events << ")\n"
            << "transitions: " << t.transitions().size() << '\n'
            << "initial: " << t.state_name(t.initial()) << '\n'
            << "final: " << joined_states(t, t.finals()) << '\n'
            << "max_retries: " << t.max_retries() << '\n'
            << "backoff: initial_ms=" << t.backoff().initial.count() << " multiplier=" << t.backoff().multiplier
            << " max_ms=" << t.backoff().max.count() << '\n';
  for (const auto& [old_name, new_name] : t.renamed())
    std::cout << "renamed: " << old_name << " -> " << new_name << '\n';
  std::cout << "warnings: " << r.warning_count() << '\n';
  return kExitOk;
}

int run_dot(const std::string& path) {
  const BuildResult r = load(path);
  if (!r.ok()) return kExitFailure;
  std::cout << to_dot(*r.table);
  return kExitOk;
}

}  // namespace

void add_machine_command(CLI::App& app, Runner& selected) {
  CLI::App* cmd = app.add_subcommand("machine", "Check a state-machine file, or print it as Graphviz DOT");
  cmd->require_subcommand(1);
  auto path = std::make_shared<std::string>();

  CLI::App* check = cmd->add_subcommand("check", "Validate a state-machine file and print a summary");
  check->footer(kFooter);
  check->add_option("file", *path, "State-machine file (YAML)")->required();
  check->callback([&selected, path] { selected = [path] { return run_check(*path); }; });

  CLI::App* dot = cmd->add_subcommand("dot", "Print a state-machine file as a Graphviz DOT digraph");
  dot->footer(kFooter);
  dot->add_option("file", *path, "State-machine file (YAML)")->required();
  dot->callback([&selected, path] { selected = [path] { return run_dot(*path); }; });
}

}  // namespace idem::cli

// The subcommands of the idem command. Each registers itself on the top-level app
// and, when the user selects it, stores in `selected` the function that runs it.
// main() runs that function after the whole command line has been parsed.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace idem::cli {

// Runs a parsed subcommand. Returns the process exit status (exit_codes.hpp).
using Runner = std::function<int()>;

// `idem replay`: runs a trace through a consumer (docs/design.md §8, replay_command.cpp).
void add_replay_command(CLI::App& app, Runner& selected);

// `idem inspect`: a record, an entity, or a store's counts and reorder buffer
// (inspect_command.cpp).
void add_inspect_command(CLI::App& app, Runner& selected);

// `idem purge`: removes expired records, or one record or entity (purge_command.cpp).
void add_purge_command(CLI::App& app, Runner& selected);

// `idem bench`: idem against the raw store and the naive approach (bench_command.cpp).
void add_bench_command(CLI::App& app, Runner& selected);

#ifdef IDEM_TOOL_WITH_BROKERS
// `idem consume --source URI …`: the consumer runtime (consume_command.cpp).
void add_consume_command(CLI::App& app, Runner& selected);
// `idem publish --to URI FILE`: one message per line (publish_command.cpp).
void add_publish_command(CLI::App& app, Runner& selected);
#endif

#ifdef IDEM_TOOL_WITH_MACHINE
// `idem machine check|dot FILE`: validates a state-machine file (machine_command.cpp).
void add_machine_command(CLI::App& app, Runner& selected);
#endif

}  // namespace idem::cli

// idem_bench_statemachine: the cost of the transition check (target: ≤ 100 ns per
// message in memory, "a table lookup, not a string search").
//
// One run, two machines (the product machine, and a generated one with
// --states states and --events events), one deterministic stream of (state, event)
// pairs each. Rows:
//   next(id)       TransitionTable::next(state_id, event_id): the run-time check
//   verdict(id)    TransitionTable::verdict(): the three answers, precomputed
//   name→id+next   event_id(name) (one hash lookup per message), then next()
//   names→ids+verd state_id(stored name) and event_id(name), then verdict(): the
//                  per-message path when the state is stored by name
//   check(names)   check(state name, event name): both lookups, the verdict, and the
//                  reason string built for every event not applied (most of the stream)
//   naive scan     for contrast: a linear search of (from, event) strings over the rows
// and the time to load the product machine's YAML file.
//
// Exit status: 0; 3 with --strict if a path by ids or names (not check()) costs more
// than 100 ns; 1 if the paths disagree on the number of accepted events; 2 if the run
// cannot start.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "idem/statemachine.hpp"

namespace idem::bench {
namespace {

using BenchClock = std::chrono::steady_clock;

constexpr double kTargetNs = 100.0;

struct Pair {
  StateId state;
  EventId event;
};

struct Measured {
  double ns_per_check;
  std::uint64_t accepted;  // events with a transition: the paths must agree
};

template <class F>
Measured measure(std::size_t rounds, std::size_t n, F&& one) {
  std::uint64_t accepted = 0;
  const auto start = BenchClock::now();
  for (std::size_t r = 0; r < rounds; ++r)
    for (std::size_t i = 0; i < n; ++i) accepted += one(i);
  const auto ns = std::chrono::duration<double, std::nano>(BenchClock::now() - start).count();
  return {ns / static_cast<double>(rounds * n), accepted / rounds};
}

TransitionTable generated(std::size_t states, std::size_t events, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Machine m("generated");
  m.initial("s0");
  // A ring through every state (all reachable), then random rows for a third of the cells.
  for (std::size_t s = 0; s < states; ++s)
    m.add(row("s" + std::to_string(s), "e0", "s" + std::to_string((s + 1) % states)));
  for (std::size_t s = 0; s < states; ++s)
    for (std::size_t e = 1; e < events; ++e)
      if (rng() % 3 == 0)
        m.add(row("s" + std::to_string(s), "e" + std::to_string(e), "s" + std::to_string(rng() % states)));
  BuildResult r = m.build();
  if (!r.ok()) {
    std::fprintf(stderr, "idem_bench_statemachine: generated machine invalid:\n%s", r.format(Severity::kError).c_str());
    std::exit(2);
  }
  return std::move(*r.table);
}

// Returns true iff every path counted the same accepted events and (strict) met the target.
bool run_machine(const char* title, const TransitionTable& t, std::size_t n, std::size_t rounds, std::uint64_t seed,
                 bool& target_failed) {
  std::mt19937_64 rng(seed);
  std::vector<Pair> pairs(n);
  std::vector<std::string> state_names(n), event_names(n);
  for (std::size_t i = 0; i < n; ++i) {
    pairs[i] = {static_cast<StateId>(rng() % t.state_count()), static_cast<EventId>(rng() % t.event_count())};
    state_names[i] = t.state_name(pairs[i].state);
    event_names[i] = t.event_name(pairs[i].event);
  }
  // The naive form: the rows as strings, searched linearly per message.
  struct NamedRow {
    std::string from, event, to;
  };
  std::vector<NamedRow> rows;
  for (const auto& tr : t.transitions())
    rows.push_back({t.state_name(tr.from), t.event_name(tr.event), t.state_name(tr.to)});

  const Measured by_id =
      measure(rounds, n, [&](std::size_t i) { return t.next(pairs[i].state, pairs[i].event).has_value() ? 1u : 0u; });
  const Measured verdict = measure(
      rounds, n, [&](std::size_t i) { return t.verdict(pairs[i].state, pairs[i].event) == Verdict::kApply ? 1u : 0u; });
  const Measured by_name = measure(rounds, n, [&](std::size_t i) {
    const auto e = t.event_id(event_names[i]);
    return e && t.next(pairs[i].state, *e).has_value() ? 1u : 0u;
  });
  const Measured both_names = measure(rounds, n, [&](std::size_t i) {
    const auto st = t.state_id(state_names[i]);
    const auto e = t.event_id(event_names[i]);
    return st && e && t.verdict(*st, *e) == Verdict::kApply ? 1u : 0u;
  });
  const Measured check = measure(rounds, n, [&](std::size_t i) {
    return t.check(state_names[i], event_names[i]).verdict == Verdict::kApply ? 1u : 0u;
  });
  const std::size_t naive_rounds = std::max<std::size_t>(1, rounds / 4);
  const Measured naive = measure(naive_rounds, n, [&](std::size_t i) {
    for (const auto& r : rows)
      if (r.from == state_names[i] && r.event == event_names[i]) return 1u;
    return 0u;
  });

  std::printf("\n%s: %zu states, %zu events, %zu transitions; %zu checks x %zu rounds\n", title, t.state_count(),
              t.event_count(), t.transitions().size(), n, rounds);
  std::printf("  %-16s %10s   %s\n", "path", "ns/check", "target");
  auto line = [&](const char* name, double ns, bool has_target) {
    const bool ok = ns <= kTargetNs;
    if (has_target && !ok) target_failed = true;
    std::printf("  %-16s %10.2f   %s\n", name, ns, has_target ? (ok ? "<= 100 ns: met" : "<= 100 ns: MISSED") : "");
  };
  line("next(id)", by_id.ns_per_check, true);
  line("verdict(id)", verdict.ns_per_check, true);
  line("name->id+next", by_name.ns_per_check, true);
  line("names->ids+verd", both_names.ns_per_check, true);
  line("check(names)", check.ns_per_check, false);
  line("naive scan", naive.ns_per_check, false);
  const bool agree = by_id.accepted == verdict.accepted && by_id.accepted == by_name.accepted &&
                     by_id.accepted == check.accepted && by_id.accepted == both_names.accepted &&
                     by_id.accepted == naive.accepted;
  std::printf("  accepted per round: %llu of %zu%s\n", static_cast<unsigned long long>(by_id.accepted), n,
              agree ? "" : "  (PATHS DISAGREE)");
  return agree;
}

}  // namespace
}  // namespace idem::bench

int main(int argc, char** argv) {
  using namespace idem;
  using namespace idem::bench;
  CLI::App app("idem_bench_statemachine: the cost of the transition check", "idem_bench_statemachine");
  std::size_t n = 1'000'000;
  std::size_t rounds = 20;
  std::size_t states = 64;
  std::size_t events = 32;
  std::uint64_t seed = 42;
  bool strict = false;
  std::string machine_file;
  app.add_option("-n,--checks", n, "Checks per round (distinct random pairs)")->capture_default_str();
  app.add_option("-r,--rounds", rounds, "Rounds over the same pairs")->capture_default_str();
  app.add_option("--states", states, "States of the generated machine")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--events", events, "Events of the generated machine")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--seed", seed, "Seed of the streams")->capture_default_str();
  app.add_option("--machine", machine_file,
                 "YAML machine to time the load of (default: examples/machines/product.yaml)");
  app.add_flag("--strict", strict, "Exit 3 if a target is missed");
  CLI11_PARSE(app, argc, argv);
  if (n == 0 || rounds == 0) {
    std::fprintf(stderr, "idem_bench_statemachine: --checks and --rounds must be positive\n");
    return 2;
  }

  BuildResult product = Machine("product")
                            .initial("offline")
                            .final_states({"deleted"})
                            .rows({row("offline", "online", "online"), row("online", "offline", "offline"),
                                   row({"online", "offline"}, "delete", "deleted")})
                            .build();
  if (!product.ok()) return 2;
  bool target_failed = false;
  bool agree = run_machine("product", *product.table, n, rounds, seed, target_failed);
  agree = run_machine("generated", generated(states, events, seed), n, rounds, seed + 1, target_failed) && agree;

  if (machine_file.empty()) machine_file = IDEM_BENCH_PRODUCT_YAML;
  constexpr int kLoads = 2000;
  const auto start = BenchClock::now();
  std::size_t loaded = 0;
  for (int i = 0; i < kLoads; ++i) loaded += load_machine_file(machine_file).ok() ? 1 : 0;
  const auto us = std::chrono::duration<double, std::micro>(BenchClock::now() - start).count() / kLoads;
  std::printf("\nload_machine_file(%s): %.1f us per load (%zu of %d valid)\n", machine_file.c_str(), us, loaded,
              kLoads);

  if (!agree) return 1;
  if (strict && target_failed) return 3;
  return 0;
}

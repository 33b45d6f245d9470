// The options `idem replay` and `idem consume` share: the consumer's configuration
// (store, guarantee, ordering, machine, retries, lease, TTL), how they are declared on a
// command line and how they are checked (docs/design.md §8).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "idem/clock.hpp"
#include "idem/guarantee.hpp"
#include "idem/options.hpp"
#include "idem/ordering.hpp"
#include "idem/state_gate.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace idem::cli {

// The largest --lease-ms, --ttl-ms and --backoff-ms: 100 years.
inline constexpr std::int64_t kMaxDurationMs = 100LL * 365 * 24 * 3600 * 1000;

// The checked configuration of the consumer a command runs.
struct ConsumerSettings {
  std::string store_uri = "memory:";                  // --store; default memory:
  bool store_given = false;                           // --store was on the command line
  Guarantee guarantee = Guarantee::kEffectivelyOnce;  // --guarantee; default effectively_once
  std::uint32_t max_retries = 5;                      // --max-retries; retry decisions per id; default 5
  Duration backoff{1000};                             // --backoff-ms; first retry delay, doubling; 1 s
  Duration lease{30'000};                             // --lease-ms; in-progress lease; default 30 s
  Duration ttl{7LL * 24 * 3600 * 1000};               // --ttl-ms; how long a done id is remembered; 7 days
  bool flush_every_line = false;                      // flush the output after each line (streaming)
  OrderingOptions ordering;                           // --ordering, --gap-timeout-ms, --gap-policy, --buffer-limit,
                                                      // --buffered-dead-letters-to
  std::shared_ptr<const StateGate> machine;           // --machine FILE; null: none
  bool host_clock = false;                            // consume --clock host: the host's clock, not the store's
};

// The command line as given, before it is checked.
struct ConsumerFlags {
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
  std::optional<std::string> buffered_dead_letters_to;
  std::string clock = "store";  // consume --clock (declared by the consume command)
  CLI::Option* store_option = nullptr;
};

// Declares the shared options on `cmd`, writing into `a` (which must outlive parsing).
void add_consumer_flags(CLI::App* cmd, ConsumerFlags* a);

// Returns the settings, or prints "idem <command>: <why>" to stderr and returns
// nullopt when the flags cannot be used together.
std::optional<ConsumerSettings> settings_from(const ConsumerFlags& a, std::string_view command);

// The ConsumerOptions the settings describe (guarantee, retries, backoff, lease, TTL,
// ordering, machine); the caller adds the store, clock and owner.
ConsumerOptions consumer_options_from(const ConsumerSettings& s);

// Opens the settings' store into o.store when the guarantee keeps dedup records.
// Returns kExitOk, or the exit status after writing why to `error`: kExitUsage for a
// bad URI or a --store the guarantee does not use, kExitFailure for a store that
// cannot be opened.
// Unless o.clock is set, sets it to the store's timeline (set_store_clock).
// With --buffered-dead-letters-to, also checks that the store keeps an outbox and
// that a publisher for the URI opens, and sets o.outbox.publishers.
int open_consumer_store(const ConsumerSettings& s, ConsumerOptions& o, std::string& error);

// The clock part of open_consumer_store: o.clock becomes a StoreClock over a store with
// a time of its own (Redis, PostgreSQL: every process of the store on one timeline,
// whatever its host's clock says), else (or with --clock host) the host's clock.
// kExitFailure when the store's time cannot be read.
int set_store_clock(const ConsumerSettings& s, ConsumerOptions& o, std::string& error);

// The --buffered-dead-letters-to part of open_consumer_store.
int enable_buffered_dead_letters(const ConsumerSettings& s, ConsumerOptions& o, std::string& error);

}  // namespace idem::cli

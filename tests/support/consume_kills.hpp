// The end-to-end kill test of `idem consume`, shared by every broker adapter's tests:
// 20,000+ messages with redelivered copies, keys with versions (some out of order),
// failing first attempts and malformed bodies are published through `idem publish`;
// `idem consume` on SQLite is SIGKILLed at random moments (once with a second consumer
// of the group beside it) and restarted until idle. Then idem_effects must hold every
// effect exactly once, nothing lost (under strict ordering, per key in version order);
// the dead-letter destination exactly the malformed messages; the reorder buffer
// nothing; the broker nothing unsettled.
// IDEM_CONSUME_KILLS=N sets the number of kills (default 10; 50 or more for a long run).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <set>
#include <string>
#include <vector>

#include "support/netns.hpp"

namespace idem::consume_kills {

// A started broker under test. `topic` names what is consumed (stream, queue,
// subject, topic); `group` the consumer group (or durable consumer).
class Broker {
 public:
  virtual ~Broker() = default;
  // `idem consume --source`.
  virtual std::string source_uri(const std::string& topic, const std::string& group) = 0;
  // The same for a consumer on a partition test's host, which reaches the broker at
  // `address` only. Default: source_uri() with 127.0.0.1 replaced by address.
  virtual std::string source_uri_from(const std::string& address, const std::string& topic, const std::string& group);
  // `idem publish --to`.
  virtual std::string publish_uri(const std::string& topic) = 0;
  // Every body in the dead-letter destination of `topic`, once per record (a copy
  // written again after a kill counts again).
  virtual std::multiset<std::string> dead_letter_bodies(const std::string& topic) = 0;
  // True where a kill can make a dead letter be written again (Kafka, Pulsar: the
  // publish and the ack or offset commit are two steps; docs/adapters.md); the kill test
  // then allows one copy per origin and kill, and prints how many there were.
  virtual bool dead_letters_may_repeat() const { return false; }
  // Deliveries of `topic` to `group` neither acked nor dead-lettered; -1 when the
  // broker cannot tell (the check is then skipped for this broker alone).
  virtual std::int64_t unsettled(const std::string& topic, const std::string& group) = 0;
};

// How the consumer runs: strict ordering one message at a time (per-key order is
// checked), or no ordering in batches, one SQLite transaction per batch.
struct Mode {
  const char* name;
  bool strict;
  const char* batch;
};
// For test names and failure messages: the mode's name, not its bytes.
void PrintTo(const Mode& m, std::ostream* os);

struct KillOptions {
  int kills = 10;  // IDEM_CONSUME_KILLS overrides it when larger
  std::string topic = "orders";
  std::string group = "g";
  std::string lease_ms = "1000";        // --lease-ms: how soon a killed consumer's messages return
  std::string idle_exit_ms = "1500";    // --idle-exit-ms of every consumer
  std::vector<std::string> extra_args;  // more `idem consume` flags
  std::chrono::seconds final_timeout{120};
  // How long each consumer runs before it is killed: alive_min plus up to alive_spread
  // at random. A broker whose group join takes longer than alive_min needs more.
  std::chrono::milliseconds alive_min{150};
  std::chrono::milliseconds alive_spread{600};
  // Consumers of the group running side by side. With 1, each round starts one (once
  // two) and kills it; with more, they all run from the start and each round kills
  // one of them at random and starts it again (a group under churn).
  int members = 1;
  // Called after each round's kill, before the next start (e.g. to stop or start a
  // broker); may be empty.
  std::function<void(int round)> after_kill;
};

// Runs the whole test against `broker`; reports through gtest assertions.
void run_kill_test(Broker& broker, const Mode& mode, const KillOptions& options = {});

// The partition test of `idem consume` (label "partitions"): the same workload and
// checks, with two consumers of the group and no kills. One runs on `host`
// (support/netns.hpp) and reaches the broker over its link (the broker's URIs with
// Broker::source_uri_from(host.here(), …), where the broker must listen too); the other
// starts once that one has applied an effect (up to 60 s). The link is
// cut `cuts` times for `cut_for` (longer than the lease: the other consumer takes the
// cut one's deliveries over) with `between` of service before each cut. Both must
// reconnect by themselves and exit at idle. With loss_percent, the link also drops that
// share of its packets, at random, for the whole run. Prints one line of figures.
struct PartitionOptions {
  std::string label;  // the broker's name in the printed line
  int loss_percent = 0;
  int cuts = 3;
  std::chrono::milliseconds cut_for{3000};
  std::chrono::milliseconds between{1500};
};
void run_partition_test(Broker& broker, const Mode& mode, const KillOptions& options, test_support::Host& host,
                        const PartitionOptions& partitions);

// Starts `idem args…` (the binary under test) with stdout and stderr appended to
// `log`, in host's network namespace when not null; it dies with the test process.
pid_t spawn_idem(const std::vector<std::string>& args, const std::string& log,
                 const test_support::Host* host = nullptr);

// Waits up to `timeout` for pid; returns its exit code (128 + signal when killed), or
// -1 after killing it when it did not exit in time.
int wait_exit(pid_t pid, std::chrono::seconds timeout);

// The rows of idem_effects in the order they were written, and how many messages the
// reorder buffer still holds (-1 when it cannot be read).
struct EffectRow {
  std::string id, key;
  long long version;
};
std::vector<EffectRow> read_effects(const std::string& db_path, long long* buffered);

}  // namespace idem::consume_kills

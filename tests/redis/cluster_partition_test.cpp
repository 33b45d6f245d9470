// A Redis Cluster across three hosts of the test's own (support/netns.hpp: one
// namespace each, on one switch), two nodes per host, no replica on its master's host.
// A consumer on host 0 works on ids of the master there. Host 0 is cut from the
// switch: the master is cut from its replica and from every other client, but keeps
// acknowledging the consumer beside it until its node timeout (1 s) tells it that it
// lost the majority. The other side promotes its replica. Then the link returns, the
// old master rejoins as a replica and drops what it acknowledged alone. The broker
// redelivers every id the consumer on host 0 was told was committed, to a consumer on
// the test's side: each one that runs again is a duplicate caused by an acknowledged
// write the failover lost.
//   - Without WAIT, every commit acknowledged in the window runs again.
//   - With wait_replicas=1, a commit returns OK only once the replica has it, and the
//     replica is what gets promoted: none runs again (docs/stores.md gives the bound).
// Label "partitions"; prints one line per case; skips with the reason without root.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster/key_slot.hpp"
#include "idem/consumer.hpp"
#include "support/netns.hpp"
#include "support/redis_cluster.hpp"
#include "test_util.hpp"

namespace idem::redis_test {
namespace {

using namespace std::chrono_literals;
using test_support::Lan;

struct Msg {
  std::string id;
};

Extractors<Msg> extractors() {
  Extractors<Msg> x;
  x.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  return x;
}

redis::Options store_options(const std::string& uri, int wait_replicas) {
  redis::Options o = options_for(uri);
  o.connect_timeout = Duration(200);
  o.command_timeout = Duration(300);
  o.reconnect_max = Duration(200);
  o.cluster_retries = 2;
  o.wait_replicas = wait_replicas;
  o.wait_timeout = Duration(100);
  return o;
}

// What the consumer on host 0 was told.
struct HostSide {
  std::vector<std::string> acked;  // committed: the broker was acked
  std::size_t acked_before_cut = 0;
  std::size_t failed = 0;  // store_unavailable and other retries
};

// The test's hold on the consumer on host 0: while `hold` is set it starts no message
// and says so in `held`.
struct Hold {
  std::atomic<bool> hold{false}, held{false};
};

// The consumer on host 0: processes `ids` in order, each once, until `stop`; notes
// how many were acked when `cut` became true.
HostSide consume_on_host(const Lan& lan, const std::string& uri, int wait_replicas, const std::vector<std::string>& ids,
                         const std::atomic<bool>& cut, const std::atomic<bool>& stop, std::atomic<std::size_t>& acked,
                         Hold& hold) {
  HostSide out;
  if (!lan.enter(0).ok()) return out;
  auto store = open_or_die(store_options(uri, wait_replicas));
  if (store == nullptr) return out;
  ConsumerOptions o;
  o.store = store;
  o.owner = "host-0";
  o.lease = Duration(1000);  // a claim the failover kept without its commit expires soon
  o.store_retry_delay = Duration(0);
  auto c = Consumer<Msg>::create(o, extractors(), [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  if (!c.ok()) return out;
  bool was_cut = false;
  for (const std::string& id : ids) {
    for (; hold.hold.load() && !stop.load(); std::this_thread::sleep_for(1ms)) hold.held = true;
    hold.held = false;
    if (stop.load()) break;
    if (cut.load() && !std::exchange(was_cut, true)) out.acked_before_cut = out.acked.size();
    const Decision d = c->process({id});
    if (d.action == Action::kAck && d.reason == Reason::kProcessed) {
      out.acked.push_back(id);
      acked.store(out.acked.size());
    } else {
      ++out.failed;
      std::this_thread::sleep_for(20ms);
    }
  }
  return out;
}

// True once the master's replica has acknowledged its whole replication stream
// (INFO replication: the replica's offset equals master_repl_offset), within `within`.
bool replica_caught_up(RedisServer& master, std::chrono::milliseconds within) {
  auto number_after = [](const std::string& text, const std::string& key) -> long long {
    const auto at = text.find(key);
    return at == std::string::npos ? -1 : std::atoll(text.c_str() + at + key.size());
  };
  for (auto until = std::chrono::steady_clock::now() + within; std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(5ms)) {
    auto r = master.command({"INFO", "replication"});
    if (!r.ok()) continue;
    const long long master_offset = number_after(r->str, "master_repl_offset:");
    if (master_offset >= 0 && number_after(r->str, ",offset=") == master_offset) return true;
  }
  return false;
}

class RedisClusterPartition : public ::testing::TestWithParam<int> {};

TEST_P(RedisClusterPartition, AMasterCutFromItsReplicaLosesWhatItAcknowledgedAloneUnlessCommitsWait) {
  const int wait_replicas = GetParam();
  auto lan = Lan::create(3);
  if (!lan.ok()) IDEM_NO_NETNS() << lan.status().message();
  auto cluster = RedisCluster::start_on(**lan, 2, 3, 1);
  ASSERT_TRUE(cluster.ok()) << cluster.status().to_string();
  const std::string uri = (*cluster)->uri();
  auto here = open_or_die(store_options(uri, 0));
  ASSERT_NE(here, nullptr);

  // The master on host 0, and ids whose records it holds.
  RedisServer* victim = nullptr;
  for (auto& n : (*cluster)->nodes())
    if (n->address() == (*lan)->address(0) && n->command({"INFO", "replication"})->str.find("role:master") !=
                                                   std::string::npos)
      victim = n.get();
  ASSERT_NE(victim, nullptr) << "redis-cli put no master on host 0";
  std::vector<bool> on_victim(16384);
  auto slots = victim->command({"CLUSTER", "SLOTS"});
  ASSERT_TRUE(slots.ok()) << slots.status().to_string();
  for (const auto& range : slots->elements)
    if (range.elements.at(2).elements.at(1).integer == victim->port() &&
        range.elements.at(2).elements.at(0).str == victim->address())
      for (auto slot = range.elements[0].integer; slot <= range.elements[1].integer; ++slot) on_victim[slot] = true;
  std::vector<std::string> ids;
  for (int i = 0; ids.size() < 50'000; ++i) {
    const std::string id = "cp-" + std::to_string(i);
    if (on_victim[redis::detail::key_slot(key_of(*here, id))]) ids.push_back(id);
  }

  std::atomic<bool> cut{false}, stop{false};
  std::atomic<std::size_t> acked{0};
  Hold hold;
  auto host_side = std::async(std::launch::async, [&] {
    return consume_on_host(**lan, uri, wait_replicas, ids, cut, stop, acked, hold);
  });
  while (acked.load() < 300 && host_side.wait_for(10ms) != std::future_status::ready) {
  }
  // The cut comes once the replica has every write acknowledged so far (replication is
  // asynchronous, and a loaded machine can leave it hundreds of writes behind): what
  // the master loses is then what it acknowledges alone, during the cut.
  hold.hold = true;
  for (auto until = std::chrono::steady_clock::now() + 10s; !hold.held && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(hold.held.load()) << "the consumer on host 0 did not pause";
  EXPECT_TRUE(replica_caught_up(*victim, 10s)) << "the victim's replica did not catch up before the cut";
  ASSERT_TRUE((*lan)->cut(0).ok());
  cut = true;  // what the host side acks from now on, it acks during the cut
  hold.hold = false;
  // The other side promotes the replica: a node off host 0 serves the victim's slots.
  const int slot = redis::detail::key_slot(key_of(*here, ids.front()));
  RedisServer* promoted = nullptr;
  for (auto deadline = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < deadline;) {
    for (auto& n : (*cluster)->nodes()) {
      if (n->address() == (*lan)->address(0)) continue;
      auto r = n->command({"INFO", "replication"});
      if (r.ok() && r->str.find("role:master") != std::string::npos && (*cluster)->master_of(slot) == n.get())
        promoted = n.get();
    }
    if (promoted != nullptr) break;
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(500ms);
  stop = true;
  const HostSide side = host_side.get();
  ASSERT_TRUE((*lan)->heal(0).ok());
  ASSERT_NE(promoted, nullptr) << "no replica was promoted";
  ASSERT_TRUE((*cluster)->wait_ok(60'000).ok());
  ASSERT_TRUE((*cluster)->wait_replicas_synced(3, 60'000).ok()) << "the old master did not rejoin";

  // The broker redelivers every acked id to the consumer here.
  ConsumerOptions o;
  o.store = here;
  o.owner = "here";
  auto c = Consumer<Msg>::create(o, extractors(), [](const Msg&, HandlerContext&) { return HandlerResult::ok(); });
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  std::size_t ran_again = 0, lost_before_cut = 0;
  for (std::size_t i = 0; i < side.acked.size(); ++i) {
    Decision d = c->process({side.acked[i]});
    // in_progress: the replica had the claim of a commit it never got; its lease runs out.
    for (int tries = 0; d.action == Action::kRetry && tries < 60; ++tries) {
      std::this_thread::sleep_for(50ms);
      d = c->process({side.acked[i]});
    }
    ASSERT_EQ(d.action, Action::kAck) << side.acked[i] << ": " << reason_name(d.reason);
    if (d.reason == Reason::kProcessed) {
      ++ran_again;
      lost_before_cut += i < side.acked_before_cut;
    }
  }
  std::printf("redis cluster partition, wait_replicas=%d: %zu acked on host 0 (%zu during the cut), %zu failed; "
              "ran again after the failover %zu\n",
              wait_replicas, side.acked.size(), side.acked.size() - side.acked_before_cut, side.failed, ran_again);
  ASSERT_GT(side.acked_before_cut, 0u);
  EXPECT_LE(lost_before_cut, 20u) << "only what was in flight to the replica when the link went down";
  if (wait_replicas == 0) {
    EXPECT_GT(side.acked.size() - side.acked_before_cut, 0u) << "the cut master acknowledged alone";
    EXPECT_GT(ran_again, 0u) << "its acknowledged writes were lost with it";
  } else {
    EXPECT_EQ(ran_again, 0u) << "a commit acknowledged by the replica survives its promotion";
  }
}

INSTANTIATE_TEST_SUITE_P(Wait, RedisClusterPartition, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return i.param == 0 ? std::string("without_wait") : std::string("wait_replicas_1");
                         });

}  // namespace
}  // namespace idem::redis_test

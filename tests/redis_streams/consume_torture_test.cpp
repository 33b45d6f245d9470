// `idem consume` on Redis Streams under faults:
//   - crash torture: the shared kill test (support/consume_kills.hpp) with 50 SIGKILLs
//     of the consumer, strict ordering, over 20,000+ messages; every effect exactly
//     once (idem_effects, written in the dedup commit), per-key order, dead letters
//     exactly the malformed bodies, buffer empty, nothing pending (label torture);
//   - the broker restarted twice under a running consumer (SIGKILL of redis-server,
//     AOF with fsync always): the consumer rides it out by itself and exits idle with
//     every effect exactly once and nothing pending (label faults).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "redis_streams/stream_broker.hpp"
#include "support/consume_kills.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"

namespace idem::consume_torture {
namespace {

using consume_kills::Mode;
using consume_kills::read_effects;
using consume_kills::spawn_idem;
using consume_kills::wait_exit;
using redis_streams_test::StreamBroker;
using redis_test::RedisServer;

TEST(IdemConsumeTorture, FiftyKillsUnderStrictOrdering) {
  auto server = RedisServer::start({});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  StreamBroker broker(**server);
  consume_kills::run_kill_test(broker, Mode{"strict", true, "1"}, {.kills = 50});
}

TEST(IdemConsumeFaults, BrokerRestartedTwiceUnderARunningConsumer) {
  auto server = RedisServer::start({.persistence = true});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  RedisServer& s = **server;
  StreamBroker broker(s);
  testing::TempDir dir("broker-restart");
  constexpr int kMessages = 6000;
  {
    std::ofstream f(dir.sub("in.jsonl"));
    for (int i = 0; i < kMessages; ++i)
      f << "{\"id\":\"m" << i << "\",\"key\":\"k" << i % 50 << "\",\"version\":" << i / 50 + 1 << "}\n";
  }
  const std::string log = dir.sub("log");
  ASSERT_EQ(wait_exit(spawn_idem({"publish", "--to", broker.publish_uri("s"), dir.sub("in.jsonl")}, log),
                      std::chrono::seconds(60)),
            0);
  const std::string db = dir.sub("idem.db");
  const pid_t consumer =
      spawn_idem({"consume", "--source", broker.source_uri("s", "g"), "--store", "sqlite:" + db, "--ordering", "strict",
                  "--workers", "2", "--lease-ms", "1000", "--idle-exit-ms", "4000"},
                 log);
  // The restarts come while the consumer runs: it is alive at each (its idle exit is
  // 4 s away), which a fast machine cannot change. How far it has got is not a premise:
  // a fast machine may have fetched and decided everything by the first, and the
  // restarts then meet its acknowledgements and its reads of an empty stream.
  for (int restart = 0; restart < 2; ++restart) {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    ASSERT_EQ(::kill(consumer, 0), 0) << "restart " << restart << " came after the consumer exited";
    s.kill();
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    ASSERT_TRUE(s.restart().ok());
  }
  ASSERT_EQ(wait_exit(consumer, std::chrono::seconds(120)), 0) << "the consumer did not finish by itself; " << log;

  long long buffered = -1;
  std::map<std::string, int> per_id;
  for (const consume_kills::EffectRow& e : read_effects(db, &buffered)) ++per_id[e.id];
  EXPECT_EQ(per_id.size(), static_cast<std::size_t>(kMessages)) << "effects lost";
  int doubled = 0;
  for (const auto& [id, n] : per_id) doubled += n > 1 ? 1 : 0;
  EXPECT_EQ(doubled, 0) << "effects that happened more than once";
  EXPECT_EQ(buffered, 0);
  EXPECT_EQ(broker.unsettled("s", "g"), 0) << "deliveries neither acked nor dead-lettered";
  EXPECT_TRUE(broker.dead_letter_bodies("s").empty());
}

}  // namespace
}  // namespace idem::consume_torture

// `idem consume` end to end on a real Pulsar standalone (one per binary, started by
// scripts/broker.sh) and SQLite: the shared kill test (support/consume_kills.hpp) in
// both modes, Key_Shared with two consumers, the broker restarted under running
// consumers, an unreachable broker.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "support/consume_broker.hpp"
#include "support/consume_kills.hpp"
#include "support/bench_source_check.hpp"
#include "support/dead_letter_crash.hpp"
#include "support/pulsar_server.hpp"
#include "support/temp_dir.hpp"

namespace idem::pulsar_test {
namespace {

using consume_kills::Mode;
using consume_kills::spawn_idem;
using consume_kills::wait_exit;

std::string fresh(const std::string& base) {
  static int n = 0;
  return base + std::to_string(n++);
}

class PulsarConsumeKills : public ::testing::TestWithParam<Mode> {};

TEST_P(PulsarConsumeKills, SurviveRandomKillsWithEveryEffectExactlyOnce) {
  PulsarBroker broker(PulsarServer::shared());
  consume_kills::KillOptions o;
  o.topic = fresh("orders");
  o.alive_min = std::chrono::milliseconds(400);
  consume_kills::run_kill_test(broker, GetParam(), o);
}

INSTANTIATE_TEST_SUITE_P(Modes, PulsarConsumeKills,
                         ::testing::Values(Mode{"strict", true, "1"}, Mode{"batch", false, "64"}),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(i.param.name); });

// Key_Shared: each key on one of two consumers at a time, one of them killed and
// started again each round. Per-key order and every effect exactly once hold.
TEST(PulsarConsume, KeySharedWithTwoConsumersUnderKills) {
  PulsarBroker broker(PulsarServer::shared(), "type=key_shared");
  consume_kills::KillOptions o;
  o.topic = fresh("keyed");
  o.members = 2;
  o.alive_min = std::chrono::milliseconds(400);
  consume_kills::run_kill_test(broker, Mode{"strict", true, "1"}, o);
}

// Two consumers run side by side, one at a time killed and started again; twice the
// broker is SIGKILLed and started again (same ports, same data) under the one still
// running, which connects again. Every check of the kill test holds.
TEST(PulsarConsume, TheBrokerRestartedUnderARunningConsumerLosesNothing) {
  PulsarServer& server = PulsarServer::shared();
  PulsarBroker broker(server);
  consume_kills::KillOptions o;
  o.topic = fresh("restart");
  o.kills = 4;
  o.members = 2;
  o.alive_min = std::chrono::milliseconds(1000);
  o.after_kill = [&](int round) {
    if (round % 2 == 0) {
      ASSERT_TRUE(server.restart(/*kill=*/true).ok());
    }
  };
  consume_kills::run_kill_test(broker, Mode{"strict", true, "1"}, o);
}

// Killed between a dead letter's record in the store and its forward to the broker
// (support/dead_letter_crash.hpp): none lost.
TEST(PulsarConsume, NoDeadLetterLostWhenKilledBetweenStoreAndBroker) {
  PulsarBroker broker(PulsarServer::shared());
  consume_kills::run_dead_letter_crash_test(broker, {.name = "pulsar", .topic = fresh("poison")});
}

// `idem bench --source` (support/bench_source_check.hpp).
TEST(PulsarConsume, BenchSourceRunsItsRowsAndRemovesWhatItMade) {
  PulsarBroker broker(PulsarServer::shared());
  consume_kills::run_bench_source_test(broker, "pulsar-ws");
}

TEST(PulsarConsume, UnreachableBrokerIsOneLineAndNonZero) {
  testing::TempDir dir("consume");
  const std::string out = dir.sub("bad.log");
  EXPECT_EQ(wait_exit(spawn_idem({"consume", "--source",
                                  "pulsar-ws://127.0.0.1:1/public/default/t?subscription=s&token=tok-SECRET-3",
                                  "--source-wait-ms", "0"},
                                 out),
                      std::chrono::seconds(30)),
            1);
  EXPECT_EQ(wait_exit(spawn_idem({"consume", "--source", "pulsar-ws://127.0.0.1:1/public/default/t"}, out),
                      std::chrono::seconds(30)),
            2);  // no subscription: a usage error
  std::ifstream f(out);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("idem consume:"), std::string::npos) << text;
  EXPECT_NE(text.find("127.0.0.1:1"), std::string::npos) << text;
  EXPECT_EQ(text.find("tok-SECRET-3"), std::string::npos) << text;
}

}  // namespace
}  // namespace idem::pulsar_test

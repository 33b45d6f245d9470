// `idem consume` end to end on a real Kafka broker (one per binary, started by
// scripts/broker.sh) and SQLite: the shared kill test (support/consume_kills.hpp) in
// both modes (the batch one over TLS with a SASL password), the broker restarted under running
// consumers, an unreachable broker.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>

#include "support/consume_broker.hpp"
#include "support/consume_kills.hpp"
#include "support/bench_source_check.hpp"
#include "support/dead_letter_crash.hpp"
#include "support/kafka_server.hpp"
#include "support/temp_dir.hpp"

namespace idem::kafka_test {
namespace {

using consume_kills::Mode;
using consume_kills::spawn_idem;
using consume_kills::wait_exit;

std::string fresh(const std::string& base) {
  static int n = 0;
  return base + std::to_string(n++);
}

class KafkaConsumeKills : public ::testing::TestWithParam<Mode> {};

// The batch run's `idem` processes go over TLS with a SASL password (the listener
// SASL_SSL), the password from a file: every check holds there too.
TEST_P(KafkaConsumeKills, SurviveRandomKillsWithEveryEffectExactlyOnce) {
  KafkaServer& server = KafkaServer::shared();
  KafkaBroker broker(server);
  testing::TempDir dir("kafka-sasl");
  if (std::string(GetParam().name) == "batch") {
    std::ofstream(dir.sub("password")) << server.sasl_password();
    broker.connect_idem(server.sasl_ssl_bootstraps(), "sasl_mechanism=PLAIN&sasl_username=" +
                                                          server.sasl_user() + "&sasl_password_file=" +
                                                          dir.sub("password") + "&tls_ca=" + server.tls_files().ca);
  }
  consume_kills::KillOptions o;
  o.topic = fresh("orders");
  o.alive_min = std::chrono::milliseconds(1500);  // a join takes up to a second
  o.alive_spread = std::chrono::milliseconds(1000);
  consume_kills::run_kill_test(broker, GetParam(), o);
}

INSTANTIATE_TEST_SUITE_P(Modes, KafkaConsumeKills,
                         ::testing::Values(Mode{"strict", true, "1"}, Mode{"batch", false, "64"}),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(i.param.name); });

// Two consumers run side by side, one at a time killed and started again; twice the
// broker is SIGKILLed and started again (same ports, same data) under the one still
// running, which reconnects. Every check of the kill test holds.
TEST(KafkaConsume, TheBrokerRestartedUnderARunningConsumerLosesNothing) {
  KafkaServer& server = KafkaServer::shared();
  KafkaBroker broker(server);
  consume_kills::KillOptions o;
  o.topic = fresh("restart");
  o.kills = 4;
  o.members = 2;
  o.alive_min = std::chrono::milliseconds(1500);
  o.alive_spread = std::chrono::milliseconds(1000);
  o.after_kill = [&](int round) {
    if (round % 2 != 0) return;
    ASSERT_TRUE(server.kill_node(1).ok());
    std::this_thread::sleep_for(std::chrono::seconds(2));
    ASSERT_TRUE(server.start_node(1).ok());
  };
  consume_kills::run_kill_test(broker, Mode{"strict", true, "1"}, o);
}

// Killed between a dead letter's record in the store and its forward to the broker
// (support/dead_letter_crash.hpp): none lost.
TEST(KafkaConsume, NoDeadLetterLostWhenKilledBetweenStoreAndBroker) {
  KafkaBroker broker(KafkaServer::shared());
  consume_kills::run_dead_letter_crash_test(broker, {.name = "kafka", .topic = fresh("poison")});
}

// `idem bench --source` (support/bench_source_check.hpp).
TEST(KafkaConsume, BenchSourceRunsItsRowsAndRemovesWhatItMade) {
  KafkaBroker broker(KafkaServer::shared());
  consume_kills::run_bench_source_test(broker, "kafka");
}

TEST(KafkaConsume, UnreachableBrokerIsOneLineAndNonZero) {
  testing::TempDir dir("consume");
  const std::string out = dir.sub("bad.log");
  EXPECT_EQ(wait_exit(spawn_idem({"consume", "--source", "kafka://127.0.0.1:1/t?group=g&connect_timeout_ms=500",
                                  "--source-wait-ms", "0"},
                                 out),
                      std::chrono::seconds(30)),
            1);
  EXPECT_EQ(wait_exit(spawn_idem({"consume", "--source", "kafka://127.0.0.1:1/t"}, out), std::chrono::seconds(30)),
            2);  // no group: a usage error
  std::ifstream f(out);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("idem consume:"), std::string::npos) << text;
  EXPECT_NE(text.find("no broker of 127.0.0.1:1 answered"), std::string::npos) << text;
}

}  // namespace
}  // namespace idem::kafka_test

// `idem consume` end to end on a private RabbitMQ node and SQLite: the shared kill test
// (support/consume_kills.hpp), and the RabbitMQ specifics: exhausted retries into the
// dead-letter queue, a node restarted under a running consumer, an unreachable
// broker and wrong credentials. One node for the whole binary; each test its own queue.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rabbitmq/queue_broker.hpp"
#include "support/consume_kills.hpp"
#include "support/bench_source_check.hpp"
#include "support/dead_letter_crash.hpp"
#include "support/rabbitmq_server.hpp"
#include "support/temp_dir.hpp"

namespace idem::consume_test {
namespace {

using consume_kills::Mode;
using consume_kills::read_effects;
using consume_kills::spawn_idem;
using consume_kills::wait_exit;
using rabbitmq_test::QueueBroker;
using rabbitmq_test::RabbitServer;
using rabbitmq_test::retry_queues;

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

class IdemConsumeKills : public ::testing::TestWithParam<Mode> {};

TEST_P(IdemConsumeKills, SurviveRandomKillsWithEveryEffectExactlyOnce) {
  QueueBroker broker(RabbitServer::shared());
  consume_kills::KillOptions o;
  o.topic = std::string("orders-") + GetParam().name;
  consume_kills::run_kill_test(broker, GetParam(), o);
}

INSTANTIATE_TEST_SUITE_P(Modes, IdemConsumeKills,
                         ::testing::Values(Mode{"strict", true, "1"}, Mode{"batches", false, "32"}),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(i.param.name); });

// Killed between a dead letter's record in the store and its forward to the broker
// (support/dead_letter_crash.hpp): none lost.
TEST(IdemConsumeCrashPoints, NoDeadLetterLostWhenKilledBetweenStoreAndBroker) {
  QueueBroker broker(RabbitServer::shared());
  consume_kills::run_dead_letter_crash_test(broker, {.name = "rabbitmq", .topic = "poison"});
}

// `idem bench --source` (support/bench_source_check.hpp).
TEST(IdemConsume, BenchSourceRunsItsRowsAndRemovesWhatItMade) {
  QueueBroker broker(RabbitServer::shared());
  consume_kills::run_bench_source_test(broker, "amqp");
}

TEST(IdemConsume, ExhaustedRetriesGoToTheDeadLetterQueue) {
  const RabbitServer& server = RabbitServer::shared();
  testing::TempDir dir("consume");
  {
    std::ofstream f(dir.sub("in.jsonl"));
    for (int i = 0; i < 20; ++i) f << "{\"id\":\"m" << i << "\"" << (i % 4 == 0 ? ",\"fail\":true" : "") << "}\n";
  }
  const std::string log = dir.sub("log");
  ASSERT_EQ(wait_exit(spawn_idem({"publish", "--to", server.uri("exhaust"), dir.sub("in.jsonl")}, log),
                      std::chrono::seconds(60)),
            0);
  // --max-retries 0: a failure is dead-lettered at once (retries_exhausted).
  ASSERT_EQ(wait_exit(spawn_idem({"consume", "--source", server.uri("exhaust"), "--store", "sqlite:" + dir.sub("db"),
                                  "--max-retries", "0", "--workers", "2", "--idle-exit-ms", "1500"},
                                 log),
                      std::chrono::seconds(60)),
            0)
      << read_file(log);
  auto dlq = server.take_all("exhaust.dlq");
  ASSERT_TRUE(dlq.ok());
  std::set<std::string> reasons;
  for (const auto& m : *dlq) reasons.insert(m.headers.at("reason"));
  EXPECT_EQ(dlq->size(), 5u);  // m0, m4, m8, m12, m16
  EXPECT_EQ(reasons, std::set<std::string>{"retries_exhausted"});
  long long buffered = -1;
  EXPECT_EQ(read_effects(dir.sub("db"), &buffered).size(), 15u);
}

TEST(IdemConsume, UnreachableBrokerAndWrongCredentialsAreOneLineWithoutTheSecret) {
  const RabbitServer& server = RabbitServer::shared();
  testing::TempDir dir("consume");
  const std::string out = dir.sub("bad.log");
  const std::string port = std::to_string(server.port());
  for (const std::string& uri : {std::string("amqp://guest:s3cret@127.0.0.1:1/%2F?queue=q"),
                                 "amqp://guest:s3cret@127.0.0.1:" + port + "/%2F?queue=q"}) {
    EXPECT_EQ(wait_exit(spawn_idem({"consume", "--source", uri, "--store", "sqlite:" + dir.sub("db")}, out),
                        std::chrono::seconds(30)),
              1)
        << uri;
  }
  const std::string text = read_file(out);
  EXPECT_NE(text.find("idem consume:"), std::string::npos) << text;
  EXPECT_NE(text.find("refused the login of user \"guest\""), std::string::npos) << text;
  EXPECT_EQ(text.find("s3cret"), std::string::npos) << text;
}

// Restarts the shared node under a running consumer, which reconnects.
TEST(IdemConsume, ANodeRestartedUnderTheConsumerLosesNothing) {
  RabbitServer& server = RabbitServer::shared();
  testing::TempDir dir("consume");
  constexpr int kMessages = 3000;
  {
    std::ofstream f(dir.sub("in.jsonl"));
    for (int i = 0; i < kMessages; ++i)
      f << "{\"id\":\"r" << i << "\",\"key\":\"k" << i % 50 << "\",\"version\":" << i / 50 + 1 << "}\n";
  }
  const std::string log = dir.sub("log");
  ASSERT_EQ(wait_exit(spawn_idem({"publish", "--to", server.uri("restart"), dir.sub("in.jsonl")}, log),
                      std::chrono::seconds(60)),
            0);
  const pid_t consumer = spawn_idem({"consume", "--source", server.uri("restart"), "--store", "sqlite:" + dir.sub("db"),
                                     "--workers", "2", "--ordering", "strict", "--idle-exit-ms", "3000"},
                                    log);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server.kill();
  const Status restarted = server.restart();
  ASSERT_TRUE(restarted.ok()) << restarted.to_string();
  EXPECT_EQ(wait_exit(consumer, std::chrono::seconds(120)), 0) << read_file(log);
  long long buffered = -1;
  const auto effects = read_effects(dir.sub("db"), &buffered);
  std::set<std::string> ids;
  for (const auto& e : effects) EXPECT_TRUE(ids.insert(e.id).second) << "twice: " << e.id;
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kMessages));
  EXPECT_EQ(*server.ready("restart"), 0u);
}

}  // namespace
}  // namespace idem::consume_test

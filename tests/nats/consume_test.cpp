// `idem consume` end to end on a private nats-server and SQLite: the shared kill test
// (support/consume_kills.hpp) in two modes, and the NATS specifics: a server restarted
// mid-run, `idem publish --msg-id` into JetStream's duplicate window, an unreachable
// server and wrong credentials (one line, non-zero, no password).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nats/jetstream_broker.hpp"
#include "support/consume_kills.hpp"
#include "support/bench_source_check.hpp"
#include "support/dead_letter_crash.hpp"
#include "support/nats_server.hpp"
#include "support/temp_dir.hpp"

namespace idem::nats_consume_test {
namespace {

using consume_kills::Mode;
using consume_kills::read_effects;
using consume_kills::spawn_idem;
using consume_kills::wait_exit;
using nats_test::JetStreamBroker;
using nats_test::NatsServer;


std::string read_all(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

class IdemConsumeKills : public ::testing::TestWithParam<Mode> {};

TEST_P(IdemConsumeKills, SurviveRandomKillsWithEveryEffectExactlyOnce) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  JetStreamBroker broker(**server);
  consume_kills::run_kill_test(broker, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Modes, IdemConsumeKills,
                         ::testing::Values(Mode{"strict", true, "1"}, Mode{"batches", false, "32"}),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(i.param.name); });

// Killed between a dead letter's record in the store and its forward to the broker
// (support/dead_letter_crash.hpp): none lost.
TEST(IdemConsumeCrashPoints, NoDeadLetterLostWhenKilledBetweenStoreAndBroker) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  JetStreamBroker broker(**server);
  consume_kills::run_dead_letter_crash_test(broker, {.name = "nats", .topic = "poison"});
}

// `idem bench --source` (support/bench_source_check.hpp).
TEST(IdemConsume, BenchSourceRunsItsRowsAndRemovesWhatItMade) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  JetStreamBroker broker(**server);
  consume_kills::run_bench_source_test(broker, "nats");
}

// The server is killed and restarted (same port, same store) while idem consume runs:
// the consumer reconnects, takes what was published after the restart, and every
// message is processed once.
TEST(IdemConsumeNats, ReconnectsWhenTheServerRestartsMidRun) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  testing::TempDir dir("nats-restart");
  constexpr int kPerPhase = 1000;
  for (int phase = 0; phase < 2; ++phase) {
    std::ofstream f(dir.sub("in" + std::to_string(phase) + ".jsonl"));
    for (int i = 0; i < kPerPhase; ++i) f << "{\"id\":\"p" << phase << "-" << i << "\"}\n";
  }
  const std::string log = dir.sub("log");
  const std::string uri = (*server)->uri() + "?stream=s";
  auto publish = [&](int phase) {
    return wait_exit(spawn_idem({"publish", "--to", uri, dir.sub("in" + std::to_string(phase) + ".jsonl")}, log),
                     std::chrono::seconds(30));
  };
  ASSERT_EQ(publish(0), 0);
  const pid_t consumer = spawn_idem({"consume", "--source", uri + "&durable=g", "--store", "sqlite:" + dir.sub("db"),
                                     "--workers", "2", "--lease-ms", "1000", "--idle-exit-ms", "6000"},
                                    dir.sub("consume.log"));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  (*server)->kill();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_TRUE((*server)->restart().ok());
  ASSERT_EQ(publish(1), 0);  // only a reconnected consumer sees these
  ASSERT_EQ(wait_exit(consumer, std::chrono::seconds(60)), 0) << "log: " << dir.sub("consume.log");
  long long buffered = -1;
  std::map<std::string, int> per_id;
  for (const auto& e : read_effects(dir.sub("db"), &buffered)) ++per_id[e.id];
  EXPECT_EQ(per_id.size(), static_cast<std::size_t>(2 * kPerPhase));
  for (const auto& [id, n] : per_id) EXPECT_EQ(n, 1) << id;
  auto c = (*server)->consumer("s", "g");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ack_pending + static_cast<std::int64_t>(c->pending), 0);
}

TEST(IdemConsumeNats, PublishMsgIdLetsJetStreamDropResentCopies) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  testing::TempDir dir("nats-msgid");
  {
    std::ofstream f(dir.sub("in.jsonl"));
    f << "{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"a\"}\n";
  }
  const std::string log = dir.sub("log");
  const std::string with_ids = (*server)->uri() + "?stream=ids";
  const std::string without = (*server)->uri() + "?stream=plain";
  ASSERT_EQ(wait_exit(spawn_idem({"publish", "--to", with_ids, "--msg-id", dir.sub("in.jsonl")}, log),
                      std::chrono::seconds(30)),
            0)
      << read_all(log);
  ASSERT_EQ(wait_exit(spawn_idem({"publish", "--to", without, dir.sub("in.jsonl")}, log), std::chrono::seconds(30)), 0);
  EXPECT_EQ((*server)->messages("ids")->size(), 2u);
  EXPECT_EQ((*server)->messages("plain")->size(), 3u);  // off by default: copies reach the consumer
}

TEST(IdemConsumeNats, UnreachableServerAndWrongCredentialsFailInOneLineWithoutThePassword) {
  testing::TempDir dir("nats-bad");
  const std::string out = dir.sub("unreachable.log");
  const std::string nowhere = "nats://app:s3cret@127.0.0.1:1?stream=s&durable=g";
  EXPECT_EQ(wait_exit(spawn_idem({"consume", "--source", nowhere, "--store", "sqlite:" + dir.sub("db"),
                                  "--source-wait-ms", "0"},
                                 out),
                      std::chrono::seconds(30)),
            1);
  const std::string unreachable = read_all(out);
  EXPECT_NE(unreachable.find("idem consume:"), std::string::npos) << unreachable;
  const bool warned = unreachable.find("idem: warning: argument 3 holds a password") != std::string::npos;
  EXPECT_TRUE(warned) << "a password written in the command line is warned of: " << unreachable;
  EXPECT_EQ(std::count(unreachable.begin(), unreachable.end(), '\n') - warned, 1) << unreachable;
  EXPECT_EQ(unreachable.find("s3cret"), std::string::npos) << unreachable;
  // With a wait, each failed try is one line saying when the next comes, then the exit.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_exit(spawn_idem({"consume", "--source", nowhere, "--store", "sqlite:" + dir.sub("db"),
                                  "--source-wait-ms", "2000"},
                                 out),
                      std::chrono::seconds(30)),
            1);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
  const std::string tried = read_all(out);
  EXPECT_GE(std::count(tried.begin(), tried.end(), '\n'), 3) << tried;
  EXPECT_NE(tried.find("trying again in 100 ms"), std::string::npos) << tried;
  EXPECT_EQ(tried.find("s3cret"), std::string::npos) << tried;

  auto server = NatsServer::start({.user = "app", .password = "right"});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  const std::string refused_log = dir.sub("refused.log");
  const std::string port = std::to_string((*server)->port());
  EXPECT_EQ(wait_exit(spawn_idem({"consume", "--source", "nats://app:s3cret@127.0.0.1:" + port + "?stream=s&durable=g",
                                  "--store", "sqlite:" + dir.sub("db")},
                                 refused_log),
                      std::chrono::seconds(30)),
            1);
  const std::string refused = read_all(refused_log);
  EXPECT_NE(refused.find("uthoriz"), std::string::npos) << refused;
  EXPECT_EQ(refused.find("s3cret"), std::string::npos) << refused;
  EXPECT_EQ(wait_exit(spawn_idem({"publish", "--to", "nats://app:s3cret@127.0.0.1:" + port + "?stream=s", "/dev/null"},
                                 refused_log),
                      std::chrono::seconds(30)),
            1);
  EXPECT_EQ(read_all(refused_log).find("s3cret"), std::string::npos);
}

}  // namespace
}  // namespace idem::nats_consume_test

// `idem consume` end to end on a real redis-server and SQLite: the shared kill test
// (support/consume_kills.hpp) in two modes, and the Redis Streams specifics: retries
// exhausted into the dead-letter stream, --max-messages, unreachable brokers and bad
// URIs.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "redis_streams/stream_broker.hpp"
#include "support/consume_kills.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"

namespace idem::consume_test {
namespace {

using consume_kills::Mode;
using consume_kills::read_effects;
using consume_kills::spawn_idem;
using consume_kills::wait_exit;
using redis_streams_test::field_values;
using redis_streams_test::StreamBroker;
using redis_test::RedisServer;

class IdemConsumeKills : public ::testing::TestWithParam<Mode> {};

TEST_P(IdemConsumeKills, SurviveRandomKillsWithEveryEffectExactlyOnce) {
  auto server = RedisServer::start({});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  StreamBroker broker(**server);
  consume_kills::run_kill_test(broker, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Modes, IdemConsumeKills,
                         ::testing::Values(Mode{"strict", true, "1"}, Mode{"batches", false, "32"}),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(i.param.name); });

TEST(IdemConsume, ExhaustedRetriesAndMaxMessagesAndBadSources) {
  auto server = RedisServer::start({});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  testing::TempDir dir("consume");
  {
    std::ofstream f(dir.sub("in.jsonl"));
    for (int i = 0; i < 20; ++i) f << "{\"id\":\"m" << i << "\"" << (i % 4 == 0 ? ",\"fail\":true" : "") << "}\n";
  }
  const std::string port = std::to_string((*server)->port());
  const std::string log = dir.sub("log");
  ASSERT_EQ(
      wait_exit(spawn_idem({"publish", "--to", "redis-stream://127.0.0.1:" + port + "/s", dir.sub("in.jsonl")}, log),
                std::chrono::seconds(30)),
      0);
  // --max-retries 0: a failure is dead-lettered at once (retries_exhausted).
  const std::vector<std::string> args{"consume",
                                      "--source",
                                      "redis-stream://127.0.0.1:" + port + "/s?group=g",
                                      "--store",
                                      "sqlite:" + dir.sub("db"),
                                      "--max-retries",
                                      "0",
                                      "--workers",
                                      "2"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = args;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  ASSERT_EQ(wait_exit(spawn_idem(with({"--max-messages", "8"}), log), std::chrono::seconds(30)), 0);
  ASSERT_EQ(wait_exit(spawn_idem(with({"--idle-exit-ms", "300"}), log), std::chrono::seconds(30)), 0);
  EXPECT_EQ(field_values(**server, "s:dlq", "body").size(), 5u);  // m0, m4, m8, m12, m16
  const std::multiset<std::string> reasons = field_values(**server, "s:dlq", "reason");
  EXPECT_EQ(std::set<std::string>(reasons.begin(), reasons.end()), std::set<std::string>{"retries_exhausted"});
  long long buffered = -1;
  EXPECT_EQ(read_effects(dir.sub("db"), &buffered).size(), 15u);

  // A broker that is not there, and a bad URI: one line, non-zero, no secret.
  const std::string out = dir.sub("bad.log");
  EXPECT_EQ(wait_exit(spawn_idem({"consume", "--source", "redis-stream://:s3cret@127.0.0.1:1/s?group=g"}, out),
                      std::chrono::seconds(30)),
            1);
  EXPECT_EQ(wait_exit(spawn_idem({"consume", "--source", "redis-stream://:s3cret@127.0.0.1:1/s"}, out),
                      std::chrono::seconds(30)),
            2);
  std::ifstream f(out);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("idem consume:"), std::string::npos) << text;
  EXPECT_EQ(text.find("s3cret"), std::string::npos) << text;
}

}  // namespace
}  // namespace idem::consume_test

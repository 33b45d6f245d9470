// `idem consume` end to end on a real redis-server and SQLite: the shared kill test
// (support/consume_kills.hpp) in two modes; the outbox (messages whose "publish" field
// makes the handler publish to another stream, with SIGKILLs: every outgoing id
// arrives, the distinct ids are exact); and the Redis Streams specifics: retries
// exhausted into the dead-letter stream, --max-messages, unreachable brokers and bad
// URIs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis_streams/stream_broker.hpp"
#include "support/consume_kills.hpp"
#include "support/bench_source_check.hpp"
#include "support/dead_letter_crash.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"
#ifdef IDEM_TESTS_WITH_POSTGRES
#include <libpq-fe.h>

#include "support/postgres_server.hpp"
#endif

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

// `idem bench --source` (support/bench_source_check.hpp).
TEST(IdemConsume, BenchSourceRunsItsRowsAndRemovesWhatItMade) {
  auto server = RedisServer::start({});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  StreamBroker broker(**server);
  consume_kills::run_bench_source_test(broker, "redis-stream");
}

// Killed between a dead letter's record in the store and its forward to the broker
// (support/dead_letter_crash.hpp): none lost.
TEST(IdemConsumeCrashPoints, NoDeadLetterLostWhenKilledBetweenStoreAndBroker) {
  auto server = RedisServer::start({});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  StreamBroker broker(**server);
  consume_kills::run_dead_letter_crash_test(broker, {.name = "redis_streams"});
}

// The outbox end to end: each message's "publish" field names one or two outgoing
// messages to the stream "out"; the consumer is SIGKILLed at random (between commits
// and dispatches, in dispatches) and restarted until idle. Every outgoing id must
// arrive on "out", the distinct ids must be exactly the expected ones (copies from
// resends are what downstream dedup drops), every effect exactly once, and `idem
// inspect` must show no unsent outgoing message.
struct OutboxMode {
  const char* name;
  const char* store;  // "sqlite" or "rocksdb"
  const char* batch;
};

void PrintTo(const OutboxMode& m, std::ostream* os) { *os << m.name; }

// The last 2,000 bytes of the file at path.
std::string tail_of(const std::string& path) {
  std::ifstream f(path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

class IdemConsumeOutboxKills : public ::testing::TestWithParam<OutboxMode> {};

TEST_P(IdemConsumeOutboxKills, EveryOutgoingIdArrivesAndNoOtherDoes) {
  const OutboxMode mode = GetParam();
  auto server = RedisServer::start({});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  testing::TempDir dir("consume-outbox");
  const std::string port = std::to_string((*server)->port());
  const std::string out = "redis-stream://127.0.0.1:" + port + "/out";
  std::mt19937 rng(20261202);
  std::set<std::string> expected, incoming;
  {
    std::ofstream f(dir.sub("in.jsonl"));
    std::vector<std::string> sent;
    for (int i = 0; i < 3000; ++i) {
      const std::string id = "m" + std::to_string(i);
      const int n = i % 3 == 0 ? 2 : 1;
      std::string line = "{\"id\":\"" + id + "\",\"payload\":\"p\",\"publish\":[";
      for (int k = 0; k < n; ++k) {
        line += std::string(k ? "," : "") + "{\"to\":\"" + out + "\",\"payload\":{\"n\":" + std::to_string(k) + "}}";
        expected.insert(id + "#" + std::to_string(k));
      }
      line += "]}";
      incoming.insert(id);
      f << line << '\n';
      sent.push_back(line);
      if (rng() % 5 == 0) f << sent[sent.size() - 1 - rng() % std::min<std::size_t>(sent.size(), 300)] << '\n';
    }
  }
  const std::string log = dir.sub("consume.log");
  ASSERT_EQ(
      wait_exit(spawn_idem({"publish", "--to", "redis-stream://127.0.0.1:" + port + "/in", dir.sub("in.jsonl")}, log),
                std::chrono::seconds(60)),
      0);
  const std::string db = std::string(mode.store) == "sqlite" ? dir.sub("idem.db") : dir.sub("rocks");
  const std::string store = std::string(mode.store) + ":" + db;
  const std::vector<std::string> consume{"consume",    "--source",  "redis-stream://127.0.0.1:" + port + "/in?group=g",
                                         "--store",    store,       "--batch",
                                         mode.batch,   "--workers", "2",
                                         "--lease-ms", "1000",      "--idle-exit-ms",
                                         "1500"};
  for (int i = 0; i < 10; ++i) {
    const pid_t a = spawn_idem(consume, log);
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 500));
    kill(a, SIGKILL);
    waitpid(a, nullptr, 0);
  }
  ASSERT_EQ(wait_exit(spawn_idem(consume, log), std::chrono::seconds(120)), 0) << "log ends: " << tail_of(log);

  const std::multiset<std::string> arrived = field_values(**server, "out", "id");
  const std::set<std::string> distinct(arrived.begin(), arrived.end());
  std::size_t missing = 0;
  for (const std::string& id : expected) missing += distinct.count(id) ? 0 : 1;
  EXPECT_EQ(missing, 0u) << "outgoing messages lost";
  EXPECT_EQ(distinct, expected) << "outgoing ids lost or invented";
  EXPECT_GE(arrived.size(), expected.size());

  if (std::string(mode.store) == "sqlite") {
    long long buffered = -1;
    std::map<std::string, int> per_id;
    for (const auto& e : read_effects(db, &buffered)) ++per_id[e.id];
    std::set<std::string> effected;
    for (const auto& [id, n] : per_id) {
      EXPECT_EQ(n, 1) << id;
      effected.insert(id);
    }
    EXPECT_EQ(effected, incoming);
  }
  const std::string inspected = dir.sub("inspect.json");
  ASSERT_EQ(wait_exit(spawn_idem({"inspect", "--store", store, "--json"}, inspected), std::chrono::seconds(30)), 0);
  EXPECT_NE(tail_of(inspected).find(R"({"type":"outbox","kept":true,"unsent":0,"more":false})"), std::string::npos)
      << tail_of(inspected);
}

INSTANTIATE_TEST_SUITE_P(Stores, IdemConsumeOutboxKills,
                         ::testing::Values(OutboxMode{"sqlite_batches", "sqlite", "32"},
                                           OutboxMode{"rocksdb", "rocksdb", "1"}),
                         [](const ::testing::TestParamInfo<OutboxMode>& i) { return std::string(i.param.name); });

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
  EXPECT_EQ(wait_exit(spawn_idem({"consume", "--source", "redis-stream://:s3cret@127.0.0.1:1/s?group=g",
                                   "--source-wait-ms", "0"},
                                  out),
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

// Versions 2 and 3 of key k without 1: --idle-exit-ms exits, and says which key waits.
TEST(IdemConsume, AnIdleExitNamesTheKeysWaitingBehindAGap) {
  auto server = RedisServer::start({});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  testing::TempDir dir("gap");
  {
    std::ofstream f(dir.sub("in.jsonl"));
    f << R"({"id":"k-2","key":"k","version":2})" << '\n'
      << R"({"id":"k-3","key":"k","version":3})" << '\n'
      << R"({"id":"j-1","key":"j","version":1})" << '\n';
  }
  const std::string uri = "redis-stream://127.0.0.1:" + std::to_string((*server)->port()) + "/s";
  const std::string log = dir.sub("log");
  ASSERT_EQ(wait_exit(spawn_idem({"publish", "--to", uri, dir.sub("in.jsonl")}, log), std::chrono::seconds(30)), 0);
  ASSERT_EQ(wait_exit(spawn_idem({"consume", "--source", uri + "?group=g", "--store", "sqlite:" + dir.sub("db"),
                                  "--ordering", "strict", "--idle-exit-ms", "500"},
                                 log),
                      std::chrono::seconds(30)),
            0);
  std::ifstream f(log);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("2 messages wait in the reorder buffer"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(key "k": 2 buffered from version 2)"), std::string::npos) << text;
  EXPECT_EQ(text.find(R"(key "j")"), std::string::npos) << text;
}

// Strict ordering whose gaps never fill: --gap-policy dead_letter sends the buffered
// messages to --buffered-dead-letters-to through the store's outbox. The consumer is
// SIGKILLed at random while it works, then runs to idle: every buffered message is in
// the dead-letter stream (lost 0; copies from resends carry one id), every in-order
// message has one effect, and nothing waits in the buffer.
TEST(IdemConsume, BufferedDeadLettersSurviveKills) {
  auto server = RedisServer::start({});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  testing::TempDir dir("bdlq");
  std::set<std::string> gapped;
  {
    std::ofstream f(dir.sub("in.jsonl"));
    for (int k = 0; k < 40; ++k) {
      const std::string key = "k" + std::to_string(k);
      for (int v = 1; v <= 4; ++v) {
        const std::string id = key + "-" + std::to_string(v);
        if (k % 2 == 0 && v == 1) continue;  // even keys: version 1 never comes
        if (k % 2 == 0) gapped.insert(id);
        f << R"({"id":")" << id << R"(","key":")" << key << R"(","version":)" << v << "}\n";
      }
    }
  }
  const std::string uri = "redis-stream://127.0.0.1:" + std::to_string((*server)->port()) + "/s";
  const std::string log = dir.sub("log");
  ASSERT_EQ(wait_exit(spawn_idem({"publish", "--to", uri, dir.sub("in.jsonl")}, log), std::chrono::seconds(30)), 0);
  auto consume = [&](std::vector<std::string> more) {
    std::vector<std::string> a{"consume",        "--source",     uri + "?group=g",
                               "--store",        "sqlite:" + dir.sub("db"),
                               "--ordering",     "strict",       "--gap-policy",
                               "dead_letter",    "--gap-timeout-ms", "200",
                               "--lease-ms",     "1000",         "--workers",
                               "2",              "--buffered-dead-letters-to", uri + "-bdlq"};
    a.insert(a.end(), more.begin(), more.end());
    return spawn_idem(a, log);
  };
  std::mt19937 rng(7);
  for (int round = 0; round < 5; ++round) {
    const pid_t pid = consume({});
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 400));
    ::kill(pid, SIGKILL);
    EXPECT_EQ(wait_exit(pid, std::chrono::seconds(30)), 128 + SIGKILL);
  }
  ASSERT_EQ(wait_exit(consume({"--idle-exit-ms", "1500"}), std::chrono::seconds(60)), 0);
  const std::multiset<std::string> letters = field_values(**server, "s-bdlq", "id");
  EXPECT_EQ(std::set<std::string>(letters.begin(), letters.end()), gapped) << "lost 0, and no other id";
  const std::multiset<std::string> reasons = field_values(**server, "s-bdlq", "idem-reason");
  EXPECT_EQ(std::set<std::string>(reasons.begin(), reasons.end()), std::set<std::string>{"gap_timeout"});
  long long buffered = -1;
  EXPECT_EQ(read_effects(dir.sub("db"), &buffered).size(), 80u) << "the odd keys' versions, once each";
  EXPECT_EQ(buffered, 0);
  std::printf("buffered dead letters: %zu expected, %zu published (%zu copies from resends), lost %zu\n",
              gapped.size(), letters.size(), letters.size() - std::set<std::string>(letters.begin(), letters.end()).size(),
              gapped.size() - std::set<std::string>(letters.begin(), letters.end()).size());
}

// A buffered dead letter needs a store with an outbox, and a destination that opens.
TEST(IdemConsume, BufferedDeadLettersToIsCheckedAtStart) {
  auto server = RedisServer::start({});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  testing::TempDir dir("bdlq-flags");
  const std::string log = dir.sub("log");
  const std::string uri = "redis-stream://127.0.0.1:" + std::to_string((*server)->port()) + "/s";
  const std::vector<std::string> base{"consume", "--source", uri + "?group=g"};
  auto run = [&](std::vector<std::string> more) {
    std::vector<std::string> a = base;
    a.insert(a.end(), more.begin(), more.end());
    return wait_exit(spawn_idem(a, log), std::chrono::seconds(30));
  };
  EXPECT_EQ(run({"--buffered-dead-letters-to", uri + "-d"}), 2) << "not strict";
  EXPECT_EQ(run({"--ordering", "strict", "--store", "memory:", "--buffered-dead-letters-to", uri + "-d"}), 2)
      << "memory: keeps no outbox";
  EXPECT_EQ(run({"--ordering", "strict", "--store", "sqlite:" + dir.sub("db"), "--buffered-dead-letters-to",
                 "nowhere://x"}),
            2)
      << "no publisher for the scheme";
  std::ifstream f(log);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("--buffered-dead-letters-to applies to --ordering strict only"), std::string::npos) << text;
  EXPECT_NE(text.find("needs a store that keeps an outbox"), std::string::npos) << text;
  EXPECT_NE(text.find("--buffered-dead-letters-to nowhere://x"), std::string::npos) << text;
}

#ifdef IDEM_TESTS_WITH_POSTGRES
// On postgres:// the built-in handler writes idem_effects in the dedup record's
// transaction: every message once, failed first attempts rolled back.
TEST(IdemConsume, OnPostgresEffectsAreRowsWrittenInTheTransaction) {
  auto server = RedisServer::start({});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  auto pg = postgres_test::PostgresServer::start();
  ASSERT_TRUE(pg.ok()) << pg.status().to_string();
  testing::TempDir dir("consume-pg");
  {
    std::ofstream f(dir.sub("in.jsonl"));
    for (int i = 0; i < 20; ++i) f << "{\"id\":\"m" << i << "\"" << (i % 5 == 0 ? ",\"fail\":true" : "") << "}\n";
  }
  const std::string port = std::to_string((*server)->port());
  const std::string log = dir.sub("log");
  ASSERT_EQ(
      wait_exit(spawn_idem({"publish", "--to", "redis-stream://127.0.0.1:" + port + "/s", dir.sub("in.jsonl")}, log),
                std::chrono::seconds(30)),
      0);
  ASSERT_EQ(wait_exit(spawn_idem({"consume", "--source", "redis-stream://127.0.0.1:" + port + "/s?group=g", "--store",
                                  (*pg)->uri("?schema=effects-schema"), "--idle-exit-ms", "1500", "--backoff-ms", "10"},
                                 log),
                      std::chrono::seconds(60)),
            0);
  PGconn* c = PQconnectdb(("host=127.0.0.1 user=idem dbname=postgres port=" + std::to_string((*pg)->port())).c_str());
  PGresult* r = PQexec(c, "SELECT count(*), count(DISTINCT id) FROM \"effects-schema\".idem_effects");
  ASSERT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << PQresultErrorMessage(r);
  EXPECT_EQ(std::string(PQgetvalue(r, 0, 0)), "20");
  EXPECT_EQ(std::string(PQgetvalue(r, 0, 1)), "20");
  PQclear(r);
  PQfinish(c);
}
#endif

}  // namespace
}  // namespace idem::consume_test

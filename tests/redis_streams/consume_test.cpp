// `idem consume` end to end on a real redis-server and SQLite: 20,000+ messages with
// redelivered copies, keys with versions (some out of order), failing first attempts
// and malformed bodies; the consumer is SIGKILLed at random moments (once with a
// second consumer of the group beside it) and restarted until idle. Then idem_effects
// must hold every effect exactly once, nothing lost (under strict ordering, per key in
// version order); the dead-letter stream exactly the malformed messages; the reorder
// buffer nothing. Twice: strict ordering one message at a time, and batches of 32 in
// one SQLite transaction each.
// IDEM_CONSUME_KILLS=N sets the number of kills (default 10; 50 or more for a long run).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"

namespace idem::consume_test {
namespace {

using redis_test::RedisServer;

constexpr int kKeys = 200;
constexpr int kVersionsPerKey = 85;  // 17,000 distinct messages
constexpr int kMalformed = 120;

// Starts `idem args…` with stdout and stderr to `log`; it dies with the test.
pid_t spawn_idem(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  dup2(fd, 1);
  dup2(fd, 2);
  std::vector<char*> argv{const_cast<char*>(IDEM_BINARY)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(IDEM_BINARY, argv.data());
  _exit(127);
}

// Waits up to `timeout` for pid; returns its exit code, or -1 (then kills it).
int wait_exit(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void kill_now(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

struct Workload {
  std::vector<std::string> lines;   // what is published, in order
  std::set<std::string> valid_ids;  // each must have exactly one effect
  std::set<std::string> malformed;  // each must be dead-lettered exactly once
};

std::string line_for(int key, int version, bool fail) {
  std::string s = "{\"id\":\"k" + std::to_string(key) + "-v" + std::to_string(version) + "\",\"key\":\"k" +
                  std::to_string(key) + "\",\"version\":" + std::to_string(version) + ",\"payload\":\"p\"";
  if (fail) s += ",\"fail\":true";
  return s + "}";
}

// Keys interleaved at random; versions of a key mostly in order, some swapped with
// the next; 20% of the messages sent again later; malformed bodies in between.
// strict: a body without key and version is malformed; otherwise only non-JSON is.
Workload make_workload(std::mt19937& rng, bool strict) {
  Workload w;
  std::vector<int> next(kKeys, 1);
  std::vector<std::string> sent;
  int odd = 0;  // bodies without key and version, or not JSON
  while (static_cast<int>(w.valid_ids.size()) < kKeys * kVersionsPerKey) {
    const int k = static_cast<int>(rng() % kKeys);
    if (next[k] > kVersionsPerKey) continue;
    int v = next[k]++;
    const bool swap = v < kVersionsPerKey && rng() % 10 == 0;
    if (swap) ++next[k];
    for (int ver : swap ? std::vector<int>{v + 1, v} : std::vector<int>{v}) {
      w.lines.push_back(line_for(k, ver, rng() % 30 == 0));
      w.valid_ids.insert("k" + std::to_string(k) + "-v" + std::to_string(ver));
      sent.push_back(w.lines.back());
      if (rng() % 5 == 0) w.lines.push_back(sent[sent.size() - 1 - rng() % std::min<std::size_t>(sent.size(), 500)]);
    }
    if (rng() % 140 == 0 && odd < kMalformed) {
      const std::string n = std::to_string(odd++);
      const std::string bad = rng() % 2 ? "not json " + n : "{\"id\":\"nokey-" + n + "\"}";
      w.lines.push_back(bad);
      if (strict || bad[0] != '{') {
        w.malformed.insert(bad);
      } else {
        w.valid_ids.insert("nokey-" + n);
      }
    }
  }
  return w;
}

struct EffectRow {
  std::string id, key;
  long long version;
};

std::vector<EffectRow> read_effects(const std::string& db_path, long long* buffered) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  std::vector<EffectRow> rows;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT id, key, version FROM idem_effects ORDER BY seq", -1, &st, nullptr);
  auto text = [&](int col) {
    const unsigned char* t = sqlite3_column_text(st, col);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  };
  while (sqlite3_step(st) == SQLITE_ROW) rows.push_back({text(0), text(1), sqlite3_column_int64(st, 2)});
  sqlite3_finalize(st);
  sqlite3_prepare_v2(db, "SELECT count(*) FROM idem_buffer", -1, &st, nullptr);
  *buffered = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

// How the consumer runs: strict ordering one message at a time (per-key order is
// checked), or no ordering in batches of 32, one SQLite transaction per batch.
struct Mode {
  const char* name;
  bool strict;
  const char* batch;
};

// For test names and failure messages: the mode's name, not its bytes.
void PrintTo(const Mode& m, std::ostream* os) { *os << m.name; }

class IdemConsumeKills : public ::testing::TestWithParam<Mode> {};

TEST_P(IdemConsumeKills, SurviveRandomKillsWithEveryEffectExactlyOnce) {
  const Mode mode = GetParam();
  auto server = RedisServer::start({});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  testing::TempDir dir("consume");
  std::mt19937 rng(20261201);
  const Workload w = make_workload(rng, mode.strict);
  ASSERT_GE(w.lines.size(), 20'000u);
  {
    std::ofstream f(dir.sub("in.jsonl"));
    for (const std::string& l : w.lines) f << l << '\n';
  }
  const std::string port = std::to_string((*server)->port());
  const std::string log = dir.sub("consume.log");
  ASSERT_EQ(
      wait_exit(
          spawn_idem({"publish", "--to", "redis-stream://127.0.0.1:" + port + "/orders", dir.sub("in.jsonl")}, log),
          std::chrono::seconds(60)),
      0);

  const std::string db = dir.sub("idem.db");
  const std::vector<std::string> consume{"consume",
                                         "--source",
                                         "redis-stream://127.0.0.1:" + port + "/orders?group=g",
                                         "--store",
                                         "sqlite:" + db + "?leases=shared",
                                         "--ordering",
                                         mode.strict ? "strict" : "none",
                                         "--batch",
                                         mode.batch,
                                         "--workers",
                                         "4",
                                         "--lease-ms",
                                         "1000",
                                         "--backoff-ms",
                                         "20",
                                         "--idle-exit-ms",
                                         "1500"};
  const char* env = std::getenv("IDEM_CONSUME_KILLS");
  const int kills = env ? std::max(10, std::atoi(env)) : 10;
  for (int i = 0; i < kills; ++i) {
    const pid_t a = spawn_idem(consume, log);
    const pid_t b = i == kills / 2 ? spawn_idem(consume, log) : 0;  // once, two consumers of the group
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 600));
    kill_now(a);
    if (b != 0) kill_now(b);
  }
  const int rc = wait_exit(spawn_idem(consume, log), std::chrono::seconds(120));
  ASSERT_EQ(rc, 0) << "the last consumer did not exit by itself; log: " << log;

  long long buffered = -1;
  const std::vector<EffectRow> effects = read_effects(db, &buffered);
  std::map<std::string, int> per_id;
  std::map<std::string, long long> last_version;
  for (const EffectRow& e : effects) {
    ++per_id[e.id];
    if (!mode.strict) continue;
    EXPECT_EQ(e.version, last_version[e.key] + 1) << "key " << e.key << " out of order at " << e.id;
    last_version[e.key] = e.version;
  }
  std::size_t doubled = 0;
  for (const auto& [id, n] : per_id) doubled += n > 1 ? 1 : 0;
  EXPECT_EQ(doubled, 0u) << "effects that happened more than once";
  std::set<std::string> ids;
  for (const auto& [id, n] : per_id) ids.insert(id);
  EXPECT_EQ(ids, w.valid_ids) << "effects lost or invented";
  EXPECT_EQ(buffered, 0) << "the reorder buffer still holds messages";

  auto dlq = (*server)->command({"XRANGE", "orders:dlq", "-", "+"});
  ASSERT_TRUE(dlq.ok());
  std::multiset<std::string> dead;
  for (const auto& entry : dlq->elements) {
    const auto& fields = entry.elements.at(1).elements;
    for (std::size_t i = 0; i + 1 < fields.size(); i += 2)
      if (fields[i].str == "body") dead.insert(fields[i + 1].str);
  }
  EXPECT_EQ(dead, std::multiset<std::string>(w.malformed.begin(), w.malformed.end()));
  auto pending = (*server)->command({"XPENDING", "orders", "g"});
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending->elements.at(0).integer, 0);
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
  auto dlq = (*server)->command({"XRANGE", "s:dlq", "-", "+"});
  ASSERT_TRUE(dlq.ok());
  std::set<std::string> reasons;
  EXPECT_EQ(dlq->elements.size(), 5u);  // m0, m4, m8, m12, m16
  for (const auto& entry : dlq->elements) {
    const auto& fields = entry.elements.at(1).elements;
    for (std::size_t i = 0; i + 1 < fields.size(); i += 2)
      if (fields[i].str == "reason") reasons.insert(fields[i + 1].str);
  }
  EXPECT_EQ(reasons, std::set<std::string>{"retries_exhausted"});
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

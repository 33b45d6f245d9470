// Two `idem consume` processes on one shared store while their hosts' clocks disagree.
// Each reads a Redis stream of its own holding the same ids (a copy of every message
// reaches both at about the same time; a stream never hands one entry to two
// consumers); the handler (examples/sidecar's exec handler) logs each call and sleeps
// half the lease. The second process runs under libfaketime (libfaketimeMT): its wall
// clock 30 s ahead, 30 s behind, or running 1.5 times as fast; or one host's clock
// (both processes', on SQLite) set 10 minutes forward or back while they run. Handler
// runs per id are counted from the handler's own log.
//
// With --clock host (the time each host reads) the skewed process takes the other's
// live lease as expired, or writes leases that are already expired, and ids run twice:
// the arms that show it assert that they did, which is the premise of the others. With
// the store's clock (the default on Redis, Redis Cluster and PostgreSQL) no id runs
// twice, every id runs, and the copies did meet (in_progress decisions were given).
//
// A skew or a step moves the wall clock only: the monotonic clock is left alone
// (FAKETIME_DONT_FAKE_MONOTONIC), as NTP and operators leave it. A drifting host's
// oscillator moves both, so the drift arms fake the monotonic clock too.
//
// IDEM_CLOCK_SKEW_ALL=1 also runs the other skews with --clock host (the table before
// the store clock); CI runs the +30 s arm of it on each store.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/child_process.hpp"
#include "support/postgres_server.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"

namespace idem::clock_skew {
namespace {

using namespace std::chrono_literals;
using test_support::spawn;
using test_support::SpawnOptions;

constexpr const char* kFaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

enum class StoreKind { kRedis, kCluster, kPostgres, kSqlite };

struct Skew {
  const char* name;
  std::vector<std::string> env;   // libfaketime's settings for the skewed process
  const char* step_to = nullptr;  // set: the offset written to the timestamp file 1 s in
  bool both = false;              // both processes run under it (one host's clock)
  int ids = 12;                   // messages: three waves at four workers
  // How long the consumers run before the messages come: the drift's head start.
  std::chrono::seconds lead{0};
  // The skewed process gets its copies 300 ms before the other, not after: it claims
  // first. A clock behind writes leases the other takes for expired; a clock ahead
  // takes the other's live leases for expired.
  bool skewed_first = false;
  int lease_ms = 2000;  // --lease-ms; the handler sleeps half of it
};

Skew ahead() { return {"+30 s", {"FAKETIME=+30s", "FAKETIME_DONT_FAKE_MONOTONIC=1"}}; }
Skew behind() { return {"-30 s", {"FAKETIME=-30s", "FAKETIME_DONT_FAKE_MONOTONIC=1"}, nullptr, false, 12, 0s, true}; }
// Started 5 s before the messages come, the drifting clock is more than a second ahead
// by then (libfaketime's x1.5 runs about 1.3 times as fast here), past a 1 s lease.
Skew drifting() { return {"rate 1.5", {"FAKETIME=+0 x1.5"}, nullptr, false, 12, 5s, false, 1000}; }
Skew stepping(const char* name, const char* to, bool both = false) {
  return {name, {"FAKETIME_CACHE_DURATION=1", "FAKETIME_DONT_FAKE_MONOTONIC=1"}, to, both};
}

struct Servers {
  std::unique_ptr<redis_test::RedisServer> redis;  // the broker, and the Redis store
  std::unique_ptr<redis_test::RedisCluster> cluster;
  std::unique_ptr<postgres_test::PostgresServer> postgres;
};

Servers& servers() {
  static Servers s = [] {
    Servers out;
    auto r = redis_test::RedisServer::start({});
    if (r.ok()) out.redis = std::move(*r);
    auto c = redis_test::RedisCluster::start(3, 0);
    if (c.ok()) out.cluster = std::move(*c);
    auto p = postgres_test::PostgresServer::start();
    if (p.ok()) out.postgres = std::move(*p);
    return out;
  }();
  return s;
}

std::string with_param(const std::string& uri, const std::string& param) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + param;
}

// The store's URI for one arm: its own key prefix or schema.
std::string store_uri(StoreKind kind, int arm, const std::string& dir) {
  const std::string tag = "skew" + std::to_string(arm);
  switch (kind) {
    case StoreKind::kSqlite:
      return "sqlite:" + dir + "/idem.db?leases=shared";
    case StoreKind::kRedis:
      return with_param(servers().redis->uri(), "prefix=" + tag + ":");
    case StoreKind::kCluster:
      return with_param(servers().cluster->uri(), "prefix=" + tag + ":");
    case StoreKind::kPostgres:
      return servers().postgres->uri("?schema=" + tag);
  }
  return "";
}

const char* store_name(StoreKind kind) {
  switch (kind) {
    case StoreKind::kRedis:
      return "Redis";
    case StoreKind::kCluster:
      return "Redis Cluster";
    case StoreKind::kPostgres:
      return "PostgreSQL";
    case StoreKind::kSqlite:
      return "SQLite";
  }
  return "";
}

long long unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

struct ArmResult {
  int ran_twice = 0;  // ids whose handler ran more than once
  int never_ran = 0;  // ids whose handler never ran
  std::size_t in_progress = 0;  // copies that met the other's lease
  int exit_a = -1, exit_b = -1;
  std::string logs;
};

class ClockSkew : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(std::filesystem::exists(kFaketime)) << kFaketime << " is missing (Debian: faketime)";
    ASSERT_NE(servers().redis, nullptr) << "redis-server did not start";
    ASSERT_NE(servers().cluster, nullptr) << "the Redis Cluster did not start";
    ASSERT_NE(servers().postgres, nullptr) << "postgres did not start";
  }

  // Starts the two consumers (the second under `skew`), publishes skew.ids ids to their
  // two streams (after skew.lead), and counts the handler's runs per id.
  ArmResult run_arm(StoreKind kind, const Skew& skew, const char* clock) {
    static int arm = 0;
    ++arm;
    testing::TempDir dir("skew");
    std::ofstream(dir.sub("in.jsonl")) << ids_body(arm, skew.ids, skew.lease_ms / 2);
    const std::string broker = "redis-stream" + servers().redis->uri().substr(5) + "/";
    SpawnOptions skewed;
    skewed.env = skew.env;
    skewed.env.push_back(std::string("LD_PRELOAD=") + kFaketime);
    if (skew.step_to != nullptr) {
      std::ofstream(dir.sub("offset")) << "+0\n";
      skewed.env.push_back("FAKETIME_TIMESTAMP_FILE=" + dir.sub("offset"));
    }
    const std::string store = store_uri(kind, arm, dir.str());
    // The handler runs without libfaketime: the consumer's clock is what is tested (and
    // Python's sleep fails under libfaketime with the monotonic clock left alone). Its
    // timeout is well past its sleep, which a drifting consumer measures 1.5 times long.
    auto consume = [&](const char* side, const SpawnOptions& o) {
      const std::string source = broker + "skew" + std::to_string(arm) + side + "?group=g&consumer=" + side;
      return spawn({IDEM_BINARY, "consume", "--source", source, "--store", store, "--clock", clock, "--lease-ms",
                    std::to_string(skew.lease_ms), "--handler-timeout-ms", "10000", "--workers", "4", "--id", "/id",
                    "--idle-exit-ms", std::to_string(3000 + 3000 * skew.lead.count()), "--handler",
                    "exec:env -u LD_PRELOAD python3 " IDEM_SIDECAR_EXAMPLES "/exec_handler.py " +
                        dir.sub(std::string("calls-") + side)},
                   dir.sub(std::string("out-") + side), o);
    };
    const pid_t a = consume("a", skew.both ? skewed : SpawnOptions{});
    const pid_t b = consume("b", skewed);
    std::this_thread::sleep_for(skew.lead);
    for (const char* side : {skew.skewed_first ? "b" : "a", skew.skewed_first ? "a" : "b"}) {
      const std::string stream = broker + "skew" + std::to_string(arm) + side;
      EXPECT_EQ(run_idem({"publish", "--to", stream, dir.sub("in.jsonl")}, dir.sub("publish.log")), 0)
          << read_all(dir.sub("publish.log"));
      std::this_thread::sleep_for(300ms);
    }
    if (skew.step_to != nullptr) {
      std::this_thread::sleep_for(1s);
      std::ofstream(dir.sub("offset")) << skew.step_to << '\n';
      expect_step_seen(skewed, skew.step_to, dir.sub("date"));
    }
    ArmResult r;
    r.exit_a = wait_for(a);
    r.exit_b = wait_for(b);
    const std::string calls = read_all(dir.sub("calls-a")) + read_all(dir.sub("calls-b"));
    for (int i = 0; i < skew.ids; ++i) {
      const std::size_t runs = count_of(calls, "o" + std::to_string(arm) + "-" + std::to_string(i) + " ");
      r.ran_twice += runs > 1;
      r.never_ran += runs == 0;
    }
    r.logs = read_all(dir.sub("out-a")) + read_all(dir.sub("out-b"));
    r.in_progress = count_of(r.logs, "\"reason\":\"in_progress\"");
    EXPECT_EQ(count_of(r.logs, "\"reason\":\"handler_failed\""), 0u) << "the handler failed\n" << r.logs;
    std::printf("CLOCK_SKEW store=%s skew=\"%s\" clock=%s ids=%d ran_twice=%d never_ran=%d copies_in_progress=%zu\n",
                store_name(kind), skew.name, clock, skew.ids, r.ran_twice, r.never_ran, r.in_progress);
    return r;
  }

  // Without the store's clock, the skewed process must run some ids twice: the test
  // can see the failure it guards against.
  void expect_doubles_with_host_clock(StoreKind kind, const Skew& skew) {
    ArmResult r = run_arm(kind, skew, "host");
    EXPECT_GE(r.ran_twice, 1) << "the skew was not seen; the store-clock arms prove nothing\n" << r.logs;
    EXPECT_EQ(r.never_ran, 0);
  }

  void expect_once_with_store_clock(StoreKind kind, const Skew& skew) {
    ArmResult r = run_arm(kind, skew, "store");
    EXPECT_EQ(r.ran_twice, 0) << r.logs;
    EXPECT_EQ(r.never_ran, 0) << r.logs;
    EXPECT_GE(r.in_progress, 1u) << "no copy met the other's lease: the copies did not overlap\n" << r.logs;
    EXPECT_EQ(r.exit_a, 0) << r.logs;
    EXPECT_EQ(r.exit_b, 0) << r.logs;
  }

  void run_store(StoreKind kind) {
    expect_doubles_with_host_clock(kind, ahead());
    if (std::getenv("IDEM_CLOCK_SKEW_ALL") != nullptr) {
      expect_doubles_with_host_clock(kind, behind());
      // Reported, not asserted: whether a drifting clock runs ids twice here depends on
      // which process claims first, which the drift itself changes (its timers run fast).
      (void)run_arm(kind, drifting(), "host");
    }
    expect_once_with_store_clock(kind, ahead());
    expect_once_with_store_clock(kind, behind());
    expect_once_with_store_clock(kind, drifting());
  }

 private:
  // The premise of a step arm: a process under the same settings reads the stepped
  // wall clock (so a clock that read it at every call would have been moved).
  static void expect_step_seen(const SpawnOptions& o, const std::string& step, const std::string& out) {
    std::this_thread::sleep_for(1100ms);  // libfaketime reads the file again after a second
    ASSERT_EQ(wait_for(spawn({"date", "+%s"}, out, o)), 0);
    const long long faked = std::atoll(read_all(out).c_str());
    EXPECT_NEAR(double(faked - unix_now()), double(std::atoll(step.c_str())), 5.0) << "the step did not happen";
  }
  static std::string ids_body(int arm, int ids, int sleep_ms) {
    std::string out;
    for (int i = 0; i < ids; ++i)
      out += "{\"id\":\"o" + std::to_string(arm) + "-" + std::to_string(i) + "\",\"sleep_ms\":" +
             std::to_string(sleep_ms) + "}\n";
    return out;
  }
  static int run_idem(std::vector<std::string> args, const std::string& log) {
    args.insert(args.begin(), IDEM_BINARY);
    return wait_for(spawn(args, log));
  }
  static int wait_for(pid_t pid) {
    const auto deadline = std::chrono::steady_clock::now() + 90s;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid)
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      std::this_thread::sleep_for(50ms);
    }
    test_support::reap(pid, SIGKILL);
    return -1;
  }
};

// The skewed process really reads a skewed wall clock.
TEST_F(ClockSkew, LibfaketimeSkewsTheWallClockOfTheProcessItIsLoadedInto) {
  testing::TempDir dir("skew");
  SpawnOptions o;
  o.env = ahead().env;
  o.env.push_back(std::string("LD_PRELOAD=") + kFaketime);
  const pid_t p = spawn({"date", "+%s"}, dir.sub("date"), o);
  ASSERT_EQ(test_support::wait_exit(p), 0);
  const long long faked = std::atoll(read_all(dir.sub("date")).c_str());
  EXPECT_NEAR(double(faked - unix_now()), 30.0, 3.0);
}

TEST_F(ClockSkew, RedisRunsEachIdOnceWhateverTheHostsClocksSay) { run_store(StoreKind::kRedis); }
TEST_F(ClockSkew, RedisClusterRunsEachIdOnceWhateverTheHostsClocksSay) { run_store(StoreKind::kCluster); }
TEST_F(ClockSkew, PostgresRunsEachIdOnceWhateverTheHostsClocksSay) { run_store(StoreKind::kPostgres); }

// A host's wall clock set 10 minutes forward, then (another arm) back, while its
// consumer runs: no live lease expires at once and none outlives its holder. On Redis
// and PostgreSQL the store's clock ignores the host's; on SQLite both consumers share
// the stepped host, whose clock each process reads once and then advances by the
// monotonic clock (system_clock()).
TEST_F(ClockSkew, AStepOfAHostsWallClockChangesNothing) {
  expect_once_with_store_clock(StoreKind::kRedis, stepping("stepped +10 min", "+600"));
  expect_once_with_store_clock(StoreKind::kRedis, stepping("stepped -10 min", "-600"));
  expect_once_with_store_clock(StoreKind::kPostgres, stepping("stepped +10 min", "+600"));
  expect_once_with_store_clock(StoreKind::kSqlite, stepping("both stepped +10 min", "+600", true));
  expect_once_with_store_clock(StoreKind::kSqlite, stepping("both stepped -10 min", "-600", true));
}

}  // namespace
}  // namespace idem::clock_skew

#include "support/dead_letter_crash.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "support/temp_dir.hpp"

namespace idem::consume_kills {
namespace {

constexpr int kPoisoned = 12;
constexpr int kGood = 30;
constexpr double kThrottleRate = 0.01;  // dead letters a second past the first

std::string poisoned(int i) { return R"({"id":"poison-)" + std::to_string(i) + R"(","payload":"p","fail":true})"; }
std::string good(int i) { return R"({"id":"good-)" + std::to_string(i) + R"(","payload":"p"})"; }

// Dead letters the store has recorded (SQLite's idem_records, state 3); -1 while the
// store cannot be read.
long long recorded_dead_letters(const std::string& db_path) {
  sqlite3* db = nullptr;
  long long n = -1;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM idem_records WHERE state = 3", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return n;
}

// Waits until the store's count of dead letters has stopped growing for a second
// (the workers decided what they fetched; the throttle holds the forwards back), at
// most 60 s. Returns that count.
long long wait_for_recorded(const std::string& db_path) {
  long long last = -1;
  auto stable_since = std::chrono::steady_clock::now();
  const auto deadline = stable_since + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const long long n = recorded_dead_letters(db_path);
    if (n != last) {
      last = n;
      stable_since = std::chrono::steady_clock::now();
    } else if (n >= kPoisoned / 2 && std::chrono::steady_clock::now() - stable_since > std::chrono::seconds(1)) {
      break;
    }
  }
  return last;
}

std::vector<std::string> consume_args(Broker& broker, const CrashPointOptions& o, const std::string& db,
                                      bool throttled) {
  std::vector<std::string> a{"consume",       "--source",  broker.source_uri(o.topic, o.group),
                             "--store",       "sqlite:" + db + "?leases=shared",
                             "--max-retries", "0",         "--workers", "2",
                             "--lease-ms",    o.lease_ms,  "--backoff-ms", "20"};
  if (throttled) {
    a.insert(a.end(), {"--failure-actions-per-second", std::to_string(kThrottleRate), "--failure-burst", "1"});
  } else {
    a.insert(a.end(), {"--idle-exit-ms", o.idle_exit_ms});
  }
  a.insert(a.end(), o.extra_args.begin(), o.extra_args.end());
  return a;
}

}  // namespace

void run_dead_letter_crash_test(Broker& broker, const CrashPointOptions& o) {
  testing::TempDir dir("dead-letter-crash");
  std::set<std::string> poison_bodies;
  {
    std::ofstream f(dir.sub("in.jsonl"));
    for (int i = 0; i < kGood; ++i) {
      f << good(i) << '\n';
      if (i % 2 == 0 && i / 2 < kPoisoned) {
        f << poisoned(i / 2) << '\n';
        poison_bodies.insert(poisoned(i / 2));
      }
    }
  }
  const std::string log = dir.sub("consume.log");
  ASSERT_EQ(wait_exit(spawn_idem({"publish", "--to", broker.publish_uri(o.topic), dir.sub("in.jsonl")}, log),
                      std::chrono::seconds(60)),
            0)
      << "idem publish failed";

  const std::string db = dir.sub("idem.db");
  const auto started = std::chrono::steady_clock::now();
  const pid_t throttled = spawn_idem(consume_args(broker, o, db, true), log);
  const long long recorded = wait_for_recorded(db);
  kill(throttled, SIGKILL);
  waitpid(throttled, nullptr, 0);
  // The throttle let through its burst of 1 and kThrottleRate a second since the start
  // at most; every other recorded dead letter was waiting between store and broker.
  const double ran_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const long long in_window = recorded - 1 - static_cast<long long>(std::ceil(ran_s * kThrottleRate));
  EXPECT_GE(in_window, 1) << "the kill must find dead letters recorded and not yet forwarded";

  ASSERT_EQ(wait_exit(spawn_idem(consume_args(broker, o, db, false), log), o.final_timeout), 0)
      << "the consumer after the crash did not exit by itself; log: " << log;

  const std::multiset<std::string> dead = broker.dead_letter_bodies(o.topic);
  int lost = 0;
  for (const std::string& b : poison_bodies) lost += dead.count(b) == 0 ? 1 : 0;
  const std::size_t copies = dead.size() - (poison_bodies.size() - static_cast<std::size_t>(lost));
  std::cout << "CRASHPOINT dead_letter broker=" << o.name << " poisoned=" << kPoisoned << " recorded=" << recorded
            << " in_window_at_least=" << in_window << " copies=" << copies << " lost=" << lost << std::endl;
  EXPECT_EQ(lost, 0) << "dead letters that never reached the dead-letter destination";
  for (const std::string& b : dead) EXPECT_EQ(poison_bodies.count(b), 1u) << "not a poisoned message: " << b;

  long long buffered = 0;
  std::map<std::string, int> effects;
  for (const EffectRow& e : read_effects(db, &buffered)) ++effects[e.id];
  EXPECT_EQ(effects.size(), static_cast<std::size_t>(kGood)) << "every good message has its effect";
  for (const auto& [id, n] : effects) {
    EXPECT_EQ(n, 1) << id;
    EXPECT_EQ(id.rfind("good-", 0), 0u) << id;
  }
}

}  // namespace idem::consume_kills

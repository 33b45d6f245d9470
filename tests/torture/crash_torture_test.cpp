// Crash torture: torture_driver runs 20,000 deliveries (16,000 distinct messages with
// duplicates, out-of-order versions and the product machine's events; workload.hpp)
// through a strict-ordering consumer, and is SIGKILLed at least 50 times per durable
// store — mostly mid-stream, one kill in eight during its start-up — then run to the
// end. A second run without kills is the reference. Checked:
//   - every message's effect happened (nothing lost), in version order per key;
//   - SQLite, RocksDB and PostgreSQL: exactly once (the effect is written in the dedup
//     commit);
//     Redis: the store cannot hold the handler's writes, so its effect (a log line
//     written before the commit) is at least once, and repeated at most once per kill
//     (the driver runs one message at a time);
//   - every message's dedup record is completed with its stored result;
//   - every entity's version and state equal the reference run's;
//   - the reorder buffer is empty.
// Each store prints one line: kills, redeliveries, duplicates caught, effects,
// mismatches. IDEM_TORTURE_KILLS=N runs N kills per store instead (scripts/torture.sh
// --long).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"
#include "idem/open_store.hpp"
#include "idem/rocksdb_store.hpp"
#ifdef IDEM_TORTURE_WITH_POSTGRES
#include <libpq-fe.h>

#include "support/postgres_server.hpp"
#endif
#include "idem/sqlite_store.hpp"
#include "rocksdb/test_dir.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"
#include "torture/stats.hpp"
#include "torture/workload.hpp"

namespace idem::torture {
namespace {

using Clock = std::chrono::steady_clock;

int kills_wanted() {
  const char* env = std::getenv("IDEM_TORTURE_KILLS");
  return env != nullptr ? std::max(1, std::atoi(env)) : 50;
}

// Starts the driver with its progress on a pipe at fd 3; *progress is the read end.
pid_t spawn_driver(const std::vector<std::string>& args, const std::string& log, int* progress) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::dup2(fds[1], 3);
    std::vector<char*> argv{const_cast<char*>(IDEM_TORTURE_DRIVER)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(IDEM_TORTURE_DRIVER, argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  *progress = fds[0];
  return pid;
}

// Reads progress until the driver decided `steps` more messages; false if it exited
// (the pipe closed) or said nothing for 60 s.
bool await_progress(int fd, std::uint64_t steps) {
  std::uint64_t seen = 0, value = 0;
  while (seen < steps) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 60'000) <= 0) return false;
    if (::read(fd, &value, sizeof value) != sizeof value) return false;
    ++seen;
  }
  return true;
}

int reap(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs the driver to its end; returns its exit code (-1 after 120 s, killed).
int run_to_end(const std::vector<std::string>& args, const std::string& log) {
  int progress = -1;
  const pid_t pid = spawn_driver(args, log, &progress);
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  int status = 0;
  std::uint64_t sink;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::close(progress);
      return reap(pid), -1;
    }
    pollfd p{progress, POLLIN, 0};
    if (::poll(&p, 1, 20) > 0) (void)!::read(progress, &sink, sizeof sink);
  }
  ::close(progress);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Kills the driver `kills` times: one kill in eight a few ms into its start-up, the
// others after a random number of decisions (spread so the kills cover the whole
// workload) and a random few hundred µs more. Returns the kills made before the
// workload ran out (the driver then exits by itself).
int kill_repeatedly(const std::vector<std::string>& args, const std::string& log, int kills, std::size_t messages) {
  std::mt19937 rng(kills);
  const std::uint64_t spread = std::max<std::uint64_t>(2, 2 * messages / (kills * 3 / 2 + 1));
  for (int i = 0; i < kills; ++i) {
    int progress = -1;
    const pid_t pid = spawn_driver(args, log, &progress);
    bool alive = true;
    if (rng() % 8 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20'000));
    } else {
      alive = await_progress(progress, 1 + rng() % spread);
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 400));
    }
    ::kill(pid, SIGKILL);
    const int rc = reap(pid);
    ::close(progress);
    if (!alive && rc != 128 + SIGKILL) {
      ADD_FAILURE() << "the driver exited with " << rc << " before kill " << i << "; log: " << log;
      return i;
    }
  }
  return kills;
}

// What a store ends with, as the checks read it.
struct Outcome {
  std::map<std::string, std::vector<std::uint64_t>> versions_by_key;  // effects, in order
  std::map<std::string, int> effects_by_id;
  std::size_t effects = 0;
};

Outcome sqlite_effects(const std::string& path) {
  Outcome o;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT id, key, version FROM torture_effects ORDER BY seq", -1, &st, nullptr);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const std::string id = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    const std::string key = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
    o.versions_by_key[key].push_back(static_cast<std::uint64_t>(sqlite3_column_int64(st, 2)));
    ++o.effects_by_id[id];
    ++o.effects;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return o;
}

Outcome rocksdb_effects(const std::string& path) {
  Outcome o;
  for (const auto& [k, v] : testing::raw_read_all(path, "effects")) {  // e/<key>/<n>, n zero-padded
    if (k.rfind("e/", 0) != 0) continue;
    const std::string key = k.substr(2, k.rfind('/') - 2);
    o.versions_by_key[key].push_back(std::stoull(v));
    ++o.effects_by_id[key + "-v" + v];
    ++o.effects;
  }
  return o;
}

#ifdef IDEM_TORTURE_WITH_POSTGRES
Outcome postgres_effects(const std::string& uri, const std::string& table) {
  Outcome o;
  PGconn* conn = PQconnectdb(uri.c_str());
  EXPECT_EQ(PQstatus(conn), CONNECTION_OK) << PQerrorMessage(conn);
  const std::string sql = "SELECT id, key, version FROM public." + table + " ORDER BY seq";
  PGresult* r = PQexec(conn, sql.c_str());
  EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << PQerrorMessage(conn);
  for (int i = 0; i < PQntuples(r); ++i) {
    o.versions_by_key[PQgetvalue(r, i, 1)].push_back(std::stoull(PQgetvalue(r, i, 2)));
    ++o.effects_by_id[PQgetvalue(r, i, 0)];
    ++o.effects;
  }
  PQclear(r);
  PQfinish(conn);
  return o;
}
#endif

Outcome log_effects(const std::string& path) {
  Outcome o;
  std::ifstream in(path);
  std::string id, key;
  std::uint64_t version;
  while (in >> id >> key >> version) {
    o.versions_by_key[key].push_back(version);
    ++o.effects_by_id[id];
    ++o.effects;
  }
  return o;
}

// The checks; returns the number of mismatches, each also reported as a failure.
class Checker {
 public:
  Checker(const std::vector<test::EntityMsg>& work, bool exactly_once, int kills)
      : exactly_once_(exactly_once), kills_(kills) {
    for (const test::EntityMsg& m : work) {
      ids_.insert(m.id);
      keys_[*m.key] = std::max(keys_[*m.key], *m.version);
    }
  }

  void effects(const Outcome& o) {
    int repeated = 0;
    for (const auto& [id, n] : o.effects_by_id) {
      if (!ids_.contains(id)) mismatch("an effect of no message: " + id);
      if (n > 1) repeated += n - 1;
    }
    for (const std::string& id : ids_)
      if (!o.effects_by_id.contains(id)) mismatch("no effect for " + id);
    if (exactly_once_ && repeated > 0) mismatch(std::to_string(repeated) + " effects happened more than once");
    if (!exactly_once_ && repeated > kills_)
      mismatch(std::to_string(repeated) + " repeated effects for " + std::to_string(kills_) + " kills");
    for (const auto& [key, last] : keys_) {
      std::vector<std::uint64_t> seen;  // repeats of the same version in a row collapsed (at least once)
      for (std::uint64_t v : o.versions_by_key.count(key) ? o.versions_by_key.at(key) : seen)
        if (seen.empty() || seen.back() != v || exactly_once_) seen.push_back(v);
      std::vector<std::uint64_t> want(last);
      for (std::uint64_t v = 1; v <= last; ++v) want[v - 1] = v;
      if (seen != want) mismatch("key " + key + ": effects out of version order or missing");
    }
  }

  void store(Store& s, Store& reference) {
    const TimePoint now = std::chrono::system_clock::now();
    for (const std::string& id : ids_) {
      const std::string key = id.substr(0, id.find('-'));
      auto c = s.claim({id, "checker", Duration(1000), std::nullopt, now, std::string_view(key)});
      if (!c.ok() || c->status != ClaimStatus::kCompleted || c->result != std::optional<std::string>(id)) {
        mismatch("the dedup record of " + id + " is not completed with its result");
      }
    }
    for (const auto& [key, last] : keys_) {
      auto got = s.entities()->read_entity(key);
      auto want = reference.entities()->read_entity(key);
      if (!got.ok() || !want.ok() || got->version != want->version || got->state != want->state ||
          want->version != last || want->state != final_state(std::stoi(key.substr(1)), static_cast<int>(last))) {
        mismatch("entity " + key + " differs from the run without crashes");
      }
    }
    auto buffered = s.entities()->buffer_summary(0);
    if (!buffered.ok() || buffered->count != 0) mismatch("the reorder buffer is not empty");
  }

  int mismatches() const { return mismatches_; }

 private:
  void mismatch(const std::string& what) {
    if (++mismatches_ <= 20) ADD_FAILURE() << what;
  }

  const bool exactly_once_;
  const int kills_;
  std::set<std::string> ids_;
  std::map<std::string, std::uint64_t> keys_;  // key → its last version
  int mismatches_ = 0;
};

struct Target {
  const char* kind;
  bool exactly_once;
};

void PrintTo(const Target& t, std::ostream* os) { *os << t.kind; }

class CrashTorture : public ::testing::TestWithParam<Target> {};

// The server a store kind needs, and each run's arguments for the driver after DIR.
class Server {
 public:
  explicit Server(const std::string& kind) : kind_(kind) {}

  Status start() {
    if (kind_ == "redis") {
      auto s = redis_test::RedisServer::start({});
      if (!s.ok()) return s.status();
      redis_ = std::move(*s);
    }
#ifdef IDEM_TORTURE_WITH_POSTGRES
    if (kind_ == "postgres") {
      auto s = postgres_test::PostgresServer::start();
      if (!s.ok()) return s.status();
      postgres_ = std::move(*s);
    }
#endif
    return ok_status();
  }

  // "run" or "ref": a Redis database or a PostgreSQL schema of its own.
  std::vector<std::string> args(const std::string& run) const {
    if (redis_) return {redis_->uri() + (run == "run" ? "/0" : "/1")};
#ifdef IDEM_TORTURE_WITH_POSTGRES
    if (postgres_) return {postgres_->uri(), run};
#endif
    return {};
  }

  StatusOr<std::shared_ptr<Store>> reopen(const std::string& dir, const std::string& run) const {
    if (kind_ == "sqlite") return sqlite::open({.path = dir + "/idem.db"});
    if (kind_ == "rocksdb") return rocksdb::open({.path = dir + "/rocks", .user_column_families = {"effects"}});
    const std::vector<std::string> a = args(run);
    return open_store(a.size() == 2 ? a[0] + "?schema=" + a[1] : a.at(0));
  }

  Outcome effects(const std::string& dir) const {
    if (kind_ == "sqlite") return sqlite_effects(dir + "/idem.db");
    if (kind_ == "rocksdb") return rocksdb_effects(dir + "/rocks");
#ifdef IDEM_TORTURE_WITH_POSTGRES
    if (kind_ == "postgres") return postgres_effects(postgres_->uri(), "effects_run");
#endif
    return log_effects(dir + "/effects.log");
  }

 private:
  const std::string kind_;
  std::unique_ptr<redis_test::RedisServer> redis_;
#ifdef IDEM_TORTURE_WITH_POSTGRES
  std::unique_ptr<postgres_test::PostgresServer> postgres_;
#endif
};

TEST_P(CrashTorture, EveryEffectOnceInOrderAfterManyKills) {
  const Target t = GetParam();
  const std::string kind = t.kind;
  Server server(kind);
  const Status started = server.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  idem::testing::TempDir run("torture-" + kind), ref("torture-ref-" + kind);
  const std::vector<test::EntityMsg> work = make_workload(kSeed);
  ASSERT_GE(work.size(), 20'000u);
  std::vector<std::string> run_args{kind, run.str()}, ref_args{kind, ref.str()};
  for (const std::string& a : server.args("run")) run_args.push_back(a);
  for (const std::string& a : server.args("ref")) ref_args.push_back(a);

  ASSERT_EQ(run_to_end(ref_args, ref.sub("log")), 0) << "the run without crashes failed; log: " << ref.sub("log");
  const int kills = kill_repeatedly(run_args, run.sub("log"), kills_wanted(), work.size());
  EXPECT_EQ(kills, kills_wanted()) << "the workload ran out before the kills did";
  ASSERT_EQ(run_to_end(run_args, run.sub("log")), 0) << "the last run failed; log: " << run.sub("log");

  const Outcome o = server.effects(run.str());
  Checker check(work, t.exactly_once, kills);
  check.effects(o);
  {
    auto s = server.reopen(run.str(), "run");
    auto r = server.reopen(ref.str(), "ref");
    ASSERT_TRUE(s.ok() && r.ok()) << s.status().to_string() << " " << r.status().to_string();
    check.store(**s, **r);
  }
  StatsFile stats(run.sub("stats"));
  const Stats& st = stats.get();
  std::ostringstream line;
  line << "crash torture " << kind << ": kills " << kills << ", redeliveries " << st.redeliveries
       << ", duplicates caught " << st.duplicates << ", effects " << o.effects << " ("
       << (t.exactly_once ? "exactly once" : "at least once") << "), mismatches " << check.mismatches();
  std::cout << line.str() << std::endl;
  RecordProperty("summary", line.str());
  EXPECT_LE(st.starts, static_cast<std::uint64_t>(kills) + 2);  // + the last run; a kill may precede the count
  EXPECT_GE(st.starts, static_cast<std::uint64_t>(kills) / 2);
  EXPECT_GT(st.redeliveries, 0u);
  EXPECT_EQ(check.mismatches(), 0);
}

// PostgreSQL when it is built.
const Target kTargets[] = {{"sqlite", true},
                           {"rocksdb", true},
                           {"redis", false},
#ifdef IDEM_TORTURE_WITH_POSTGRES
                           {"postgres", true}
#endif
};

INSTANTIATE_TEST_SUITE_P(Stores, CrashTorture, ::testing::ValuesIn(kTargets),
                         [](const ::testing::TestParamInfo<Target>& i) { return std::string(i.param.kind); });

}  // namespace
}  // namespace idem::torture

// Two processes on one store: a consumer stopped (SIGSTOP) inside its handler past its
// lease, then resumed (SIGCONT), on the stores whose leases another process can take
// over (Redis; SQLite with leases=shared); and SQLite locked by another process
// (SQLITE_BUSY).
//   - Redis, and SQLite outside a transaction: a second consumer takes the expired
//     lease over and processes the message; the resumed one's late commit loses
//     cleanly (lease_lost). Its handler's effect did happen (these effects are
//     outside the store), which is why lease_lost is reported.
//   - SQLite in transactional mode: the stopped handler holds the write transaction,
//     so the second consumer cannot claim (store_unavailable) until it resumes; its
//     commit then decides, and the effect (a row written in that transaction) exists
//     exactly once.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "idem/idem.hpp"
#include "idem/redis_store.hpp"
#include "idem/sqlite_store.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"

namespace idem::faults {
namespace {

using namespace std::chrono_literals;

struct Msg {
  std::string id;
};

constexpr Duration kLease{400};

Extractors<Msg> extractors() {
  Extractors<Msg> ex;
  ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  return ex;
}

// The handler's effect: a line in `log` (outside the store), or with a transaction a
// row of `effects` written in it.
Consumer<Msg>::Handler effect_handler(std::string log, int entered_fd = -1) {
  return [log, entered_fd](const Msg& m, HandlerContext& ctx) {
    if (entered_fd >= 0) {
      (void)!::write(entered_fd, "x", 1);
      std::this_thread::sleep_for(300ms);  // the SIGSTOP lands here
    }
    if (sqlite3* db = sqlite::connection(ctx)) {
      const std::string sql = "INSERT INTO effects VALUES('" + m.id + "')";
      if (sqlite3_exec(db, sql.c_str(), 0, 0, 0) != SQLITE_OK) return HandlerResult::fail("insert");
    } else {
      std::ofstream(log, std::ios::app) << m.id << '\n';
    }
    return HandlerResult::ok();
  };
}

int lines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

int effect_rows(const std::string& db) {
  sqlite3* h = nullptr;
  sqlite3_open(db.c_str(), &h);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(h, "SELECT count(*) FROM effects", -1, &st, nullptr);
  const int n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(h);
  return n;
}

ConsumerOptions options(std::shared_ptr<Store> store, bool transactional) {
  ConsumerOptions o;
  o.store = std::move(store);
  o.lease = kLease;
  o.transactional = transactional;
  o.store_retry_delay = 5ms;
  return o;
}

// Forks a consumer process that processes m1 on the store `open_store()` gives and
// exits with the decision's reason; returns once its handler runs (*pid set).
template <class Open>
void start_slow_consumer(Open open_store, bool transactional, const std::string& log, pid_t* pid) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  *pid = ::fork();
  ASSERT_GE(*pid, 0);
  if (*pid == 0) {
    ::close(fds[0]);
    auto store = open_store();
    if (!store.ok()) ::_exit(100);
    auto c = Consumer<Msg>::create(options(*store, transactional), extractors(), effect_handler(log, fds[1]));
    if (!c.ok()) ::_exit(101);
    ::_exit(static_cast<int>(c->process({"m1"}).reason));
  }
  ::close(fds[1]);
  char x;
  ASSERT_EQ(::read(fds[0], &x, 1), 1) << "the first consumer's handler never ran";
  ::close(fds[0]);
}

Reason resume_and_reap(pid_t pid) {
  ::kill(pid, SIGCONT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  return static_cast<Reason>(WEXITSTATUS(status));
}

// Stops the first consumer in its handler, lets its lease expire, lets a second
// consumer process m1, resumes the first: it must lose with lease_lost.
template <class Open>
void stopped_past_lease_loses(Open open_store, const std::string& log) {
  pid_t pid = -1;
  ASSERT_NO_FATAL_FAILURE(start_slow_consumer(open_store, false, log, &pid));
  ::kill(pid, SIGSTOP);
  std::this_thread::sleep_for(kLease + 200ms);
  auto store = open_store();
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  auto second = Consumer<Msg>::create(options(*store, false), extractors(), effect_handler(log));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->process({"m1"}).reason, Reason::kProcessed) << "the expired lease was not taken over";
  EXPECT_EQ(resume_and_reap(pid), Reason::kLeaseLost) << "the late commit did not lose";
  EXPECT_EQ(second->process({"m1"}).reason, Reason::kDuplicate);
  EXPECT_EQ(lines(log), 2) << "both handlers ran: the effect outside the store happened twice";
}

TEST(LeaseTakeover, RedisConsumerStoppedPastItsLeaseLosesWhenResumed) {
  auto server = redis_test::RedisServer::start({});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  testing::TempDir dir("stop-redis");
  const std::uint16_t port = (*server)->port();
  stopped_past_lease_loses([port] { return redis::open({.endpoints = {{"127.0.0.1", port}}}); }, dir.sub("log"));
}

TEST(LeaseTakeover, SqliteSharedConsumerStoppedPastItsLeaseLosesWhenResumed) {
  testing::TempDir dir("stop-sqlite");
  const std::string db = dir.sub("idem.db");
  stopped_past_lease_loses([db] { return sqlite::open({.path = db, .leases = sqlite::LeaseMode::kShared}); },
                           dir.sub("log"));
}

TEST(LeaseTakeover, SqliteTransactionalConsumerStoppedHoldsTheLockAndTheEffectHappensOnce) {
  testing::TempDir dir("stop-sqlite-tx");
  const std::string db = dir.sub("idem.db");
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "CREATE TABLE effects(id TEXT)", 0, 0, 0), SQLITE_OK);
    sqlite3_close(h);
  }
  auto open_shared = [db] {
    return sqlite::open({.path = db, .leases = sqlite::LeaseMode::kShared, .busy_timeout = Duration(100)});
  };
  auto store = open_shared();  // before the lock is taken: opening needs it too
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  pid_t pid = -1;
  ASSERT_NO_FATAL_FAILURE(start_slow_consumer(open_shared, true, dir.sub("log"), &pid));
  ::kill(pid, SIGSTOP);
  std::this_thread::sleep_for(kLease + 200ms);
  auto second = Consumer<Msg>::create(options(*store, true), extractors(), effect_handler(dir.sub("log")));
  ASSERT_TRUE(second.ok());
  for (int i = 0; i < 3; ++i) {
    const Decision d = second->process({"m1"});
    EXPECT_EQ(d.action, Action::kRetry);
    EXPECT_EQ(d.reason, Reason::kStoreUnavailable) << d.detail;
  }
  const Reason first = resume_and_reap(pid);
  EXPECT_TRUE(first == Reason::kProcessed || first == Reason::kLeaseLost) << reason_name(first);
  const Decision d = second->process({"m1"});
  EXPECT_EQ(d.reason, first == Reason::kProcessed ? Reason::kDuplicate : Reason::kProcessed);
  EXPECT_EQ(effect_rows(db), 1) << "the effect happened twice (or never)";
  std::printf("sigstop, sqlite transactional: the resumed consumer decided %s; 1 effect\n",
              std::string(reason_name(first)).c_str());
}

// Another process holds SQLite's write lock for 1 s: store_unavailable meanwhile
// (busy_timeout 100 ms), processed once it lets go, each effect exactly once.
TEST(SqliteBusy, AnotherProcessHoldingTheWriteLockGivesStoreUnavailableUntilItLetsGo) {
  testing::TempDir dir("busy");
  const std::string db = dir.sub("idem.db");
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "PRAGMA journal_mode=WAL; CREATE TABLE effects(id TEXT)", 0, 0, 0), SQLITE_OK);
    sqlite3_close(h);
  }
  auto store = sqlite::open({.path = db, .leases = sqlite::LeaseMode::kShared, .busy_timeout = Duration(100)});
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  auto c = Consumer<Msg>::create(options(*store, true), extractors(), effect_handler(dir.sub("log")));
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->process({"a"}).reason, Reason::kProcessed);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    sqlite3* h = nullptr;
    if (sqlite3_open(db.c_str(), &h) != SQLITE_OK || sqlite3_exec(h, "BEGIN IMMEDIATE", 0, 0, 0) != SQLITE_OK)
      ::_exit(1);
    (void)!::write(fds[1], "x", 1);
    std::this_thread::sleep_for(1s);
    ::_exit(sqlite3_exec(h, "COMMIT", 0, 0, 0) == SQLITE_OK ? 0 : 2);
  }
  char x;
  ASSERT_EQ(::read(fds[0], &x, 1), 1);
  int unavailable = 0;
  for (int i = 0; i < 3; ++i) {
    const Decision d = c->process({"b"});
    EXPECT_EQ(d.action, Action::kRetry);
    unavailable += d.reason == Reason::kStoreUnavailable ? 1 : 0;
  }
  EXPECT_EQ(unavailable, 3);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(c->process({"b"}).reason, Reason::kProcessed);
  EXPECT_EQ(c->process({"a"}).reason, Reason::kDuplicate);
  EXPECT_EQ(effect_rows(db), 2);
}

}  // namespace
}  // namespace idem::faults

// Opening the SQLite store: every bad input gets the documented error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "idem/backend/store_uri.hpp"
#include "sqlite_test_util.hpp"

namespace idem::sqlite::testing {
namespace {

using ::testing::HasSubstr;

std::string code_and_message(const StatusOr<std::shared_ptr<Store>>& s) {
  if (s.ok()) return "OK";
  return std::string(status_code_name(s.status().code())) + ": " + s.status().message();
}

// Drops root's power to ignore file permissions, so that read-only means read-only.
void become_unprivileged() {
  if (::geteuid() != 0) return;
  if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(100);
}

// Opens `path` in a child process without root privileges; returns "CODE: message".
std::string open_unprivileged(const std::string& path) {
  auto r = run_child([&](int fd) {
    become_unprivileged();
    write_all(fd, code_and_message(open(options_for(path))));
    return 0;
  });
  EXPECT_EQ(r.exit_code, 0);
  return r.output;
}

TEST(SqliteOpen, CreatesAFileWithTheSchemaVersion) {
  TempDir dir;
  const auto path = dir.file("idem.db");
  { ASSERT_NE(open_ok(options_for(path)), nullptr); }
  EXPECT_EQ(raw_query(path, "SELECT value FROM idem_meta WHERE key = 'schema_version'"),
            std::to_string(kSchemaVersion));
  EXPECT_EQ(raw_query(path, "PRAGMA journal_mode"), "wal");
}

TEST(SqliteOpen, NotADatabaseIsDataLoss) {
  TempDir dir;
  const auto path = dir.file("garbage.db");
  {
    std::ofstream f(path, std::ios::binary);
    for (int i = 0; i < 512; ++i) f << "this is not an sqlite file ";
  }
  auto s = open(options_for(path));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kDataLoss) << s.status().to_string();
  EXPECT_THAT(s.status().message(), HasSubstr(path));
}

TEST(SqliteOpen, NewerSchemaVersionIsFailedPreconditionNamingBothVersions) {
  TempDir dir;
  const auto path = dir.file("idem.db");
  { ASSERT_NE(open_ok(options_for(path)), nullptr); }
  ASSERT_EQ(raw_exec(path, "UPDATE idem_meta SET value = 7 WHERE key = 'schema_version'"), SQLITE_OK);
  auto s = open(options_for(path));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition) << s.status().to_string();
  EXPECT_THAT(s.status().message(), HasSubstr("version 7"));
  EXPECT_THAT(s.status().message(), HasSubstr("version " + std::to_string(kSchemaVersion)));
}

TEST(SqliteOpen, ForeignIdemMetaIsDataLoss) {
  TempDir dir;
  const auto path = dir.file("other.db");
  ASSERT_EQ(raw_exec(path, "CREATE TABLE idem_meta(name TEXT, version INTEGER, extra BLOB)"), SQLITE_OK);
  auto s = open(options_for(path));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kDataLoss) << s.status().to_string();
  EXPECT_THAT(s.status().message(), HasSubstr("idem_meta"));
}

TEST(SqliteOpen, ForeignIdemRecordsIsDataLoss) {
  TempDir dir;
  const auto path = dir.file("idem.db");
  { ASSERT_NE(open_ok(options_for(path)), nullptr); }
  ASSERT_EQ(raw_exec(path, "DROP TABLE idem_records; CREATE TABLE idem_records(k TEXT PRIMARY KEY, v BLOB)"),
            SQLITE_OK);
  auto s = open(options_for(path));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kDataLoss) << s.status().to_string();
  EXPECT_THAT(s.status().message(), HasSubstr("idem_records"));
}

TEST(SqliteOpen, MetaWithoutVersionIsDataLoss) {
  TempDir dir;
  const auto path = dir.file("idem.db");
  { ASSERT_NE(open_ok(options_for(path)), nullptr); }
  ASSERT_EQ(raw_exec(path, "DELETE FROM idem_meta"), SQLITE_OK);
  auto s = open(options_for(path));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kDataLoss) << s.status().to_string();
}

TEST(SqliteOpen, UsersOwnTablesAreKeptAndTolerated) {
  TempDir dir;
  const auto path = dir.file("app.db");
  ASSERT_EQ(raw_exec(path, "CREATE TABLE orders(id TEXT PRIMARY KEY, qty INTEGER); INSERT INTO orders VALUES('a', 3)"),
            SQLITE_OK);
  {
    auto store = open_ok(options_for(path));
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->claim(claim_req("m1", "w", t0())).ok());
    ASSERT_TRUE(store->commit(commit_req("m1", "w", t0())).ok());
  }
  EXPECT_EQ(raw_query(path, "SELECT qty FROM orders WHERE id = 'a'"), "3");
  auto again = open_ok(options_for(path));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->claim(claim_req("m1", "w", t0()))->status, ClaimStatus::kCompleted);
}

TEST(SqliteOpen, ReadOnlyFileIsUnavailableSayingReadOnly) {
  TempDir dir;
  const auto path = dir.file("idem.db");
  { ASSERT_NE(open_ok(options_for(path)), nullptr); }
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  const std::string out = open_unprivileged(path);
  EXPECT_THAT(out, ::testing::StartsWith("UNAVAILABLE")) << out;
  EXPECT_THAT(out, HasSubstr("read-only")) << out;
}

TEST(SqliteOpen, ReadOnlyDirectoryForANewFileIsUnavailableSayingReadOnly) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  const std::string out = open_unprivileged(dir.file("new.db"));
  EXPECT_THAT(out, ::testing::StartsWith("UNAVAILABLE")) << out;
  EXPECT_THAT(out, HasSubstr("read-only")) << out;
}

TEST(SqliteOpen, ReadOnlyDirectoryForAnExistingFileIsUnavailableSayingReadOnly) {
  TempDir dir;
  const auto path = dir.file("idem.db");
  { ASSERT_NE(open_ok(options_for(path)), nullptr); }
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  const std::string out = open_unprivileged(path);
  EXPECT_THAT(out, ::testing::StartsWith("UNAVAILABLE")) << out;
  EXPECT_THAT(out, HasSubstr("read-only")) << out;
}

// A child process that opens `path` with `leases`, says "ready" and keeps the store
// open until the parent closes `release_fd`'s other end.
class Holder {
 public:
  Holder(const std::string& path, LeaseMode leases) {
    int ready[2], release[2];
    if (::pipe(ready) != 0 || ::pipe(release) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(release[1]);
      auto s = open(options_for(path, leases));
      if (!s.ok()) ::_exit(1);
      // Take the write lock the way a busy consumer would.
      (void)(*s)->claim(claim_req("held", "child", t0()));
      (void)(*s)->commit(commit_req("held", "child", t0()));
      write_all(ready[1], "ready");
      char c;
      (void)::read(release[0], &c, 1);
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(release[0]);
    release_ = release[1];
    char buf[8] = {};
    ready_ = ::read(ready[0], buf, 5) == 5 && std::string(buf) == "ready";
    ::close(ready[0]);
  }
  ~Holder() { stop(); }
  bool ready() const { return ready_; }
  int stop() {
    if (pid_ <= 0) return -1;
    ::close(release_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int release_ = -1;
  bool ready_ = false;
};

TEST(SqliteOpen, LockedByAnotherProcessIsUnavailableAfterBusyTimeout) {
  TempDir dir;
  const auto path = dir.file("idem.db");
  Holder holder(path, LeaseMode::kLocal);
  ASSERT_TRUE(holder.ready());
  Options o = options_for(path);
  o.busy_timeout = Duration(300);
  const auto start = std::chrono::steady_clock::now();
  auto s = open(o);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().to_string();
  EXPECT_THAT(s.status().message(), HasSubstr("locked by another process"));
  EXPECT_THAT(s.status().message(), HasSubstr("leases=shared"));
  EXPECT_GE(waited, std::chrono::milliseconds(250));
  // A shared-lease opener is refused the same way.
  Options shared = o;
  shared.leases = LeaseMode::kShared;
  auto s2 = open(shared);
  ASSERT_FALSE(s2.ok());
  EXPECT_EQ(s2.status().code(), StatusCode::kUnavailable) << s2.status().to_string();
  EXPECT_EQ(holder.stop(), 0);
  // Once the holder is gone, the file opens and holds what the holder committed.
  auto after = open_ok(options_for(path));
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->claim(claim_req("held", "me", t0()))->status, ClaimStatus::kCompleted);
}

TEST(SqliteOpen, LocalStoreRefusedWhileSharedProcessesUseTheFile) {
  TempDir dir;
  const auto path = dir.file("idem.db");
  Holder holder(path, LeaseMode::kShared);
  ASSERT_TRUE(holder.ready());
  // Another shared user is fine ...
  auto shared = open(options_for(path, LeaseMode::kShared));
  ASSERT_TRUE(shared.ok()) << shared.status().to_string();
  EXPECT_EQ((*shared)->claim(claim_req("held", "me", t0()))->status, ClaimStatus::kCompleted);
  // ... an exclusive (local-lease) user is not.
  Options local = options_for(path);
  local.busy_timeout = Duration(200);
  auto s = open(local);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().to_string();
  EXPECT_THAT(s.status().message(), HasSubstr("locked"));
}

TEST(SqliteOpen, SecondConnectionInExclusiveModeIsUnavailable) {
  TempDir dir;
  const auto path = dir.file("idem.db");
  auto first = open_ok(options_for(path));
  ASSERT_NE(first, nullptr);
  Options o = options_for(path);
  o.busy_timeout = Duration(100);
  auto second = open(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().to_string();
  EXPECT_THAT(second.status().message(), HasSubstr("locked"));
  first.reset();
  auto third = open(o);
  EXPECT_TRUE(third.ok()) << third.status().to_string();
}

TEST(SqliteOpen, BadOptionsAreInvalidArgument) {
  TempDir dir;
  Options empty;
  EXPECT_EQ(open(empty).status().code(), StatusCode::kInvalidArgument);
  Options memory = options_for(":memory:");
  EXPECT_EQ(open(memory).status().code(), StatusCode::kInvalidArgument);
  Options cache = options_for(dir.file("a.db"));
  cache.cache_mib = 0;
  EXPECT_EQ(open(cache).status().code(), StatusCode::kInvalidArgument);
  Options busy = options_for(dir.file("a.db"));
  busy.busy_timeout = Duration(-1);
  EXPECT_EQ(open(busy).status().code(), StatusCode::kInvalidArgument);
  Options checkpoint = options_for(dir.file("a.db"));
  checkpoint.wal_autocheckpoint_pages = 0;
  EXPECT_EQ(open(checkpoint).status().code(), StatusCode::kInvalidArgument);
  checkpoint.wal_autocheckpoint_pages = std::int64_t{1} << 31;
  EXPECT_EQ(open(checkpoint).status().code(), StatusCode::kInvalidArgument);
  checkpoint.wal_autocheckpoint_pages = 1;
  EXPECT_TRUE(open(checkpoint).ok());
}

StatusOr<std::shared_ptr<Store>> open_uri(const std::string& text) {
  auto u = StoreUri::parse(text);
  if (!u.ok()) return u.status();
  return open(*u);
}

TEST(SqliteUri, UnknownParameterIsInvalidArgumentNamingIt) {
  TempDir dir;
  auto s = open_uri("sqlite:" + dir.file("a.db") + "?leases=local&colour=blue");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("colour"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("a.db")));
}

TEST(SqliteUri, BadValuesAreInvalidArgument) {
  TempDir dir;
  const std::string base = "sqlite:" + dir.file("a.db");
  for (const char* q : {"?leases=both", "?synchronous=off", "?busy_timeout_ms=soon", "?cache_mib=0", "?cache_mib=-4"}) {
    auto s = open_uri(base + q);
    ASSERT_FALSE(s.ok()) << q;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << q << ": " << s.status().to_string();
  }
  auto no_path = open_uri("sqlite:");
  ASSERT_FALSE(no_path.ok());
  EXPECT_EQ(no_path.status().code(), StatusCode::kInvalidArgument);
}

TEST(SqliteUri, ParametersReachTheStore) {
  TempDir dir;
  const auto path = dir.file("a.db");
  auto s = open_uri("sqlite:" + path + "?leases=shared&busy_timeout_ms=250&synchronous=full&cache_mib=8");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_TRUE((*s)->capabilities().shared);
  EXPECT_TRUE((*s)->capabilities().durable);
  EXPECT_TRUE((*s)->capabilities().transactional);
  // Shared leases leave the file open to a second process's connection.
  EXPECT_EQ(raw_query(path, "SELECT value FROM idem_meta WHERE key = 'schema_version'"),
            std::to_string(kSchemaVersion));
  auto local = open_uri("sqlite:" + dir.file("b.db"));
  ASSERT_TRUE(local.ok()) << local.status().to_string();
  EXPECT_FALSE((*local)->capabilities().shared);
}

}  // namespace
}  // namespace idem::sqlite::testing

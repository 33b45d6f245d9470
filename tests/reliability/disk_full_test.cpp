// The disk full (ENOSPC) under SQLite and RocksDB: each store lives on a small tmpfs
// mounted in this test process's own mount namespace (it needs CAP_SYS_ADMIN, as root
// in CI), a file then takes the rest of the space, and the consumer keeps going with
// results large enough to need new pages. Checked: once the writes fail the decisions
// are retry / store_unavailable and no handler effect lands; when the file is removed
// the same consumer recovers (RocksDB: a reopen, see below); every message ends
// processed once, with exactly one effect (written in the dedup commit), and the
// database passes its integrity check.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "idem/idem.hpp"
#include "idem/rocksdb_store.hpp"
#include "idem/sqlite_store.hpp"
#include "rocksdb/test_dir.hpp"
#include "support/temp_dir.hpp"

namespace idem::faults {
namespace {

using namespace std::chrono_literals;

struct Msg {
  std::string id;
};

// A tmpfs of `mib` MiB mounted at `dir`, visible to this process only; unmounted
// when destroyed, so that the directory can go.
class SmallFilesystem {
 public:
  SmallFilesystem(const std::string& dir, int mib) : dir_(dir) {
    if (::unshare(CLONE_NEWNS) != 0) {
      error_ = std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
    } else if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      error_ = std::string("mount --make-rprivate /: ") + std::strerror(errno);
    } else if (const std::string size = "size=" + std::to_string(mib) + "m";
               ::mount("tmpfs", dir.c_str(), "tmpfs", 0, size.c_str()) != 0) {
      error_ = std::string("mount tmpfs: ") + std::strerror(errno);
    }
  }
  ~SmallFilesystem() {
    if (error_.empty()) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallFilesystem(const SmallFilesystem&) = delete;
  SmallFilesystem& operator=(const SmallFilesystem&) = delete;

  // Empty when mounted.
  const std::string& error() const { return error_; }

 private:
  const std::string dir_;
  std::string error_;
};

// Writes a file at `path` until the filesystem is full; returns the bytes written.
std::size_t fill(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char> block(64 * 1024, 'f');
  std::size_t total = 0;
  for (ssize_t n; (n = ::write(fd, block.data(), block.size())) > 0;) total += static_cast<std::size_t>(n);
  EXPECT_EQ(errno, ENOSPC);
  ::close(fd);
  return total;
}

Extractors<Msg> extractors() {
  Extractors<Msg> ex;
  ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  return ex;
}

ConsumerOptions options(std::shared_ptr<Store> store) {
  ConsumerOptions o;
  o.store = std::move(store);
  o.transactional = true;
  o.store_retry_delay = 5ms;
  o.purge_every = 0;
  return o;
}

const std::string kBig(16 * 1024, 'r');  // a result that needs new pages for every commit

// Processes ids m<from>… until one is not processed; returns the first that was not
// (and its decision in *d), or `to` if all were.
int process_until_refused(Consumer<Msg>& c, int from, int to, Decision* d) {
  for (int i = from; i < to; ++i) {
    *d = c.process({"m" + std::to_string(i)});
    if (d->reason != Reason::kProcessed) return i;
  }
  return to;
}

TEST(DiskFull, SqliteRefusesWithStoreUnavailableAndRecoversWhenSpaceReturns) {
  testing::TempDir dir("enospc-sqlite");
  SmallFilesystem fs(dir.str(), 4);
  ASSERT_EQ(fs.error(), "") << "a small filesystem is needed (run as root)";
  const std::string db = dir.sub("idem.db");
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "CREATE TABLE effects(id TEXT)", 0, 0, 0), SQLITE_OK);
    sqlite3_close(h);
  }
  auto store = sqlite::open({.path = db});
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  auto c = Consumer<Msg>::create(options(*store), extractors(), [](const Msg& m, HandlerContext& ctx) {
    const std::string sql = "INSERT INTO effects VALUES('" + m.id + "')";
    if (sqlite3_exec(sqlite::connection(ctx), sql.c_str(), 0, 0, 0) != SQLITE_OK) return HandlerResult::fail("insert");
    return HandlerResult::ok(kBig);
  });
  ASSERT_TRUE(c.ok());
  Decision d;
  ASSERT_EQ(process_until_refused(*c, 0, 20, &d), 20) << reason_name(d.reason) << " " << d.detail;

  ASSERT_GT(fill(dir.sub("filler")), 0u);
  const int refused = process_until_refused(*c, 20, 2000, &d);
  ASSERT_LT(refused, 2000) << "the full disk was never noticed";
  EXPECT_EQ(d.action, Action::kRetry);
  EXPECT_EQ(d.reason, Reason::kStoreUnavailable) << d.detail;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(c->process({"m" + std::to_string(refused)}).reason, Reason::kStoreUnavailable);

  ASSERT_EQ(::unlink(dir.sub("filler").c_str()), 0);
  ASSERT_EQ(process_until_refused(*c, refused, refused + 50, &d), refused + 50)
      << "no recovery: " << reason_name(d.reason) << " " << d.detail;
  for (int i = 0; i < refused + 50; ++i)
    EXPECT_EQ(c->process({"m" + std::to_string(i)}).reason, Reason::kDuplicate) << i;
  c = Status(StatusCode::kInternal, "closed");
  store = Status(StatusCode::kInternal, "closed");

  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "ok");
  sqlite3_finalize(st);
  sqlite3_prepare_v2(h, "SELECT count(*), count(DISTINCT id) FROM effects", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  const int rows = sqlite3_column_int(st, 0), distinct = sqlite3_column_int(st, 1);
  EXPECT_EQ(rows, refused + 50) << "effects lost or doubled";
  EXPECT_EQ(distinct, refused + 50);
  sqlite3_finalize(st);
  sqlite3_close(h);
  std::printf("disk full, sqlite: %d commits before ENOSPC, then store_unavailable; recovered; %d effect rows, "
              "%d distinct, of %d messages\n",
              refused, rows, distinct, refused + 50);
}

TEST(DiskFull, RocksdbRefusesWithStoreUnavailableAndRecoversWhenSpaceReturns) {
  testing::TempDir dir("enospc-rocksdb");
  SmallFilesystem fs(dir.str(), 24);
  ASSERT_EQ(fs.error(), "") << "a small filesystem is needed (run as root)";
  const std::string db = dir.sub("db");
  rocksdb::Options ro{.path = db, .write_buffer_mib = 1, .user_column_families = {"effects"}};
  auto store = rocksdb::open(ro);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  auto handler = [](const Msg& m, HandlerContext& ctx) {
    if (!rocksdb::batch(ctx)->put("effects", m.id, "e").ok()) return HandlerResult::fail("put");
    return HandlerResult::ok(kBig);
  };
  auto c = Consumer<Msg>::create(options(*store), extractors(), handler);
  ASSERT_TRUE(c.ok());
  Decision d;
  ASSERT_EQ(process_until_refused(*c, 0, 20, &d), 20) << reason_name(d.reason) << " " << d.detail;

  ASSERT_GT(fill(dir.sub("filler")), 0u);
  const int refused = process_until_refused(*c, 20, 5000, &d);
  ASSERT_LT(refused, 5000) << "the full disk was never noticed";
  EXPECT_EQ(d.action, Action::kRetry);
  EXPECT_EQ(d.reason, Reason::kStoreUnavailable) << d.detail;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(c->process({"m" + std::to_string(refused)}).reason, Reason::kStoreUnavailable);

  ASSERT_EQ(::unlink(dir.sub("filler").c_str()), 0);
  // RocksDB stops writing after a failed WAL or flush write until the database is
  // reopened or resumed; give it a moment to resume by itself, then reopen.
  std::this_thread::sleep_for(1s);
  Decision again = c->process({"m" + std::to_string(refused)});
  const bool resumed = again.reason == Reason::kProcessed;
  if (!resumed) {
    EXPECT_EQ(again.reason, Reason::kStoreUnavailable) << again.detail;
    c = Status(StatusCode::kInternal, "closed");
    store = Status(StatusCode::kInternal, "closed");
    store = rocksdb::open(ro);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    c = Consumer<Msg>::create(options(*store), extractors(), handler);
    ASSERT_TRUE(c.ok());
  }
  ASSERT_EQ(process_until_refused(*c, resumed ? refused + 1 : refused, refused + 50, &d), refused + 50)
      << "no recovery: " << reason_name(d.reason) << " " << d.detail;
  for (int i = 0; i < refused + 50; ++i)
    EXPECT_EQ(c->process({"m" + std::to_string(i)}).reason, Reason::kDuplicate) << i;
  c = Status(StatusCode::kInternal, "closed");
  store = Status(StatusCode::kInternal, "closed");
  const auto effects = testing::raw_read_all(db, "effects");
  EXPECT_EQ(effects.size(), static_cast<std::size_t>(refused + 50)) << "effects lost or invented";
  const auto done = testing::raw_read_all(db, "idem_done");
  EXPECT_EQ(done.size(), static_cast<std::size_t>(refused + 50));
  std::printf("disk full, rocksdb: %d commits before ENOSPC, then store_unavailable; recovered %s; %zu effects, "
              "%zu done records, of %d messages\n",
              refused, resumed ? "by itself" : "after a reopen", effects.size(), done.size(), refused + 50);
}

}  // namespace
}  // namespace idem::faults

// Bad input for the RocksDB store: each case gets a clear error naming the problem,
// no crash, and nothing on disk is lost or changed.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "idem/rocksdb_store.hpp"
#include "rocksdb/test_dir.hpp"

namespace idem {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using testing::raw_read_all;
using testing::TempDir;

const TimePoint kT0 = from_unix_ms(1'700'000'000'000);
constexpr Duration kTtl{3'600'000};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Status commit_one(Store& s, std::string_view id) {
  return s.commit({id, "A", std::nullopt, kT0, kTtl, std::string_view("r")});
}

TEST(RocksdbBadInput, PathThatIsAFileIsRejectedAndLeftAlone) {
  TempDir dir;
  const std::string file = dir.sub("not-a-dir");
  std::ofstream(file) << "precious";
  auto s = rocksdb::open({.path = file});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(s.status().message(), file)) << s.status().to_string();
  EXPECT_TRUE(contains(s.status().message(), "not a directory")) << s.status().to_string();
  std::ifstream in(file);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
}

TEST(RocksdbBadInput, DatabaseLockedByAnotherProcess) {
  TempDir dir;
  const std::string path = dir.sub("db");
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto s = rocksdb::open({.path = path});
    char c = s.ok() && commit_one(**s, "held").ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(go[0], &c, 1);  // hold the database until the parent says
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto locked = rocksdb::open({.path = path});
  ASSERT_FALSE(locked.ok());
  EXPECT_EQ(locked.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(contains(locked.status().message(), "locked")) << locked.status().to_string();
  EXPECT_TRUE(contains(locked.status().message(), path)) << locked.status().to_string();
  (void)!::write(go[1], "x", 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);

  auto reopened = rocksdb::open({.path = path});
  ASSERT_TRUE(reopened.ok()) << reopened.status().to_string();
  EXPECT_EQ((*reopened)->claim({"held", "B", milliseconds(1000), std::nullopt, kT0})->status, ClaimStatus::kCompleted);
  // A second handle in the same process is refused the same way.
  auto second = rocksdb::open({.path = path});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
}

// Runs `body` in a child process that cannot write where root could (drops to
// nobody when run as root). Returns the child's exit code.
template <class F>
int in_unprivileged_child(F body) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(90);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

TEST(RocksdbBadInput, ReadOnlyDirectory) {
  TempDir dir;
  const std::string parent = dir.sub("ro");
  const std::string existing = dir.sub("ro/existing");
  fs::create_directories(parent);
  {
    auto s = rocksdb::open({.path = existing});
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    ASSERT_TRUE(commit_one(**s, "kept").ok());
  }
  // World-readable, nobody may write: the parent and the existing database.
  fs::permissions(dir.str(), fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec |
                                 fs::perms::group_read | fs::perms::group_exec);
  ASSERT_EQ(::system(("chmod -R a-w,a+rX '" + parent + "'").c_str()), 0);
  const int code = in_unprivileged_child([&] {
    auto fresh = rocksdb::open({.path = parent + "/fresh"});
    if (fresh.ok() || fresh.status().code() != StatusCode::kUnavailable) return 1;
    if (!contains(fresh.status().message(), parent + "/fresh")) return 2;
    auto old = rocksdb::open({.path = existing});
    if (old.ok() || old.status().code() != StatusCode::kUnavailable) return 3;
    std::fprintf(stderr, "errors as expected:\n  %s\n  %s\n", fresh.status().to_string().c_str(),
                 old.status().to_string().c_str());
    return 0;
  });
  EXPECT_EQ(code, 0) << "1/2: new database in a read-only dir, 3: existing read-only database";
  ASSERT_EQ(::system(("chmod -R u+w '" + parent + "'").c_str()), 0);
  EXPECT_FALSE(fs::exists(parent + "/fresh"));
  auto s = rocksdb::open({.path = existing});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ((*s)->claim({"kept", "B", milliseconds(1000), std::nullopt, kT0})->status, ClaimStatus::kCompleted);
}

TEST(RocksdbBadInput, DatabaseOfAnotherLayoutIsLeftUntouched) {
  TempDir dir;
  const std::string path = dir.sub("foreign");
  {
    ::rocksdb::Options o;
    o.create_if_missing = true;
    ::rocksdb::DB* db = nullptr;
    ASSERT_TRUE(::rocksdb::DB::Open(o, path, &db).ok());
    ASSERT_TRUE(db->Put(::rocksdb::WriteOptions(), "user-key", "user-value").ok());
    delete db;
  }
  auto s = rocksdb::open({.path = path});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(s.status().message(), "another layout")) << s.status().to_string();
  std::vector<std::string> cfs;
  ASSERT_TRUE(::rocksdb::DB::ListColumnFamilies(::rocksdb::DBOptions(), path, &cfs).ok());
  EXPECT_EQ(cfs, std::vector<std::string>{"default"}) << "no column family was added";
  EXPECT_EQ(raw_read_all(path, "default").at("user-key"), "user-value");
}

// Rewrites the layout marker of an idem database.
void set_layout(const std::string& path, const std::string& value) {
  ASSERT_TRUE(testing::with_raw_db(path, [&](::rocksdb::DB& db, const auto& cfs) {
    auto it = cfs.find("idem_meta");
    ASSERT_NE(it, cfs.end());
    ASSERT_TRUE(db.Put(::rocksdb::WriteOptions(), it->second, "layout", value).ok());
  }));
}

TEST(RocksdbBadInput, NewerOrUnknownLayoutVersion) {
  TempDir dir;
  const std::string path = dir.sub("db");
  {
    auto s = rocksdb::open({.path = path});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(commit_one(**s, "kept").ok());
  }
  set_layout(path, "idem.rocksdb/99");
  auto newer = rocksdb::open({.path = path});
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(contains(newer.status().message(), "newer")) << newer.status().to_string();
  set_layout(path, "something else");
  auto unknown = rocksdb::open({.path = path});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kDataLoss);
  set_layout(path, "idem.rocksdb/1");
  auto s = rocksdb::open({.path = path});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ((*s)->claim({"kept", "B", milliseconds(1000), std::nullopt, kT0})->status, ClaimStatus::kCompleted);
}

TEST(RocksdbBadInput, CorruptRecordIsDataLossForThatIdOnly) {
  TempDir dir;
  const std::string path = dir.sub("db");
  {
    auto s = rocksdb::open({.path = path});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(commit_one(**s, "good").ok());
  }
  {
    std::vector<std::string> names;
    ASSERT_TRUE(::rocksdb::DB::ListColumnFamilies(::rocksdb::DBOptions(), path, &names).ok());
    std::vector<::rocksdb::ColumnFamilyDescriptor> descs;
    for (const auto& n : names) descs.emplace_back(n, ::rocksdb::ColumnFamilyOptions());
    std::vector<::rocksdb::ColumnFamilyHandle*> handles;
    ::rocksdb::DB* db = nullptr;
    ASSERT_TRUE(::rocksdb::DB::Open(::rocksdb::DBOptions(), path, descs, &handles, &db).ok());
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == "idem_done") {
        ASSERT_TRUE(db->Put(::rocksdb::WriteOptions(), handles[i], "bad", "junk").ok());
        // A well-formed header, live, with a flag bit the format never writes (found by
        // the store_records fuzz target): it read as a completed record.
        std::string flagged("\x01\x01", 2);
        const std::int64_t expires = to_unix_ms(kT0) + 3'600'000;
        for (int b = 0; b < 8; ++b) flagged += static_cast<char>((expires >> (8 * b)) & 0xff);
        flagged += '\x04';
        ASSERT_TRUE(db->Put(::rocksdb::WriteOptions(), handles[i], "bad_flags", flagged).ok());
      }
    for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
    delete db;
  }
  auto s = rocksdb::open({.path = path});
  ASSERT_TRUE(s.ok());
  auto bad = (*s)->claim({"bad", "A", milliseconds(1000), std::nullopt, kT0});
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  auto flagged = (*s)->claim({"bad_flags", "A", milliseconds(1000), std::nullopt, kT0});
  EXPECT_EQ(flagged.status().code(), StatusCode::kDataLoss) << "a corrupt record is no decision";
  auto batch = (*s)->claim_batch(std::vector<ClaimRequest>{{"bad", "A", milliseconds(1000), std::nullopt, kT0},
                                                           {"good", "A", milliseconds(1000), std::nullopt, kT0}});
  EXPECT_EQ(batch[0].status().code(), StatusCode::kDataLoss);
  ASSERT_TRUE(batch[1].ok());
  EXPECT_EQ(batch[1]->status, ClaimStatus::kCompleted);
}

TEST(RocksdbBadInput, OptionsThatCannotWork) {
  TempDir dir;
  EXPECT_EQ(rocksdb::open(rocksdb::Options{}).status().code(), StatusCode::kInvalidArgument);
  rocksdb::Options o{.path = dir.sub("db")};
  o.lease_stripes = 0;
  EXPECT_EQ(rocksdb::open(o).status().code(), StatusCode::kInvalidArgument);
  o.lease_stripes = 1;
  o.user_column_families = {"idem_mine"};
  auto reserved = rocksdb::open(o);
  EXPECT_EQ(reserved.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(reserved.status().message(), "reserved")) << reserved.status().to_string();
  o.user_column_families = {"a", "a"};
  EXPECT_EQ(rocksdb::open(o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir.sub("db"))) << "nothing is created for rejected options";
}

}  // namespace
}  // namespace idem

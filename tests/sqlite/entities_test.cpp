// SQLite-specific behaviour of entity records and the reorder buffer (the generic
// contract is in tests/conformance/entity_conformance.cpp): the version-1 → 2
// upgrade, layout checks of the new tables, the buffer totals row, versions past
// 2^63, atomicity across SIGKILL and inside a transaction of begin().
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "sqlite_test_util.hpp"
#include "support/entity_requests.hpp"

namespace idem::sqlite::testing {
namespace {

using idem::testing::bp;
using idem::testing::ew;
using ::testing::HasSubstr;
using namespace std::string_literals;
using namespace std::string_view_literals;

// The layout idem sqlite schema version 1 wrote, verbatim.
constexpr const char* kVersion1 =
    "CREATE TABLE idem_meta(key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;"
    "CREATE TABLE idem_records(id BLOB PRIMARY KEY NOT NULL, state INTEGER NOT NULL, owner BLOB,"
    " lease_until_ms INTEGER, fingerprint INTEGER, result BLOB, retries INTEGER NOT NULL DEFAULT 0,"
    " expires_ms INTEGER NOT NULL) WITHOUT ROWID;"
    "INSERT INTO idem_meta(key, value) VALUES('schema_version', 1);";

// A version-1 file holding one completed id "old" (result "r-old", expiring in 1 h
// from t0) and one pending retry count for "retry".
void make_version1_file(const std::string& path) {
  const std::string expires = std::to_string(to_unix_ms(t0()) + 3'600'000);
  ASSERT_EQ(raw_exec(path, std::string(kVersion1) +
                               "INSERT INTO idem_records VALUES(x'6f6c64', 2, NULL, NULL, NULL, x'722d6f6c64', 0, " +
                               expires +
                               ");"
                               "INSERT INTO idem_records VALUES(x'7265747279', 0, NULL, NULL, NULL, NULL, 2, " +
                               expires + ");"),
            SQLITE_OK);
}

std::string version_of(const std::string& path) {
  return raw_query(path, "SELECT value FROM idem_meta WHERE key = 'schema_version'");
}

std::vector<std::uint64_t> versions(Store& s, std::string_view key) {
  auto r = s.entities()->buffer_read(key, 100);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  std::vector<std::uint64_t> out;
  if (r.ok())
    for (const auto& e : *r) out.push_back(e.version);
  return out;
}

// --- schema ------------------------------------------------------------------------

TEST(SqliteEntitySchema, AVersion1FileIsUpgradedAndKeepsItsRecords) {
  TempDir dir;
  const auto path = dir.file("v1.db");
  make_version1_file(path);
  ASSERT_EQ(version_of(path), "1");
  {
    auto store = open_ok(options_for(path));
    ASSERT_NE(store, nullptr);
    EXPECT_NE(store->entities(), nullptr);
    auto old = store->claim(claim_req("old", "w", t0()));
    ASSERT_TRUE(old.ok()) << old.status().to_string();
    EXPECT_EQ(old->status, ClaimStatus::kCompleted);
    EXPECT_EQ(old->result, "r-old");
    auto retry = store->inspect("retry", t0());
    ASSERT_TRUE(retry.ok() && retry->has_value());
    EXPECT_EQ((*retry)->retries, 2u);
    // The new tables work at once.
    ASSERT_TRUE(store->entities()->write_entity(ew("k", 0, 1, "s"sv)).ok());
    ASSERT_TRUE(store->entities()->buffer_put(bp("k", 3, "m3", "three", t0())).ok());
  }
  EXPECT_EQ(version_of(path), std::to_string(kSchemaVersion));
  EXPECT_EQ(kSchemaVersion, 4);
  EXPECT_EQ(raw_query(path,
                      "SELECT count(*) FROM sqlite_master WHERE name IN "
                      "('idem_entities', 'idem_buffer', 'idem_buffer_totals')"),
            "3");
  EXPECT_EQ(raw_query(path, "SELECT count || '/' || bytes FROM idem_buffer_totals"), "1/" + std::to_string(1 + 2 + 5));
  // A second open finds version 2 and everything written through the first.
  auto again = open_ok(options_for(path, LeaseMode::kShared));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->entities()->read_entity("k")->revision, 1u);
  EXPECT_EQ(versions(*again, "k"), std::vector<std::uint64_t>{3});
  EXPECT_EQ(again->claim(claim_req("old", "w", t0()))->status, ClaimStatus::kCompleted);
}

TEST(SqliteEntitySchema, AVersion1FileWithATableOfVersion2IsDataLossAndLeftAlone) {
  TempDir dir;
  const auto path = dir.file("v1.db");
  make_version1_file(path);
  ASSERT_EQ(raw_exec(path, "CREATE TABLE idem_buffer(a, b)"), SQLITE_OK);
  auto s = open(options_for(path));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kDataLoss) << s.status().to_string();
  EXPECT_THAT(s.status().message(), HasSubstr("idem_buffer"));
  // The failed upgrade rolled back: still version 1, no table of version 2 created.
  EXPECT_EQ(version_of(path), "1");
  EXPECT_EQ(raw_query(path, "SELECT count(*) FROM sqlite_master WHERE name = 'idem_entities'"), "0");
}

TEST(SqliteEntitySchema, AVersion2FileMissingOrForeignTablesIsDataLossNamingTheTable) {
  struct Case {
    const char* sql;
    const char* named;
  };
  const Case cases[] = {
      {"DROP TABLE idem_entities", "idem_entities"},
      {"DROP TABLE idem_buffer; CREATE TABLE idem_buffer(k BLOB PRIMARY KEY, v BLOB)", "idem_buffer"},
      {"DROP TABLE idem_buffer_totals", "idem_buffer_totals"},
      {"DELETE FROM idem_buffer_totals", "idem_buffer_totals"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.sql);
    TempDir dir;
    const auto path = dir.file("idem.db");
    { ASSERT_NE(open_ok(options_for(path)), nullptr); }
    ASSERT_EQ(raw_exec(path, c.sql), SQLITE_OK);
    auto s = open(options_for(path));
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kDataLoss) << s.status().to_string();
    EXPECT_THAT(s.status().message(), HasSubstr(c.named));
  }
}

TEST(SqliteEntitySchema, ANewerVersionIsStillRefused) {
  TempDir dir;
  const auto path = dir.file("idem.db");
  { ASSERT_NE(open_ok(options_for(path)), nullptr); }
  ASSERT_EQ(raw_exec(path, "UPDATE idem_meta SET value = 5 WHERE key = 'schema_version'"), SQLITE_OK);
  auto s = open(options_for(path));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition) << s.status().to_string();
  EXPECT_THAT(s.status().message(), HasSubstr("version 5"));
}

// --- the buffer totals row ------------------------------------------------------------

class SqliteEntities : public ::testing::TestWithParam<LeaseMode> {
 protected:
  void SetUp() override { reopen(); }
  Options opts() {
    Options o = options_for(dir_.file("idem.db"), GetParam());
    o.fault_hook = [this](std::string_view point) -> Status {
      return point == fail_at_ ? unavailable("injected at " + fail_at_) : ok_status();
    };
    return o;
  }
  void reopen() {
    store_.reset();
    store_ = open_ok(opts());
    ASSERT_NE(store_, nullptr);
  }
  // Runs `sql` on the file with the store closed (leases=local locks it).
  std::string query_closed(const std::string& sql) {
    store_.reset();
    std::string out = raw_query(dir_.file("idem.db"), sql);
    reopen();
    return out;
  }
  // The totals row and the aggregate of the table, as "count/bytes" each.
  std::pair<std::string, std::string> totals_and_actual() {
    store_.reset();
    const auto path = dir_.file("idem.db");
    std::pair<std::string, std::string> out{
        raw_query(path, "SELECT count || '/' || bytes FROM idem_buffer_totals"),
        raw_query(path,
                  "SELECT count(*) || '/' || coalesce(sum(length(key) + length(id) + length(message)), 0)"
                  " FROM idem_buffer")};
    reopen();
    return out;
  }

  TempDir dir_;
  std::shared_ptr<Store> store_;
  std::string fail_at_;
};

TEST_P(SqliteEntities, TheTotalsRowFollowsEveryChangeOfTheBuffer) {
  const TimePoint t = t0();
  ASSERT_TRUE(store_->entities()->buffer_put(bp("k", 2, "m2", "two", t)).ok());
  ASSERT_TRUE(store_->entities()->buffer_put(bp("k", 3, "m3", std::string(300, 'x'), t)).ok());
  ASSERT_TRUE(store_->entities()->buffer_put(bp("j\0"s, 7, "j7", "", t)).ok());
  ASSERT_TRUE(store_->entities()->buffer_put(bp("k", 2, "m2", "two", t)).ok());  // a repeat adds nothing
  auto [totals, actual] = totals_and_actual();
  EXPECT_EQ(totals, actual);
  EXPECT_EQ(totals, "3/" + std::to_string((1 + 2 + 3) + (1 + 2 + 300) + (2 + 2 + 0)));

  ASSERT_TRUE(store_->entities()->buffer_remove("k", 3).ok());
  ASSERT_TRUE(store_->entities()->buffer_remove("k", 3).ok());
  ASSERT_TRUE(store_->claim(claim_req("m2", "w", t)).ok());
  CommitRequest c = commit_req("m2", "w", t);
  c.entity = ew("k", 0, 2, std::nullopt, 2);
  ASSERT_TRUE(store_->commit(c).ok());
  // A failed commit with unbuffer leaves the totals as they were.
  ASSERT_TRUE(store_->claim(claim_req("j7", "w", t)).ok());
  CommitRequest stale = commit_req("j7", "w", t);
  const std::string j = "j\0"s;
  stale.entity = ew(j, 5, 7, std::nullopt, 7);
  ASSERT_EQ(store_->commit(stale).code(), StatusCode::kAborted);
  std::tie(totals, actual) = totals_and_actual();
  EXPECT_EQ(totals, actual);
  EXPECT_EQ(totals, "1/4");
  auto sum = store_->entities()->buffer_summary(10);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, 1u);
  EXPECT_EQ(sum->bytes, 4u);
}

TEST_P(SqliteEntities, LimitsAreCheckedAgainstTheTotalsRow) {
  // The limit check reads the totals row, not the table: a row claiming a full buffer
  // refuses the put although the table is empty.
  store_.reset();
  ASSERT_EQ(raw_exec(dir_.file("idem.db"), "UPDATE idem_buffer_totals SET count = 10, bytes = 5"), SQLITE_OK);
  reopen();
  BufferLimits limits;
  limits.total = 10;
  Status s = store_->entities()->buffer_put(bp("k", 1, "m1", "x", t0(), limits));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("total=10"));
  limits.total = 11;
  EXPECT_TRUE(store_->entities()->buffer_put(bp("k", 1, "m1", "x", t0(), limits)).ok());
  EXPECT_EQ(query_closed("SELECT count || '/' || bytes FROM idem_buffer_totals"), "11/9");
}

TEST_P(SqliteEntities, PerKeyLimitCountsOnlyThatKeysRange) {
  BufferLimits limits;
  limits.per_key = 3;
  for (std::uint64_t v = 1; v <= 3; ++v)
    ASSERT_TRUE(store_->entities()->buffer_put(bp("a", v, "a" + std::to_string(v), "", t0(), limits)).ok());
  // Neighbouring keys in the primary key's order do not count.
  for (const std::string& key : {"a\0"s, "`"s, "b"s}) {
    for (std::uint64_t v = 1; v <= 3; ++v)
      ASSERT_TRUE(store_->entities()->buffer_put(bp(key, v, "x" + std::to_string(v), "", t0(), limits)).ok()) << key;
  }
  Status s = store_->entities()->buffer_put(bp("a", 4, "a4", "", t0(), limits));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("per_key=3"));
  limits.per_key = 0;
  EXPECT_EQ(store_->entities()->buffer_put(bp("new", 1, "n", "", t0(), limits)).code(), StatusCode::kResourceExhausted);
}

// --- versions past 2^63 ---------------------------------------------------------------

TEST_P(SqliteEntities, VersionsAbove2Pow63KeepTheirOrderAndValue) {
  constexpr std::uint64_t kTop = std::numeric_limits<std::uint64_t>::max();
  constexpr std::uint64_t kHalf = std::uint64_t{1} << 63;
  for (const std::uint64_t v : {kTop, kHalf, std::uint64_t{5}, kHalf - 1, kHalf + 1, std::uint64_t{1}})
    ASSERT_TRUE(store_->entities()->buffer_put(bp("k", v, "m" + std::to_string(v), "", t0())).ok()) << v;
  EXPECT_EQ(versions(*store_, "k"), (std::vector<std::uint64_t>{1, 5, kHalf - 1, kHalf, kHalf + 1, kTop}));
  auto first4 = store_->entities()->buffer_read("k", 4);
  ASSERT_TRUE(first4.ok());
  ASSERT_EQ(first4->size(), 4u);
  EXPECT_EQ(first4->back().version, kHalf);
  EXPECT_EQ(first4->back().id, "m" + std::to_string(kHalf));

  ASSERT_TRUE(store_->entities()->buffer_put(bp("high", kTop, "t", "", t0())).ok());
  ASSERT_TRUE(store_->entities()->buffer_put(bp("high", kHalf + 7, "h", "", t0())).ok());
  auto sum = store_->entities()->buffer_summary(10);
  ASSERT_TRUE(sum.ok());
  ASSERT_EQ(sum->keys.size(), 2u);
  for (const auto& k : sum->keys) EXPECT_EQ(k.lowest_version, k.key == "k" ? 1u : kHalf + 7) << k.key;

  ASSERT_TRUE(store_->entities()->write_entity(ew("e", 0, kTop)).ok());
  EXPECT_EQ(store_->entities()->read_entity("e")->version, kTop);
  ASSERT_TRUE(store_->entities()->buffer_remove("k", kTop).ok());
  EXPECT_EQ(versions(*store_, "k").back(), kHalf + 1);
}

// --- atomicity --------------------------------------------------------------------------

TEST_P(SqliteEntities, AbortedCommitInsideBeginRollsBackTheHandlersWritesToo) {
  const TimePoint t = t0();
  ASSERT_TRUE(store_->entities()->write_entity(ew("k", 0, 1)).ok());
  ASSERT_TRUE(store_->claim(claim_req("m", "w", t)).ok());
  {
    auto tx = store_->begin(t);
    ASSERT_TRUE(tx.ok()) << tx.status().to_string();
    // A store call from the transaction's thread joins it, as a handler's write would.
    ASSERT_TRUE(store_->entities()->buffer_put(bp("k", 9, "m9", "inside", t)).ok());
    CommitRequest c = commit_req("m", "w", t, "r"sv);
    c.entity = ew("k", 0, 2);
    EXPECT_EQ((*tx)->commit(c).code(), StatusCode::kAborted);
  }
  EXPECT_TRUE(versions(*store_, "k").empty()) << "the write made inside the transaction was rolled back";
  EXPECT_EQ(store_->entities()->read_entity("k")->revision, 1u);
  auto info = store_->inspect("m", t);
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->state, RecordState::kInProgress);
  // The same with the right revision lands, all of it.
  {
    auto tx = store_->begin(t);
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE(store_->entities()->buffer_put(bp("k", 9, "m9", "inside", t)).ok());
    CommitRequest c = commit_req("m", "w", t, "r"sv);
    c.entity = ew("k", 1, 2);
    ASSERT_TRUE((*tx)->commit(c).ok());
  }
  reopen();
  EXPECT_EQ(versions(*store_, "k"), std::vector<std::uint64_t>{9});
  EXPECT_EQ(store_->entities()->read_entity("k")->version, 2u);
  EXPECT_EQ(store_->claim(claim_req("m", "x", t))->status, ClaimStatus::kCompleted);
}

TEST_P(SqliteEntities, FaultAfterTheEntityWriteRollsBackRecordEntityAndUnbuffer) {
  const TimePoint t = t0();
  ASSERT_TRUE(store_->entities()->buffer_put(bp("k", 1, "m1", "one", t)).ok());
  ASSERT_TRUE(store_->claim(claim_req("m1", "w", t)).ok());
  CommitRequest c = commit_req("m1", "w", t, "r"sv);
  c.entity = ew("k", 0, 1, "s"sv, 1);
  fail_at_ = "commit.after_entity";
  EXPECT_EQ(store_->commit(c).code(), StatusCode::kUnavailable);
  fail_at_.clear();
  reopen();
  EXPECT_EQ(store_->entities()->read_entity("k")->revision, 0u);
  EXPECT_EQ(versions(*store_, "k"), std::vector<std::uint64_t>{1});
  // The lease is kept: in the file with leases=shared, else gone with the process.
  EXPECT_EQ(store_->claim(claim_req("m1", "w", t))->status,
            GetParam() == LeaseMode::kShared ? ClaimStatus::kInProgress : ClaimStatus::kNew);
  ASSERT_TRUE(store_->commit(c).ok());
  EXPECT_EQ(store_->entities()->read_entity("k")->revision, 1u);
  EXPECT_TRUE(versions(*store_, "k").empty());
}

INSTANTIATE_TEST_SUITE_P(Leases, SqliteEntities, ::testing::Values(LeaseMode::kLocal, LeaseMode::kShared),
                         lease_mode_name);

// --- SIGKILL ------------------------------------------------------------------------------

TEST(SqliteEntityCrash, EntityWritesAndDedupRecordsSurviveSigkillTogether) {
  TempDir dir;
  const auto path = dir.file("idem.db");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    auto s = open(options_for(path));
    if (!s.ok()) ::_exit(1);
    Store& store = **s;
    // Message i of entity "e" applies version i and unbuffers version i, which was
    // buffered before.
    for (std::uint64_t i = 1;; ++i) {
      const std::string id = "m-" + std::to_string(i);
      if (!store.entities()->buffer_put(bp("e", i, id, "payload", t0())).ok()) ::_exit(2);
      ClaimRequest q = claim_req(id, "child", t0());
      q.entity_key = "e";
      auto c = store.claim(q);
      if (!c.ok() || c->status != ClaimStatus::kNew || c->entity.version != i - 1) ::_exit(3);
      CommitRequest commit = commit_req(id, "child", t0());
      commit.entity = ew("e", c->entity.revision, i, std::nullopt, i);
      if (!store.commit(commit).ok()) ::_exit(4);
      write_all(fds[1], "+");  // reported only after the commit returned
    }
  }
  ::close(fds[1]);
  std::size_t reported = 0;
  char buf[256];
  while (reported < 300) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    ASSERT_GT(n, 0) << "the child stopped early";
    reported += static_cast<std::size_t>(n);
  }
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) reported += static_cast<std::size_t>(n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  EXPECT_EQ(raw_query(path, "PRAGMA integrity_check"), "ok");
  auto store = open_ok(options_for(path));
  ASSERT_NE(store, nullptr);
  const EntityRecord e = store->entities()->read_entity("e").value();
  ASSERT_GE(e.version, reported);
  ASSERT_LE(e.version, reported + 1) << "at most the commit in flight landed unreported";
  EXPECT_EQ(e.revision, e.version);
  // Exactly the ids up to the applied version are done, and their entries are gone.
  for (std::uint64_t i = 1; i <= e.version; ++i)
    ASSERT_EQ(store->claim(claim_req("m-" + std::to_string(i), "p", t0()))->status, ClaimStatus::kCompleted) << i;
  EXPECT_EQ(store->claim(claim_req("m-" + std::to_string(e.version + 1), "p", t0()))->status, ClaimStatus::kNew);
  auto left = store->entities()->buffer_read("e", 10);
  ASSERT_TRUE(left.ok());
  ASSERT_LE(left->size(), 1u) << "only the put of the message in flight may be left";
  if (!left->empty()) {
    EXPECT_EQ(left->front().version, e.version + 1);
  }
  auto sum = store->entities()->buffer_summary(1);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, left->size());
}

}  // namespace
}  // namespace idem::sqlite::testing

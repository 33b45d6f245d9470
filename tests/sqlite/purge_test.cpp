// The SQLite store's rotating purge: bounded work per call, every expired record gone
// after at most one sweep, live records kept, files carrying the old expiry index, and
// the consumer's purge cadence catching up with a backlog.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "idem/consumer.hpp"
#include "sqlite_test_util.hpp"

namespace idem::sqlite::testing {
namespace {

using namespace std::chrono_literals;

// Zero-padded so that the ids sort (as BLOBs) in number order.
std::string numbered(const std::string& prefix, int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%05d", i);
  return prefix + buf;
}

class SqlitePurge : public ::testing::TestWithParam<LeaseMode> {
 protected:
  void SetUp() override {
    store_ = open_ok(options_for(path(), GetParam()));
    ASSERT_NE(store_, nullptr);
  }
  std::string path() const { return dir_.file("idem.db"); }

  // Claims and commits each id at t0() with `ttl`, one batch.
  void commit_all(const std::vector<std::string>& ids, Duration ttl) {
    std::vector<ClaimRequest> claims;
    for (const auto& id : ids) claims.push_back(claim_req(id, "w", t0()));
    for (const auto& c : store_->claim_batch(claims)) {
      ASSERT_TRUE(c.ok()) << c.status().to_string();
      ASSERT_EQ(c->status, ClaimStatus::kNew);
    }
    std::vector<CommitRequest> commits;
    for (const auto& id : ids) {
      commits.push_back(commit_req(id, "w", t0()));
      commits.back().ttl = ttl;
    }
    for (const auto& s : store_->commit_batch(commits)) ASSERT_TRUE(s.ok()) << s.to_string();
  }
  bool live(const std::string& id, TimePoint now) {
    auto info = store_->inspect(id, now);
    EXPECT_TRUE(info.ok()) << info.status().to_string();
    return info.ok() && info->has_value();
  }
  std::size_t rows() {
    store_.reset();  // local mode holds the file's lock
    const std::string n = raw_query(path(), "SELECT count(*) FROM idem_records");
    store_ = open_ok(options_for(path(), GetParam()));
    return std::stoul(n);
  }

  TempDir dir_;
  std::shared_ptr<Store> store_;
};

TEST_P(SqlitePurge, EachCallReadsABoundedSliceAndOneSweepReachesEveryRecord) {
  constexpr int kLive = 1000;
  std::vector<std::string> live_ids;
  for (int i = 0; i < kLive; ++i) live_ids.push_back(numbered("live-", i));
  commit_all(live_ids, Duration(3'600'000));
  commit_all({"zz-expired"}, Duration(1000));  // sorts after every live id
  const TimePoint later = t0() + 2s;

  // Expired but not purged yet: already forgotten.
  EXPECT_FALSE(live("zz-expired", later));
  auto first = store_->purge_expired(later, 1);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(*first, 0u) << "the expired record lies past the first slice the scan reads";
  EXPECT_FALSE(live("zz-expired", later));

  // Each call reads 4 rows per record it may remove, and 64 more: one sweep of 1001
  // rows takes at most ceil(1001 / 68) calls.
  int calls = 1;
  std::size_t total = 0;
  while (total == 0 && calls < 16) {
    auto n = store_->purge_expired(later, 1);
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    ASSERT_LE(*n, 1u);
    total += *n;
    ++calls;
  }
  EXPECT_EQ(total, 1u) << "after " << calls << " calls";
  for (int round = 0; round < 30; ++round) EXPECT_EQ(store_->purge_expired(later, 5).value(), 0u);
  EXPECT_EQ(rows(), static_cast<std::size_t>(kLive));
  EXPECT_TRUE(live(live_ids.front(), later));
  EXPECT_TRUE(live(live_ids.back(), later));
}

TEST_P(SqlitePurge, TheScanWrapsAroundToRecordsBeforeItsCursor) {
  std::vector<std::string> middle, early, late;
  for (int i = 0; i < 400; ++i) middle.push_back(numbered("m-", i));
  for (int i = 0; i < 10; ++i) early.push_back(numbered("a-", i));
  for (int i = 0; i < 10; ++i) late.push_back(numbered("z-", i));
  commit_all(middle, Duration(3'600'000));
  commit_all(early, Duration(1000));
  commit_all(late, Duration(1000));

  // Nothing has expired yet: these calls only move the cursor into the middle rows.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(store_->purge_expired(t0() + 500ms, 1).value(), 0u);

  const TimePoint later = t0() + 2s;
  std::size_t total = 0;
  for (int call = 0; call < 200 && total < 20; ++call) {
    auto n = store_->purge_expired(later, 1);
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    ASSERT_LE(*n, 1u);
    total += *n;
  }
  EXPECT_EQ(total, 20u);
  EXPECT_EQ(rows(), middle.size());
  for (const auto& id : middle) ASSERT_TRUE(live(id, later)) << id;
}

TEST_P(SqlitePurge, ExpiredRetryCountsArePurgedAndLiveOnesKept) {
  for (const char* id : {"r-short", "r-long"}) {
    auto c = store_->claim(claim_req(id, "w", t0()));
    ASSERT_TRUE(c.ok() && c->status == ClaimStatus::kNew);
    const Duration retry_ttl = std::string_view(id) == "r-short" ? Duration(1000) : Duration(3'600'000);
    auto r = store_->release({id, "w", true, t0(), retry_ttl, std::nullopt});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(*r, 1u);
  }
  const TimePoint later = t0() + 2s;
  EXPECT_EQ(store_->purge_expired(later, 10).value(), 1u);
  EXPECT_EQ(store_->purge_expired(later, 10).value(), 0u);
  auto kept = store_->inspect("r-long", later);
  ASSERT_TRUE(kept.ok() && kept->has_value());
  EXPECT_EQ((*kept)->retries, 1u);
  EXPECT_EQ(rows(), 1u);
}

TEST_P(SqlitePurge, PurgeOnAnEmptyStoreAndAfterEverythingIsGone) {
  EXPECT_EQ(store_->purge_expired(t0(), 10).value(), 0u);
  commit_all({"only"}, Duration(1000));
  EXPECT_EQ(store_->purge_expired(t0() + 500ms, 10).value(), 0u);
  EXPECT_EQ(store_->purge_expired(t0() + 2s, 10).value(), 1u);
  EXPECT_EQ(store_->purge_expired(t0() + 2s, 10).value(), 0u);
  // A new record after the cursor has run off every row is still reached.
  commit_all({"again"}, Duration(1000));
  EXPECT_EQ(store_->purge_expired(t0() + 2s, 10).value(), 1u);
  EXPECT_EQ(rows(), 0u);
}

// After a whole pass the store knows when its first row may go, and a purge before
// then reads nothing; a record it writes later with a shorter ttl moves that time
// forward, so it is still purged as soon as it expires.
TEST_P(SqlitePurge, ARecordWrittenAfterAPassIsPurgedWhenItExpires) {
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(numbered("long-", i));
  commit_all(ids, Duration(3'600'000));
  EXPECT_EQ(store_->purge_expired(t0() + 1s, 100).value(), 0u);  // one whole pass
  commit_all({"short"}, Duration(1000));
  EXPECT_EQ(store_->purge_expired(t0() + 2s, 100).value(), 1u);
  EXPECT_FALSE(live("short", t0() + 2s));
  EXPECT_EQ(rows(), 10u);
}

INSTANTIATE_TEST_SUITE_P(LeaseModes, SqlitePurge, ::testing::Values(LeaseMode::kLocal, LeaseMode::kShared),
                         lease_mode_name);

// With shared leases other processes write to the file, and this store does not know
// when their rows expire: a purge before its own floor reads nothing, but every 16th
// goes on with the pass and finds them.
TEST(SqlitePurgeFloor, AnotherProcesssExpiredRowIsPurgedByEverySixteenthCall) {
  TempDir dir;
  const std::string path = dir.file("idem.db");
  std::shared_ptr<Store> store = open_ok(options_for(path, LeaseMode::kShared));
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(store->claim(claim_req("mine", "w", t0())).value().status, ClaimStatus::kNew);
  CommitRequest c = commit_req("mine", "w", t0());
  c.ttl = Duration(3'600'000);
  ASSERT_TRUE(store->commit(c).ok());
  EXPECT_EQ(store->purge_expired(t0() + 1s, 10).value(), 0u);  // one whole pass: nothing due for an hour
  const std::string expired_at = std::to_string(to_unix_ms(t0()) - 1);
  ASSERT_EQ(raw_exec(path,
                     "INSERT INTO idem_records(id, state, owner, lease_until_ms, fingerprint, result, retries, "
                     "expires_ms) VALUES(x'6f74686572', 2, '', 0, NULL, NULL, 0, " +
                         expired_at + ")"),
            SQLITE_OK);
  for (int call = 1; call < 16; ++call) EXPECT_EQ(store->purge_expired(t0() + 1s, 10).value(), 0u) << call;
  EXPECT_EQ(store->purge_expired(t0() + 1s, 10).value(), 1u);
  EXPECT_EQ(raw_query(path, "SELECT count(*) FROM idem_records"), "1");
}

TEST(SqliteSchema, AFileWithTheOldExpiryIndexOpensAndLosesTheIndex) {
  TempDir dir;
  const std::string path = dir.file("old.db");
  {
    auto store = open_ok(options_for(path));
    ASSERT_NE(store, nullptr);
    ASSERT_EQ(store->claim(claim_req("kept", "w", t0())).value().status, ClaimStatus::kNew);
    ASSERT_TRUE(store->commit(commit_req("kept", "w", t0(), "r")).ok());
  }
  EXPECT_EQ(raw_query(path, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'idem_records'"
                            " AND sql IS NOT NULL"),
            "0")
      << "a new file has no secondary index";
  ASSERT_EQ(raw_exec(path, "CREATE INDEX idem_records_expires ON idem_records(expires_ms)"), SQLITE_OK);
  // The user's own tables and indexes are not ours to drop.
  ASSERT_EQ(raw_exec(path, "CREATE TABLE user_t(x); CREATE INDEX user_t_x ON user_t(x)"), SQLITE_OK);
  {
    auto store = open_ok(options_for(path));
    ASSERT_NE(store, nullptr);
    auto c = store->claim(claim_req("kept", "x", t0() + 1s));
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->status, ClaimStatus::kCompleted);
    EXPECT_EQ(c->result, "r");
  }
  EXPECT_EQ(raw_query(path, "SELECT count(*) FROM sqlite_master WHERE name = 'idem_records_expires'"), "0");
  EXPECT_EQ(raw_query(path, "SELECT count(*) FROM sqlite_master WHERE name = 'user_t_x'"), "1");
  EXPECT_EQ(raw_query(path, "SELECT value FROM idem_meta WHERE key = 'schema_version'"), std::to_string(kSchemaVersion));
}


// Through a consumer (the cadence is the engine's; SQLite's purge removes a whole
// batch whenever that many have expired): a purge that removes a whole batch brings the next one forward
// (an eighth of purge_every), so a backlog of expired records, such as a killed
// consumer leaves behind, drains in a few intervals rather than at one batch per
// interval, which is only as fast as records expire.
TEST(SqlitePurgeCadence, AFullPurgeBringsTheNextForwardUntilTheBacklogIsGone) {
  TempDir dir;
  std::shared_ptr<Store> store = open_ok(options_for(dir.file("idem.db")));
  auto clock = std::make_shared<ManualClock>();
  ConsumerOptions co;
  co.store = store;
  co.clock = clock;
  co.ttl = Duration(1000);
  co.purge_every = 80;
  co.purge_batch = 80;
  Extractors<std::string> x;
  x.id = [](const std::string& m) { return std::optional<std::string_view>(m); };
  auto c = Consumer<std::string>::create(co, x, [](const std::string&, HandlerContext&) { return HandlerResult::ok(); });
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  for (int i = 0; i < 800; ++i) ASSERT_EQ(c->process(numbered("old-", i)).reason, Reason::kProcessed);
  clock->advance(Duration(2000));  // all 800 expired, none purged yet
  auto expired = [&] { return store->admin()->count_records(clock->now()).value().expired; };
  ASSERT_EQ(expired(), 800u);
  // One batch per interval would leave 800 - 3 * 80 after 240 commits; brought
  // forward, the purges after 80, 90, 100, … commits take all of it.
  for (int i = 0; i < 240; ++i) ASSERT_EQ(c->process(numbered("new-", i)).reason, Reason::kProcessed);
  EXPECT_EQ(expired(), 0u);
}

}  // namespace
}  // namespace idem::sqlite::testing

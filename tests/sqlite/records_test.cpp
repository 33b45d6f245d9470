// SQLite-specific record behaviour: binary ids, durability, retries across reopen,
// bounded purge, fault injection, batches, both lease modes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sqlite_test_util.hpp"

namespace idem::sqlite::testing {
namespace {

using namespace std::chrono_literals;

class SqliteRecords : public ::testing::TestWithParam<LeaseMode> {
 protected:
  void SetUp() override { store_ = open_ok(opts()); ASSERT_NE(store_, nullptr); }
  Options opts() {
    Options o = options_for(dir_.file("idem.db"), GetParam());
    o.fault_hook = [this](std::string_view point) -> Status {
      seen_.emplace_back(point);
      return point == fail_at_ ? unavailable("injected at " + fail_at_) : ok_status();
    };
    return o;
  }
  void reopen() {
    store_.reset();
    store_ = open_ok(opts());
    ASSERT_NE(store_, nullptr);
  }
  ClaimStatus claim_status(std::string_view id, std::string_view owner, TimePoint now) {
    auto c = store_->claim(claim_req(id, owner, now));
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? c->status : ClaimStatus::kConflict;
  }
  std::size_t rows() { return std::stoul(raw_query_locked("SELECT count(*) FROM idem_records")); }
  std::size_t done_rows() { return std::stoul(raw_query_locked("SELECT count(*) FROM idem_records WHERE state >= 2")); }
  // Reads through the store's own file after closing it (local mode holds the lock).
  std::string raw_query_locked(const std::string& sql) {
    store_.reset();
    std::string out = raw_query(dir_.file("idem.db"), sql);
    store_ = open_ok(opts());
    return out;
  }

  TempDir dir_;
  std::shared_ptr<Store> store_;
  std::string fail_at_;
  std::vector<std::string> seen_;
};

TEST_P(SqliteRecords, BinaryIdsAreDistinctAndExact) {
  const std::string with_nul("a\0b", 3);
  const std::string with_nul2("a\0c", 3);
  const std::string bad_utf8("\xff\xfe\x80orders", 9);
  const std::string prefix("a", 1);
  const std::string long_id(512, '\xc3');
  for (const auto& id : {with_nul, bad_utf8, long_id}) {
    ASSERT_EQ(claim_status(id, "w", t0()), ClaimStatus::kNew);
    ASSERT_TRUE(store_->commit(commit_req(id, "w", t0(), std::string_view("r\0s", 3))).ok());
  }
  reopen();
  for (const auto& id : {with_nul, bad_utf8, long_id}) {
    auto c = store_->claim(claim_req(id, "x", t0() + 1s));
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->status, ClaimStatus::kCompleted);
    EXPECT_EQ(c->result, std::string("r\0s", 3));
  }
  // Ids that share a prefix up to the NUL, or are a prefix, are other ids.
  EXPECT_EQ(claim_status(with_nul2, "x", t0() + 1s), ClaimStatus::kNew);
  EXPECT_EQ(claim_status(prefix, "x", t0() + 1s), ClaimStatus::kNew);
  EXPECT_EQ(claim_status(std::string(511, '\xc3'), "x", t0() + 1s), ClaimStatus::kNew);
  auto info = store_->inspect(with_nul, t0() + 1s);
  ASSERT_TRUE(info.ok());
  ASSERT_TRUE(info->has_value());
  EXPECT_EQ((*info)->state, RecordState::kCompleted);
}

TEST_P(SqliteRecords, EmptyIdIsInvalidArgument) {
  EXPECT_EQ(store_->claim(claim_req("", "w", t0())).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->commit(commit_req("", "w", t0())).code(), StatusCode::kInvalidArgument);
}

TEST_P(SqliteRecords, CommittedRecordsSurviveReopenUntilTheirTtl) {
  ASSERT_EQ(claim_status("order-1", "w", t0()), ClaimStatus::kNew);
  CommitRequest c = commit_req("order-1", "w", t0(), "receipt-1");
  c.fingerprint = 42;
  ASSERT_TRUE(store_->commit(c).ok());
  ASSERT_EQ(claim_status("order-2", "w", t0()), ClaimStatus::kNew);
  ASSERT_TRUE(store_->commit(commit_req("order-2", "w", t0(), std::nullopt, Outcome::kDeadLettered)).ok());
  reopen();
  auto one = store_->claim(claim_req("order-1", "other", t0() + 10s, 42));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->status, ClaimStatus::kCompleted);
  EXPECT_EQ(one->result, "receipt-1");
  EXPECT_FALSE(one->dead_lettered);
  EXPECT_EQ(store_->claim(claim_req("order-1", "other", t0() + 10s, 43))->status, ClaimStatus::kConflict);
  auto two = store_->claim(claim_req("order-2", "other", t0() + 10s));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->status, ClaimStatus::kCompleted);
  EXPECT_TRUE(two->dead_lettered);
  // After the TTL the id is new again.
  EXPECT_EQ(claim_status("order-1", "other", t0() + 3601s), ClaimStatus::kNew);
}

TEST_P(SqliteRecords, RetryCountsSurviveReopenAndClearOnCommit) {
  ReleaseRequest r{"m", "w", true, t0(), Duration(60'000), std::nullopt};
  ASSERT_EQ(claim_status("m", "w", t0()), ClaimStatus::kNew);
  ASSERT_EQ(store_->release(r).value(), 1u);
  ASSERT_EQ(claim_status("m", "w", t0()), ClaimStatus::kNew);
  ASSERT_EQ(store_->release(r).value(), 2u);
  reopen();
  auto c = store_->claim(claim_req("m", "w", t0() + 1s));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, ClaimStatus::kNew);
  EXPECT_EQ(c->retries, 2u);
  ASSERT_TRUE(store_->commit(commit_req("m", "w", t0() + 1s)).ok());
  auto info = store_->inspect("m", t0() + 1s);
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->retries, 0u);
  // A retry count expires with its retry_ttl.
  ASSERT_EQ(store_->release({"n", "w", true, t0(), Duration(60'000), std::nullopt}).value(), 1u);
  EXPECT_EQ(store_->claim(claim_req("n", "w", t0() + 61s))->retries, 0u);
}

TEST_P(SqliteRecords, LeasesInProgressAndExpiry) {
  ASSERT_EQ(claim_status("m", "a", t0()), ClaimStatus::kNew);
  auto other = store_->claim(claim_req("m", "b", t0() + 1s));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, ClaimStatus::kInProgress);
  EXPECT_EQ(other->owner, "a");
  EXPECT_EQ(other->lease_left, Duration(9'000));
  EXPECT_EQ(store_->commit(commit_req("m", "b", t0() + 1s)).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store_->extend({"m", "a", Duration(20'000), t0() + 5s, std::nullopt}).ok());
  EXPECT_EQ(store_->extend({"m", "b", Duration(20'000), t0() + 5s, std::nullopt}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(claim_status("m", "b", t0() + 20s), ClaimStatus::kInProgress);
  EXPECT_EQ(claim_status("m", "b", t0() + 26s), ClaimStatus::kNew);
  EXPECT_TRUE(store_->commit(commit_req("m", "b", t0() + 27s)).ok());
  EXPECT_EQ(store_->commit(commit_req("m", "b", t0() + 27s)).code(), StatusCode::kFailedPrecondition);
}

TEST_P(SqliteRecords, PurgeIsBoundedAndRemovesOnlyExpired) {
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) ids.push_back("id-" + std::to_string(i));
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(claim_status(ids[i], "w", t0()), ClaimStatus::kNew);
    CommitRequest c = commit_req(ids[i], "w", t0());
    c.ttl = Duration(i < 20 ? 1000 : 100'000);
    ASSERT_TRUE(store_->commit(c).ok());
  }
  EXPECT_EQ(store_->purge_expired(t0() + 500ms, 100).value(), 0u);
  EXPECT_EQ(store_->purge_expired(t0() + 2s, 7).value(), 7u);
  EXPECT_EQ(store_->purge_expired(t0() + 2s, 7).value(), 7u);
  EXPECT_EQ(store_->purge_expired(t0() + 2s, 100).value(), 6u);
  EXPECT_EQ(store_->purge_expired(t0() + 2s, 100).value(), 0u);
  EXPECT_EQ(rows(), 10u);
  EXPECT_EQ(claim_status(ids[25], "x", t0() + 2s), ClaimStatus::kCompleted);
}

TEST_P(SqliteRecords, PurgeDropsAbandonedLeasesInBoundedSteps) {
  for (int i = 0; i < 100; ++i) ASSERT_EQ(claim_status("abandoned-" + std::to_string(i), "w", t0()), ClaimStatus::kNew);
  ASSERT_EQ(claim_status("live", "w", t0() + 10s), ClaimStatus::kNew);
  const TimePoint later = t0() + 11s;  // every lease but "live" has expired
  std::size_t total = 0;
  for (int round = 0; round < 40; ++round) {
    auto n = store_->purge_expired(later, 10);
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    EXPECT_LE(*n, 10u);
    total += *n;
  }
  EXPECT_EQ(total, 100u);
  auto live = store_->inspect("live", later);
  ASSERT_TRUE(live.ok() && live->has_value());
  EXPECT_EQ((*live)->state, RecordState::kInProgress);
  EXPECT_EQ(claim_status("abandoned-7", "x", later), ClaimStatus::kNew);
}

TEST_P(SqliteRecords, CommitFaultLeavesNoPartialState) {
  for (const char* point : {"commit.before_write", "commit.after_record"}) {
    SCOPED_TRACE(point);
    const std::string id = std::string("f-") + point;
    ASSERT_EQ(claim_status(id, "w", t0()), ClaimStatus::kNew);
    fail_at_ = point;
    Status s = store_->commit(commit_req(id, "w", t0(), "result"));
    fail_at_.clear();
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_THAT(seen_, ::testing::Contains(point));
    // Nothing was written, and the lease is still the caller's.
    auto c = store_->claim(claim_req(id, "other", t0() + 1s));
    EXPECT_EQ(c->status, ClaimStatus::kInProgress);
    EXPECT_TRUE(store_->commit(commit_req(id, "w", t0() + 1s)).ok());
  }
  reopen();
  EXPECT_EQ(done_rows(), 2u);
}

TEST_P(SqliteRecords, CommitBatchFaultRollsBackEveryItem) {
  std::vector<std::string> ids = {"b1", "b2", "b3"};
  for (const auto& id : ids) ASSERT_EQ(claim_status(id, "w", t0()), ClaimStatus::kNew);
  std::vector<CommitRequest> reqs;
  for (const auto& id : ids) reqs.push_back(commit_req(id, "w", t0()));
  fail_at_ = "commit_batch.after_first";
  auto out = store_->commit_batch(reqs);
  fail_at_.clear();
  ASSERT_EQ(out.size(), 3u);
  for (const auto& s : out) EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  reopen();
  EXPECT_EQ(done_rows(), 0u);
  // Not completed: local leases died with the handle, shared ones are still the caller's.
  for (const auto& id : ids) {
    EXPECT_EQ(claim_status(id, "w", t0()),
              GetParam() == LeaseMode::kLocal ? ClaimStatus::kNew : ClaimStatus::kInProgress);
  }
  out = store_->commit_batch(reqs);
  for (const auto& s : out) EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(done_rows(), 3u);
}

TEST_P(SqliteRecords, CommitBatchItemFailsAlone) {
  ASSERT_EQ(claim_status("mine", "w", t0()), ClaimStatus::kNew);
  ASSERT_EQ(claim_status("theirs", "other", t0()), ClaimStatus::kNew);
  ASSERT_EQ(claim_status("done", "w", t0()), ClaimStatus::kNew);
  ASSERT_TRUE(store_->commit(commit_req("done", "w", t0())).ok());
  std::vector<CommitRequest> reqs = {commit_req("mine", "w", t0()), commit_req("theirs", "w", t0()),
                                     commit_req("done", "w", t0()), commit_req("", "w", t0()),
                                     commit_req("fresh", "w", t0())};
  auto out = store_->commit_batch(reqs);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_TRUE(out[0].ok()) << out[0].to_string();
  EXPECT_EQ(out[1].code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(out[2].code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(out[3].code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(out[4].ok()) << out[4].to_string();
  EXPECT_EQ(claim_status("theirs", "x", t0() + 1s), ClaimStatus::kInProgress);
  EXPECT_EQ(claim_status("mine", "x", t0() + 1s), ClaimStatus::kCompleted);
}

TEST_P(SqliteRecords, ClaimBatchAnswersLikeSingleClaimsInOrder) {
  ASSERT_EQ(claim_status("done", "w", t0()), ClaimStatus::kNew);
  ASSERT_TRUE(store_->commit(commit_req("done", "w", t0(), "r")).ok());
  std::vector<ClaimRequest> reqs = {claim_req("a", "w", t0()), claim_req("done", "w", t0()),
                                    claim_req("a", "w2", t0()), claim_req("", "w", t0()),
                                    claim_req("b", "w", t0())};
  auto out = store_->claim_batch(reqs);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0]->status, ClaimStatus::kNew);
  EXPECT_EQ(out[1]->status, ClaimStatus::kCompleted);
  EXPECT_EQ(out[1]->result, "r");
  EXPECT_EQ(out[2]->status, ClaimStatus::kInProgress);
  EXPECT_EQ(out[2]->owner, "w");
  EXPECT_EQ(out[3].status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out[4]->status, ClaimStatus::kNew);
}

TEST_P(SqliteRecords, LeasesAreInTheFileOnlyInSharedMode) {
  ASSERT_EQ(claim_status("m", "w", t0()), ClaimStatus::kNew);
  const std::string in_file = raw_query_locked("SELECT count(*) FROM idem_records WHERE state = 1");
  EXPECT_EQ(in_file, GetParam() == LeaseMode::kShared ? "1" : "0");
  // Local leases die with the handle (as an expiry would); shared ones stay.
  EXPECT_EQ(claim_status("m", "x", t0() + 1s),
            GetParam() == LeaseMode::kShared ? ClaimStatus::kInProgress : ClaimStatus::kNew);
}

INSTANTIATE_TEST_SUITE_P(Leases, SqliteRecords, ::testing::Values(LeaseMode::kLocal, LeaseMode::kShared),
                         lease_mode_name);

}  // namespace
}  // namespace idem::sqlite::testing

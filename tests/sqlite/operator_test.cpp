// The stores' operator tools (store.hpp: count_records, remove_record, remove_entity)
// on memory: and on sqlite: in both lease modes, and the "not supported" default.
#include <gtest/gtest.h>

#include <string>

#include "idem/open_store.hpp"
#include "sqlite_test_util.hpp"

namespace idem::sqlite::testing {
namespace {

using namespace std::chrono_literals;

class OperatorTools : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& p = GetParam();
    const std::string uri = p == "memory" ? "memory:" : "sqlite:" + dir_.file("idem.db") + "?leases=" + p;
    auto s = open_store(uri);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    store_ = *s;
  }
  ClaimStatus claim(std::string_view id, TimePoint now) {
    auto c = store_->claim(claim_req(id, "w", now));
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? c->status : ClaimStatus::kConflict;
  }
  void commit(std::string_view id, TimePoint now, Outcome outcome = Outcome::kProcessed, Duration ttl = 1h) {
    ASSERT_EQ(claim(id, now), ClaimStatus::kNew) << id;
    CommitRequest q = commit_req(id, "w", now, std::nullopt, outcome);
    q.ttl = ttl;
    ASSERT_TRUE(store_->commit(q).ok()) << id;
  }
  RecordCounts counts(TimePoint now) {
    auto c = store_->admin()->count_records(now);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? *c : RecordCounts{};
  }
  // A store with every kind of record at t0() + 2 s: done, dead-lettered, in progress,
  // pending (a retry count) and expired.
  void fill() {
    commit("done", t0());
    commit("dead", t0(), Outcome::kDeadLettered);
    commit("short", t0(), Outcome::kProcessed, 1s);
    ASSERT_EQ(claim("leased", t0()), ClaimStatus::kNew);
    ASSERT_EQ(claim("retry", t0()), ClaimStatus::kNew);
    ReleaseRequest r{"retry", "w", true, t0(), Duration(3'600'000), std::nullopt};
    ASSERT_TRUE(store_->release(r).ok());
  }

  TempDir dir_;
  std::shared_ptr<Store> store_;
};

TEST_P(OperatorTools, CountsRecordsByTheStateInspectReports) {
  fill();
  const TimePoint t = t0() + 2s;
  RecordCounts c = counts(t);
  EXPECT_EQ(c.completed, 1u);
  EXPECT_EQ(c.dead_lettered, 1u);
  EXPECT_EQ(c.in_progress, 1u);
  EXPECT_EQ(c.pending, 1u);
  EXPECT_EQ(c.expired, 1u);
  // A lease over a retry count: in progress, no longer pending.
  ASSERT_EQ(claim("retry", t), ClaimStatus::kNew);
  c = counts(t);
  EXPECT_EQ(c.in_progress, 2u);
  EXPECT_EQ(c.pending, 0u);
  EXPECT_EQ(c.completed + c.dead_lettered + c.expired, 3u);
  // Past every lease and ttl: all expired (memory and sqlite keep a record per id).
  c = counts(t0() + 2h);
  EXPECT_EQ(c.completed + c.dead_lettered + c.in_progress + c.pending, 0u);
  EXPECT_GE(c.expired, 3u);
}

TEST_P(OperatorTools, RemovesOneRecordWhateverItsState) {
  fill();
  const TimePoint t = t0() + 2s;
  for (const char* id : {"done", "dead", "leased", "retry"}) {
    auto removed = store_->admin()->remove_record(id, t);
    ASSERT_TRUE(removed.ok()) << removed.status().to_string();
    EXPECT_TRUE(*removed) << id;
    auto info = store_->inspect(id, t);
    ASSERT_TRUE(info.ok());
    EXPECT_FALSE(info->has_value()) << id;
  }
  EXPECT_FALSE(store_->admin()->remove_record("short", t).value()) << "expired: not live";
  EXPECT_FALSE(store_->admin()->remove_record("never", t).value());
  EXPECT_EQ(store_->admin()->remove_record("", t).status().code(), StatusCode::kInvalidArgument);
  // A removed id is new again; the removed lease's holder may still commit.
  EXPECT_EQ(claim("done", t), ClaimStatus::kNew);
  EXPECT_TRUE(store_->commit(commit_req("leased", "w", t)).ok());
  const RecordCounts c = counts(t);
  EXPECT_EQ(c.pending, 0u);
  EXPECT_EQ(c.dead_lettered, 0u);
}

TEST_P(OperatorTools, RemovesOneEntityWithItsBuffer) {
  ASSERT_TRUE(store_->entities()->write_entity({"p", 0, 4, "open", std::nullopt}).ok());
  for (std::uint64_t v : {6, 7})
    ASSERT_TRUE(store_->entities()->buffer_put({"p", v, "p-" + std::to_string(v), "msg", t0(), {}}).ok());
  ASSERT_TRUE(store_->entities()->buffer_put({"q", 2, "q-2", "message", t0(), {}}).ok());
  auto removed = store_->admin()->remove_entity("p");
  ASSERT_TRUE(removed.ok()) << removed.status().to_string();
  EXPECT_TRUE(*removed);
  EXPECT_EQ(store_->entities()->read_entity("p").value().revision, 0u);
  EXPECT_TRUE(store_->entities()->buffer_read("p", 10).value().empty());
  const BufferSummary s = store_->entities()->buffer_summary(10).value();
  EXPECT_EQ(s.count, 1u) << "q's entry is kept";
  EXPECT_EQ(s.bytes, std::string("q").size() + std::string("q-2").size() + std::string("message").size());
  EXPECT_FALSE(store_->admin()->remove_entity("p").value());
  EXPECT_EQ(store_->entities()->write_entity({"p", 1, 5, std::nullopt, std::nullopt}).code(), StatusCode::kAborted)
      << "a writer holding the old revision cannot write";
  EXPECT_TRUE(store_->admin()->remove_entity("q").value()) << "buffered entries alone count";
  EXPECT_EQ(store_->entities()->buffer_summary(10).value().bytes, 0u);
}

INSTANTIATE_TEST_SUITE_P(Stores, OperatorTools, ::testing::Values("memory", "local", "shared"));

// A store that keeps only the required methods has no facets: no operator calls, no
// entities, no outbox.
class MinimalStore final : public Store {
 public:
  StoreCapabilities capabilities() const override { return {}; }
  StatusOr<ClaimResult> claim(const ClaimRequest&) override { return ClaimResult::granted(0); }
  Status commit(const CommitRequest&) override { return ok_status(); }
  StatusOr<std::uint32_t> release(const ReleaseRequest&) override { return 0u; }
  Status extend(const ExtendRequest&) override { return ok_status(); }
  StatusOr<std::optional<RecordInfo>> inspect(std::string_view, TimePoint) override {
    return std::optional<RecordInfo>();
  }
  StatusOr<std::size_t> purge_expired(TimePoint, std::size_t) override { return std::size_t{0}; }
};

TEST(OperatorToolsDefault, AMinimalStoreHasNoFacets) {
  MinimalStore s;
  EXPECT_EQ(s.admin(), nullptr);
  EXPECT_EQ(s.entities(), nullptr);
  EXPECT_EQ(s.outbox(), nullptr);
  EXPECT_EQ(s.begin(t0()).status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace idem::sqlite::testing

// The PostgreSQL store's outbox beyond the shared outbox tests (tests/outbox/): a
// commit batch writes the entries of the items it wrote and of no other, a plain
// commit writes them with the record, outbox_mark_sent and the purge are bounded as
// asked, and a schema of version 1 (before the outbox) is upgraded at open.
#include "idem/outbox.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "idem/postgres_store.hpp"
#include "pg_test_util.hpp"

namespace idem::postgres_test {
namespace {

class PostgresOutbox : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(shared_server(), nullptr);
    o_.connection = shared_server()->connection();
    o_.schema = schema_;
    o_.pool_size = 2;
    store_ = postgres::open(o_).value();
  }
  void TearDown() override { raw_.query("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE"); }

  static std::vector<OutboxEntry> entries(const std::string& in, std::uint32_t n) {
    std::vector<OutboxEntry> out;
    for (std::uint32_t i = 0; i < n; ++i) {
      OutboxEntry e;
      e.incoming_id = in;
      e.position = i;
      e.destination = "fake://d";
      e.message = {outgoing_id(in, i), in + "-body", {{"k", in}}};
      e.created_at = kNow;
      out.push_back(std::move(e));
    }
    return out;
  }
  void claim(const std::string& id) {
    ASSERT_EQ(store_->claim({id, "me", Duration{60'000}, std::nullopt, kNow, std::nullopt})->status, ClaimStatus::kNew);
  }
  std::vector<OutboxEntry> pending() {
    OutboxQuery q;
    q.max = 1000;
    return store_->outbox()->outbox_pending(q).value();
  }

  static constexpr TimePoint kNow = TimePoint{} + Duration{1'000'000};
  Raw raw_;
  std::string schema_ = fresh_schema();
  postgres::Options o_;
  std::shared_ptr<Store> store_;
};

TEST_F(PostgresOutbox, ACommitBatchWritesTheEntriesOfTheItemsItWroteOnly) {
  ASSERT_NE(store_->outbox(), nullptr);
  for (const char* id : {"a", "b", "done"}) claim(id);
  ASSERT_TRUE(store_->commit({"done", "me", std::nullopt, kNow, Duration{60'000}}).ok());
  const auto ea = entries("a", 2), eb = entries("b", 3), edone = entries("done", 1);
  std::vector<CommitRequest> batch = {{"a", "me", std::nullopt, kNow, Duration{60'000}},
                                      {"done", "me", std::nullopt, kNow, Duration{60'000}},
                                      {"b", "me", std::nullopt, kNow, Duration{60'000}}};
  batch[0].outbox = ea;
  batch[1].outbox = edone;
  batch[2].outbox = eb;
  const auto st = store_->commit_batch(batch);
  ASSERT_EQ(st.size(), 3u);
  EXPECT_TRUE(st[0].ok()) << st[0].to_string();
  EXPECT_EQ(st[1].code(), StatusCode::kFailedPrecondition) << "already completed";
  EXPECT_TRUE(st[2].ok()) << st[2].to_string();
  const auto all = pending();
  std::vector<std::string> ids;
  for (const auto& e : all) ids.push_back(e.message.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"a#0", "a#1", "b#0", "b#1", "b#2"})) << "in commit order";
  EXPECT_EQ(all[3].message.headers, (std::vector<std::pair<std::string, std::string>>{{"k", "b"}}));
  // A plain commit writes its entries with the record; a refused one writes none.
  claim("c");
  CommitRequest c{"c", "me", std::nullopt, kNow, Duration{60'000}};
  const auto ec = entries("c", 1);
  c.outbox = ec;
  ASSERT_TRUE(store_->commit(c).ok());
  EXPECT_EQ(store_->commit(c).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(pending().size(), 6u);
  EXPECT_EQ(raw_.query("SELECT count(*) FROM " + schema_ + ".idem_outbox"), "6");
}

TEST_F(PostgresOutbox, MarkSentTakesTheWholeSpanAndThePurgeIsBounded) {
  claim("m");
  CommitRequest c{"m", "me", std::nullopt, kNow, Duration{60'000}};
  const auto es = entries("m", 5);
  c.outbox = es;
  ASSERT_TRUE(store_->commit(c).ok());
  ASSERT_TRUE(store_->outbox()->outbox_mark_sent(es, kNow, Duration{10}).ok());
  EXPECT_TRUE(pending().empty());
  EXPECT_EQ(store_->outbox()->outbox_mark_sent(es, kNow, Duration{0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->purge_expired(kNow + Duration{9}, 100).value(), 0u) << "not yet expired";
  EXPECT_EQ(store_->purge_expired(kNow + Duration{10}, 2).value(), 2u);
  EXPECT_EQ(raw_.query("SELECT count(*) FROM " + schema_ + ".idem_outbox"), "3");
  EXPECT_EQ(store_->purge_expired(kNow + Duration{10}, 100).value(), 3u);
  EXPECT_EQ(raw_.query("SELECT count(*) FROM " + schema_ + ".idem_outbox"), "0");
}

TEST_F(PostgresOutbox, ASchemaOfVersionOneIsUpgradedAtOpen) {
  claim("old");
  store_.reset();
  // What a build before the outbox wrote: no idem_outbox, version 1.
  raw_.query("DROP TABLE " + schema_ + ".idem_outbox");
  raw_.query("UPDATE " + schema_ + ".idem_meta SET value = 1 WHERE key = 'schema_version'");
  store_ = postgres::open(o_).value();
  EXPECT_EQ(raw_.query("SELECT value FROM " + schema_ + ".idem_meta WHERE key = 'schema_version'"),
            std::to_string(postgres::kSchemaVersion));
  EXPECT_EQ(postgres::kSchemaVersion, 3);
  EXPECT_EQ(store_->inspect("old", kNow).value()->state, RecordState::kInProgress) << "the records are kept";
  CommitRequest c{"old", "me", std::nullopt, kNow, Duration{60'000}};
  const auto es = entries("old", 1);
  c.outbox = es;
  ASSERT_TRUE(store_->commit(c).ok());
  EXPECT_EQ(pending().size(), 1u);
  store_ = postgres::open(o_).value();  // a second open finds version 3 and changes nothing
  EXPECT_EQ(pending().size(), 1u);
}

}  // namespace
}  // namespace idem::postgres_test

// Transactional mode: the handler's own writes and the dedup record commit together.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "idem/consumer.hpp"
#include "sqlite_test_util.hpp"

namespace idem::sqlite::testing {
namespace {

struct Order {
  std::string id;
  std::string sku;
  bool fail = false;
  bool extend = false;
};

class SqliteTransactional : public ::testing::TestWithParam<LeaseMode> {
 protected:
  void SetUp() override {
    path_ = dir_.file("app.db");
    // The application's own table lives in the same file.
    ASSERT_EQ(raw_exec(path_, "CREATE TABLE orders(sku TEXT NOT NULL, msg BLOB NOT NULL)"), SQLITE_OK);
    open_store();
  }
  void open_store() {
    Options o = options_for(path_, GetParam());
    o.fault_hook = [this](std::string_view point) -> Status {
      return point == fail_at_ ? unavailable("injected at " + fail_at_) : ok_status();
    };
    store_ = open_ok(o);
    ASSERT_NE(store_, nullptr);
    ConsumerOptions co;
    co.store = store_;
    co.transactional = true;
    co.owner = "tx";
    co.clock = clock_;
    co.purge_every = 0;
    Extractors<Order> ex;
    ex.id = [](const Order& m) { return std::optional<std::string_view>(m.id); };
    auto c = Consumer<Order>::create(co, ex, [this](const Order& m, HandlerContext& ctx) {
      sqlite3* db = connection(ctx);
      seen_connection_ = db != nullptr;
      if (!db) return HandlerResult::fail("no connection");
      if (hook_) hook_(db);
      sqlite3_stmt* st = nullptr;
      sqlite3_prepare_v2(db, "INSERT INTO orders(sku, msg) VALUES(?1, ?2)", -1, &st, nullptr);
      sqlite3_bind_text(st, 1, m.sku.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_blob(st, 2, m.id.data(), static_cast<int>(m.id.size()), SQLITE_TRANSIENT);
      const int rc = sqlite3_step(st);
      sqlite3_finalize(st);
      if (rc != SQLITE_DONE) return HandlerResult::fail(sqlite3_errmsg(db));
      if (m.extend) {
        // The store is usable from the handler's own thread while the transaction is open.
        if (Status s = ctx.extend_lease(Duration(60'000)); !s.ok()) return HandlerResult::fail(s.to_string());
      }
      if (m.fail) return HandlerResult::fail("the handler failed after writing");
      return HandlerResult::ok("shipped " + m.sku);
    });
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    consumer_.emplace(std::move(c).value());
  }
  // Counts rows of the application's table (through the store's connection is not
  // possible outside a handler, so the store is closed and reopened around it).
  std::string count_orders(const std::string& where = "1") {
    consumer_.reset();
    store_.reset();
    std::string out = raw_query(path_, "SELECT count(*) FROM orders WHERE " + where);
    open_store();
    return out;
  }
  std::optional<RecordInfo> record(const std::string& id) {
    auto r = store_->inspect(id, clock_->now());
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : std::nullopt;
  }

  TempDir dir_;
  std::string path_;
  std::string fail_at_;
  bool seen_connection_ = false;
  std::function<void(sqlite3*)> hook_;  // called with the connection in every handler run
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Store> store_;
  std::optional<Consumer<Order>> consumer_;
};

TEST_P(SqliteTransactional, HandlerWritesAndRecordLandTogether) {
  Decision d = consumer_->process({"m1", "apple"});
  EXPECT_EQ(d.action, Action::kAck);
  EXPECT_EQ(d.reason, Reason::kProcessed);
  EXPECT_TRUE(seen_connection_);
  auto r = record("m1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, RecordState::kCompleted);
  EXPECT_EQ(r->result, "shipped apple");
  // A redelivery is a duplicate and writes nothing.
  Decision again = consumer_->process({"m1", "apple"});
  EXPECT_EQ(again.reason, Reason::kDuplicate);
  EXPECT_EQ(count_orders(), "1");
}

TEST_P(SqliteTransactional, HandlerFailureRollsBackItsRowAndLeavesNoRecord) {
  Decision d = consumer_->process({"m2", "pear", true});
  EXPECT_EQ(d.action, Action::kRetry);
  auto r = record("m2");
  EXPECT_TRUE(!r || r->state == RecordState::kPending) << "the failed attempt left a done record";
  if (r) {
    EXPECT_EQ(r->retries, 1u);
  }
  EXPECT_EQ(count_orders(), "0");
  // The redelivery runs the handler again and commits once.
  Decision ok = consumer_->process({"m2", "pear"});
  EXPECT_EQ(ok.reason, Reason::kProcessed);
  EXPECT_EQ(count_orders("sku = 'pear'"), "1");
}

TEST_P(SqliteTransactional, FaultInsideCommitRollsBackHandlerRowAndRecord) {
  for (const char* point : {"commit.before_write", "commit.after_record"}) {
    SCOPED_TRACE(point);
    const std::string id = std::string("f-") + point;
    fail_at_ = point;
    Decision d = consumer_->process({id, "plum"});
    fail_at_.clear();
    EXPECT_EQ(d.action, Action::kRetry);
    auto r = record(id);
    EXPECT_TRUE(!r || r->state == RecordState::kPending);
  }
  EXPECT_EQ(count_orders(), "0");
}

TEST_P(SqliteTransactional, StoreCallsFromTheHandlerJoinTheTransaction) {
  Decision d = consumer_->process({"m3", "fig", false, true});
  EXPECT_EQ(d.reason, Reason::kProcessed) << d.detail;
  EXPECT_EQ(record("m3")->state, RecordState::kCompleted);
  EXPECT_EQ(count_orders(), "1");
}

TEST_P(SqliteTransactional, BeginWhileATransactionIsOpenIsRefused) {
  auto t = store_->begin(clock_->now());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  auto nested = store_->begin(clock_->now());
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.status().code(), StatusCode::kFailedPrecondition);
  // A transaction that commits a record without writes of its own.
  ASSERT_TRUE(store_->claim(claim_req("direct", "tx", clock_->now())).ok());
  EXPECT_TRUE((*t)->commit(commit_req("direct", "tx", clock_->now())).ok());
  EXPECT_EQ((*t)->commit(commit_req("direct", "tx", clock_->now())).code(), StatusCode::kFailedPrecondition);
  (*t)->rollback();  // idempotent after the end
  EXPECT_EQ(record("direct")->state, RecordState::kCompleted);
}

TEST_P(SqliteTransactional, DroppedTransactionRollsBack) {
  ASSERT_TRUE(store_->claim(claim_req("dropped", "tx", clock_->now())).ok());
  {
    auto t = store_->begin(clock_->now());
    ASSERT_TRUE(t.ok());
  }
  // The store is usable again (the lock was released) and nothing was written.
  auto r = record("dropped");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, RecordState::kInProgress);
  EXPECT_TRUE(store_->commit(commit_req("dropped", "tx", clock_->now())).ok());
}

// One transaction per batch: the handlers' rows and records commit together, a
// failed handler's row rolls back alone (its savepoint), and the batch COMMITs once.
TEST_P(SqliteTransactional, ABatchCommitsOnceAndAFailedHandlerRollsBackAlone) {
  EXPECT_TRUE(store_->capabilities().batch_transactions);
  int commits = 0;
  hook_ = [&commits](sqlite3* db) {
    sqlite3_commit_hook(
        db, [](void* n) { return ++*static_cast<int*>(n), 0; }, &commits);
  };
  const std::vector<Order> batch = {{"b1", "kiwi"}, {"b2", "lime", true}, {"b3", "date"}, {"b4", "fig", false, true}};
  const std::vector<Decision> ds = consumer_->process_batch(batch);
  ASSERT_EQ(ds.size(), 4u);
  EXPECT_EQ(ds[0].reason, Reason::kProcessed) << ds[0].detail;
  EXPECT_EQ(ds[1].reason, Reason::kHandlerFailed);
  EXPECT_EQ(ds[2].reason, Reason::kProcessed) << ds[2].detail;
  EXPECT_EQ(ds[3].reason, Reason::kProcessed) << ds[3].detail;
  EXPECT_EQ(commits, 1) << "one COMMIT for the batch";
  hook_ = nullptr;
  EXPECT_EQ(record("b1")->state, RecordState::kCompleted);
  auto failed = record("b2");
  EXPECT_TRUE(!failed || failed->state == RecordState::kPending);
  EXPECT_EQ(count_orders(), "3");
  EXPECT_EQ(count_orders("sku = 'lime'"), "0");
  // The failed one runs again on its own; the others are duplicates.
  const std::vector<Order> again = {{"b1", "kiwi"}, {"b2", "lime"}};
  const std::vector<Decision> ds2 = consumer_->process_batch(again);
  EXPECT_EQ(ds2[0].reason, Reason::kDuplicate);
  EXPECT_EQ(ds2[1].reason, Reason::kProcessed) << ds2[1].detail;
  EXPECT_EQ(count_orders(), "4");
}

TEST_P(SqliteTransactional, AFailedBatchCommitLandsNothingAndRetriesEveryMessage) {
  fail_at_ = "sqlite.batch.commit";
  const std::vector<Order> batch = {{"c1", "plum"}, {"c2", "pear"}, {"c3", "sloe"}};
  const std::vector<Decision> ds = consumer_->process_batch(batch);
  fail_at_.clear();
  for (const Decision& d : ds) {
    EXPECT_EQ(d.action, Action::kRetry);
    EXPECT_EQ(d.reason, Reason::kStoreUnavailable);
  }
  for (const char* id : {"c1", "c2", "c3"}) {
    auto r = record(id);
    EXPECT_TRUE(!r || r->state != RecordState::kCompleted) << id;
  }
  EXPECT_EQ(count_orders(), "0");
  // The redeliveries are processed, once each.
  for (const Decision& d : consumer_->process_batch(batch)) EXPECT_EQ(d.reason, Reason::kProcessed) << d.detail;
  EXPECT_EQ(count_orders(), "3");
}

TEST(SqliteConnection, NullWithoutASqliteTransaction) {
  HandlerContext bare;
  EXPECT_EQ(connection(bare), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Leases, SqliteTransactional, ::testing::Values(LeaseMode::kLocal, LeaseMode::kShared),
                         lease_mode_name);

}  // namespace
}  // namespace idem::sqlite::testing

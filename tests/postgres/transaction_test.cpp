// Transactional mode on PostgreSQL: the handler's own writes and the dedup record
// commit together; a failure, a fault inside the commit or a connection killed
// mid-transaction leaves neither.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "idem/consumer.hpp"
#include "idem/postgres_store.hpp"
#include "pg_test_util.hpp"

namespace idem::postgres_test {
namespace {

struct Order {
  std::string id;
  std::string sku;
  bool fail = false;
  bool extend = false;
  bool kill = false;  // the handler's connection is terminated after its write
};

class PostgresTransactional : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(shared_server(), nullptr);
    schema_ = fresh_schema();
    ASSERT_EQ(raw_.query("CREATE SCHEMA " + schema_ + "; CREATE TABLE " + schema_ +
                         ".orders(sku text NOT NULL, msg text NOT NULL)"),
              "");
    postgres::Options o;
    o.connection = shared_server()->connection();
    o.schema = schema_;
    o.fault_hook = [this](std::string_view point) -> Status {
      return point == fail_at_ ? unavailable("injected at " + fail_at_) : ok_status();
    };
    auto s = postgres::open(o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    store_ = *s;
    ConsumerOptions co;
    co.store = store_;
    co.transactional = true;
    co.owner = "tx";
    co.clock = clock_;
    co.purge_every = 0;
    Extractors<Order> ex;
    ex.id = [](const Order& m) { return std::optional<std::string_view>(m.id); };
    auto c = Consumer<Order>::create(co, ex, [this](const Order& m, HandlerContext& ctx) { return handle(m, ctx); });
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    consumer_.emplace(std::move(c).value());
  }
  void TearDown() override {
    consumer_.reset();
    store_.reset();
    raw_.query("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE");
  }

  HandlerResult handle(const Order& m, HandlerContext& ctx) {
    PGconn* db = postgres::connection(ctx);
    if (!db) return HandlerResult::fail("no connection");
    const std::string sql = "INSERT INTO " + schema_ + ".orders(sku, msg) VALUES ($1, $2)";
    const char* values[2] = {m.sku.c_str(), m.id.c_str()};
    PGresult* r = PQexecParams(db, sql.c_str(), 2, nullptr, values, nullptr, nullptr, 0);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    const std::string err = PQresultErrorMessage(r);
    PQclear(r);
    if (!ok) return HandlerResult::fail(err);
    if (m.extend) {
      if (Status s = ctx.extend_lease(Duration(60'000)); !s.ok()) return HandlerResult::fail(s.to_string());
    }
    if (m.kill) {
      const std::string pid = std::to_string(PQbackendPID(db));
      if (raw_.query("SELECT pg_terminate_backend(" + pid + ")") != "t") return HandlerResult::fail("not killed");
    }
    if (m.fail) return HandlerResult::fail("the handler failed after writing");
    return HandlerResult::ok("shipped " + m.sku);
  }

  std::string count_orders(const std::string& where = "true") {
    return raw_.query("SELECT count(*) FROM " + schema_ + ".orders WHERE " + where);
  }
  std::optional<RecordInfo> record(const std::string& id) {
    auto r = store_->inspect(id, clock_->now());
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? *r : std::nullopt;
  }

  Raw raw_;
  std::string schema_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Store> store_;
  std::optional<Consumer<Order>> consumer_;
  std::string fail_at_;
};

TEST_F(PostgresTransactional, HandlerWritesAndRecordLandTogether) {
  Decision d = consumer_->process({"m1", "apple"});
  EXPECT_EQ(d.reason, Reason::kProcessed) << d.detail;
  EXPECT_EQ(record("m1")->state, RecordState::kCompleted);
  EXPECT_EQ(record("m1")->result, "shipped apple");
  EXPECT_EQ(consumer_->process({"m1", "apple"}).reason, Reason::kDuplicate);
  EXPECT_EQ(count_orders(), "1");
}

TEST_F(PostgresTransactional, HandlerFailureRollsBackItsRowAndLeavesNoRecord) {
  Decision d = consumer_->process({"m2", "pear", true});
  EXPECT_EQ(d.action, Action::kRetry);
  auto r = record("m2");
  EXPECT_TRUE(!r || r->state == RecordState::kPending) << "the failed attempt left a done record";
  EXPECT_EQ(count_orders(), "0");
  EXPECT_EQ(consumer_->process({"m2", "pear"}).reason, Reason::kProcessed);
  EXPECT_EQ(count_orders("sku = 'pear'"), "1");
}

TEST_F(PostgresTransactional, FaultInsideCommitRollsBackHandlerRowAndRecord) {
  for (const std::string point : {"commit.before_write", "commit.after_record"}) {
    fail_at_ = point;
    const std::string id = "f-" + point;
    Decision d = consumer_->process({id, "plum"});
    EXPECT_EQ(d.action, Action::kRetry) << point;
    auto r = record(id);
    EXPECT_TRUE(!r || r->state == RecordState::kPending) << point;
  }
  fail_at_.clear();
  EXPECT_EQ(count_orders(), "0");
}

TEST_F(PostgresTransactional, AConnectionKilledMidTransactionIsARetryAndNoHalfCommit) {
  Decision d = consumer_->process({"k1", "cherry", false, false, true});
  EXPECT_EQ(d.action, Action::kRetry) << d.detail;
  auto r = record("k1");
  EXPECT_TRUE(!r || r->state != RecordState::kCompleted) << "a done record without the handler's row";
  EXPECT_EQ(count_orders(), "0");
  // The pool drops the dead connection; the redelivery runs on a fresh one.
  clock_->advance(Duration(120'000));
  Decision again = consumer_->process({"k1", "cherry"});
  EXPECT_EQ(again.reason, Reason::kProcessed) << again.detail;
  EXPECT_EQ(count_orders(), "1");
  EXPECT_EQ(record("k1")->state, RecordState::kCompleted);
}

TEST_F(PostgresTransactional, StoreCallsFromTheHandlerJoinTheTransaction) {
  Decision d = consumer_->process({"m3", "fig", false, true});
  EXPECT_EQ(d.reason, Reason::kProcessed) << d.detail;
  EXPECT_EQ(record("m3")->state, RecordState::kCompleted);
  EXPECT_EQ(count_orders(), "1");
}

TEST_F(PostgresTransactional, BeginWhileATransactionIsOpenIsRefusedAndADroppedOneRollsBack) {
  auto t = store_->begin(clock_->now());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(store_->begin(clock_->now()).status().code(), StatusCode::kFailedPrecondition);
  t->reset();  // dropped: rolled back
  auto again = store_->begin(clock_->now());
  EXPECT_TRUE(again.ok()) << again.status().to_string();
}

TEST_F(PostgresTransactional, ABatchCommitsOnceAndAFailedHandlerRollsBackAlone) {
  EXPECT_TRUE(store_->capabilities().batch_transactions);
  const std::vector<Order> batch = {{"b1", "kiwi"}, {"b2", "lime", true}, {"b3", "date"}, {"b4", "fig", false, true}};
  const std::vector<Decision> ds = consumer_->process_batch(batch);
  ASSERT_EQ(ds.size(), 4u);
  EXPECT_EQ(ds[0].reason, Reason::kProcessed) << ds[0].detail;
  EXPECT_EQ(ds[1].reason, Reason::kHandlerFailed);
  EXPECT_EQ(ds[2].reason, Reason::kProcessed) << ds[2].detail;
  EXPECT_EQ(ds[3].reason, Reason::kProcessed) << ds[3].detail;
  EXPECT_EQ(record("b1")->state, RecordState::kCompleted);
  EXPECT_EQ(count_orders(), "3");
  EXPECT_EQ(count_orders("sku = 'lime'"), "0");
  const std::vector<Order> again = {{"b1", "kiwi"}, {"b2", "lime"}};
  const std::vector<Decision> ds2 = consumer_->process_batch(again);
  EXPECT_EQ(ds2[0].reason, Reason::kDuplicate);
  EXPECT_EQ(ds2[1].reason, Reason::kProcessed) << ds2[1].detail;
  EXPECT_EQ(count_orders(), "4");
}

TEST_F(PostgresTransactional, ABatchWhoseConnectionIsKilledCommitsNothing) {
  const std::vector<Order> batch = {{"c1", "kiwi"}, {"c2", "lime", false, false, true}, {"c3", "date"}};
  const std::vector<Decision> ds = consumer_->process_batch(batch);
  ASSERT_EQ(ds.size(), 3u);
  for (const Decision& d : ds) EXPECT_NE(d.reason, Reason::kProcessed) << d.detail;
  EXPECT_EQ(count_orders(), "0");
  for (const char* id : {"c1", "c2", "c3"}) {
    auto r = record(id);
    EXPECT_TRUE(!r || r->state != RecordState::kCompleted) << id;
  }
}

}  // namespace
}  // namespace idem::postgres_test

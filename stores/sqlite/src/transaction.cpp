// Transactional mode: begin() and the StoreTransaction it returns.
#include <string>

#include "sqlite_store_impl.hpp"

namespace idem::sqlite::detail {
namespace {

// Holds the store's lock and an open BEGIN IMMEDIATE transaction on its connection
// (or, nested in a batch, a SAVEPOINT) from begin() until commit(), rollback() or
// destruction.
class SqliteTransaction final : public StoreTransaction {
 public:
  SqliteTransaction(std::shared_ptr<SqliteStore> store, std::unique_lock<std::recursive_mutex> lock, bool nested)
      : store_(std::move(store)), lock_(std::move(lock)), nested_(nested) {}
  ~SqliteTransaction() override { rollback(); }

  Status commit(const CommitRequest& request) override {
    if (!lock_.owns_lock()) return failed_precondition("sqlite: the transaction is already over");
    Status s = nested_ ? store_->commit_nested(request) : store_->commit_transaction(request);
    lock_.unlock();
    return s;
  }

  void rollback() override {
    if (!lock_.owns_lock()) return;
    if (nested_) {
      store_->rollback_nested();
    } else {
      store_->rollback_transaction();
    }
    lock_.unlock();
  }

  // The connection while the transaction is open, else null.
  sqlite3* connection() const { return lock_.owns_lock() ? store_->db() : nullptr; }

 private:
  std::shared_ptr<SqliteStore> store_;
  std::unique_lock<std::recursive_mutex> lock_;
  const bool nested_;
};

// Holds the store's lock and a BEGIN IMMEDIATE transaction for many handlers.
class SqliteBatchTransaction final : public BatchTransaction {
 public:
  SqliteBatchTransaction(std::shared_ptr<SqliteStore> store, std::unique_lock<std::recursive_mutex> lock)
      : store_(std::move(store)), lock_(std::move(lock)) {}
  ~SqliteBatchTransaction() override { rollback(); }

  Status commit() override {
    if (!lock_.owns_lock()) return failed_precondition("sqlite: the batch transaction is already over");
    Status s = store_->commit_batch_transaction();
    store_->end_batch();
    lock_.unlock();
    return s;
  }

  void rollback() override {
    if (!lock_.owns_lock()) return;
    store_->rollback_transaction();
    store_->end_batch();
    lock_.unlock();
  }

 private:
  std::shared_ptr<SqliteStore> store_;
  std::unique_lock<std::recursive_mutex> lock_;
};

}  // namespace

StatusOr<std::unique_ptr<StoreTransaction>> SqliteStore::begin(TimePoint) {
  std::unique_lock lock(mu_);
  if (in_batch_) {  // only this thread can be here: it holds mu_ for the batch
    if (Status s = run(savepoint_, "starting a savepoint on"); !s.ok()) return s;
    return std::unique_ptr<StoreTransaction>(new SqliteTransaction(shared_from_this(), std::move(lock), true));
  }
  if (sqlite3_get_autocommit(conn_.db) == 0)
    return failed_precondition("sqlite: begin: a transaction is already open on this thread");
  if (Status s = run(begin_immediate_, "starting a transaction on"); !s.ok()) return s;
  return std::unique_ptr<StoreTransaction>(new SqliteTransaction(shared_from_this(), std::move(lock), false));
}

StatusOr<std::unique_ptr<BatchTransaction>> SqliteStore::begin_batch(TimePoint) {
  std::unique_lock lock(mu_);
  if (sqlite3_get_autocommit(conn_.db) == 0)
    return failed_precondition("sqlite: begin_batch: a transaction is already open on this thread");
  if (Status s = run(begin_immediate_, "starting a batch transaction on"); !s.ok()) return s;
  in_batch_ = true;
  return std::unique_ptr<BatchTransaction>(new SqliteBatchTransaction(shared_from_this(), std::move(lock)));
}

void SqliteStore::rollback_nested() {
  if (sqlite3_get_autocommit(conn_.db) != 0) return;
  (void)run(rollback_savepoint_, "rolling back to a savepoint on");
  (void)run(release_savepoint_, "releasing a savepoint on");
}

Status SqliteStore::commit_batch_transaction() {
  if (sqlite3_get_autocommit(conn_.db) != 0)
    return failed_precondition("sqlite: the batch transaction was ended by a handler; nothing was committed");
  Status s = fault("sqlite.batch.commit");
  if (s.ok()) s = run(commit_, "committing a batch to");
  if (!s.ok()) rollback_transaction();
  return s;
}

Status SqliteStore::commit_transaction(const CommitRequest& q) { return commit_in_transaction(q, false); }

Status SqliteStore::commit_nested(const CommitRequest& q) { return commit_in_transaction(q, true); }

// Writes the commit, then COMMITs (nested: RELEASEs the savepoint); on failure rolls
// back the transaction (nested: to the savepoint).
Status SqliteStore::commit_in_transaction(const CommitRequest& q, bool nested) {
  if (sqlite3_get_autocommit(conn_.db) != 0)
    return failed_precondition(
        "sqlite: the transaction was ended by the handler (COMMIT or ROLLBACK through the connection); "
        "nothing was committed by idem");
  Status s = check_commit(q);
  if (s.ok()) s = commit_with_entity(q);
  if (s.ok()) s = nested ? run(release_savepoint_, "releasing a savepoint on") : run(commit_, "committing to");
  if (!s.ok()) {
    if (nested) {
      rollback_nested();
    } else {
      rollback_transaction();
    }
    return s;
  }
  forget_lease(q.id);
  return ok_status();
}

void SqliteStore::rollback_transaction() {
  if (sqlite3_get_autocommit(conn_.db) == 0) (void)run(rollback_, "rolling back");
}

}  // namespace idem::sqlite::detail

namespace idem::sqlite {

sqlite3* connection(const HandlerContext& ctx) {
  auto* t = dynamic_cast<detail::SqliteTransaction*>(ctx.transaction());
  return t ? t->connection() : nullptr;
}

}  // namespace idem::sqlite

// Transactional mode: begin(), begin_batch() and the transactions they return.
#include <string>

#include "postgres_store_impl.hpp"

namespace idem::postgres::detail {
namespace {

// An open transaction (BEGIN) on a connection of its own, or, nested in a batch, a
// SAVEPOINT on the batch's connection; from begin() until commit(), rollback() or
// destruction. Bound to the thread that opened it.
class PgTransaction final : public StoreTransaction {
 public:
  // Top level: owns `owned`; nested: `conn` is the batch's.
  PgTransaction(std::shared_ptr<PgStore> store, std::unique_ptr<Conn> owned, Conn* conn)
      : store_(std::move(store)), owned_(std::move(owned)), conn_(conn) {}
  ~PgTransaction() override { rollback(); }

  Status commit(const CommitRequest& q) override {
    if (conn_ == nullptr) return failed_precondition("postgres: the transaction is already over");
    Status s = check_commit(q);
    if (s.ok() && !conn_->in_transaction())
      s = failed_precondition(
          "postgres: the transaction was ended by the handler (COMMIT or ROLLBACK through the connection); "
          "nothing was committed by idem");
    if (s.ok()) s = store_->commit_in(*conn_, q);
    if (s.ok()) s = conn_->exec(nested() ? "RELEASE SAVEPOINT idem_tx" : "COMMIT");
    if (!s.ok()) {
      rollback();
      return s;
    }
    end();
    return ok_status();
  }

  void rollback() override {
    if (conn_ == nullptr) return;
    if (!conn_->broken() && conn_->in_transaction()) {
      if (nested()) {
        (void)conn_->exec("ROLLBACK TO SAVEPOINT idem_tx");
        (void)conn_->exec("RELEASE SAVEPOINT idem_tx");
      } else {
        (void)conn_->exec("ROLLBACK");
      }
    }
    end();
  }

  PGconn* connection() const { return conn_ ? conn_->get() : nullptr; }

 private:
  bool nested() const { return owned_ == nullptr; }
  void end() {
    if (!nested()) {
      store_->unbind();
      store_->give_back(std::move(owned_));
    }
    conn_ = nullptr;
  }

  std::shared_ptr<PgStore> store_;
  std::unique_ptr<Conn> owned_;
  Conn* conn_;
};

// One transaction for many handlers, on a connection of its own bound to the thread.
class PgBatchTransaction final : public BatchTransaction {
 public:
  PgBatchTransaction(std::shared_ptr<PgStore> store, std::unique_ptr<Conn> conn)
      : store_(std::move(store)), conn_(std::move(conn)) {}
  ~PgBatchTransaction() override { rollback(); }

  Status commit() override {
    if (!conn_) return failed_precondition("postgres: the batch transaction is already over");
    Status s =
        conn_->in_transaction()
            ? store_->fault("postgres.batch.commit")
            : failed_precondition("postgres: the batch transaction was ended by a handler; nothing was committed");
    if (s.ok()) s = conn_->exec("COMMIT");
    if (!s.ok()) {
      rollback();
      return s;
    }
    end();
    return ok_status();
  }

  void rollback() override {
    if (!conn_) return;
    if (!conn_->broken() && conn_->in_transaction()) (void)conn_->exec("ROLLBACK");
    end();
  }

 private:
  void end() {
    store_->unbind();
    store_->give_back(std::move(conn_));
  }

  std::shared_ptr<PgStore> store_;
  std::unique_ptr<Conn> conn_;
};

}  // namespace

StatusOr<std::unique_ptr<StoreTransaction>> PgStore::begin(TimePoint) {
  if (auto [conn, batch] = bound(); conn != nullptr) {
    if (!batch) return failed_precondition("postgres: begin: a transaction is already open on this thread");
    if (Status s = conn->exec("SAVEPOINT idem_tx"); !s.ok()) return s;
    return std::unique_ptr<StoreTransaction>(new PgTransaction(shared_from_this(), nullptr, conn));
  }
  auto c = acquire();
  if (!c.ok()) return c.status();
  if (Status s = (*c)->exec("BEGIN"); !s.ok()) return s;
  std::unique_ptr<Conn> owned = c->take();
  Conn* raw = owned.get();
  bind(raw, false);
  return std::unique_ptr<StoreTransaction>(new PgTransaction(shared_from_this(), std::move(owned), raw));
}

StatusOr<std::unique_ptr<BatchTransaction>> PgStore::begin_batch(TimePoint) {
  if (bound().first != nullptr)
    return failed_precondition("postgres: begin_batch: a transaction is already open on this thread");
  auto c = acquire();
  if (!c.ok()) return c.status();
  if (Status s = (*c)->exec("BEGIN"); !s.ok()) return s;
  std::unique_ptr<Conn> owned = c->take();
  bind(owned.get(), true);
  return std::unique_ptr<BatchTransaction>(new PgBatchTransaction(shared_from_this(), std::move(owned)));
}

}  // namespace idem::postgres::detail

namespace idem::postgres {

PGconn* connection(const HandlerContext& ctx) {
  auto* t = dynamic_cast<detail::PgTransaction*>(ctx.transaction());
  return t ? t->connection() : nullptr;
}

}  // namespace idem::postgres

// Transactional mode: the handler's writes and the dedup record in one WriteBatch.
#include "rocksdb_store_impl.hpp"

namespace idem::rocksdb::detail {
namespace {

class RocksTransaction final : public StoreTransaction, public Batch {
 public:
  RocksTransaction(RocksStore& store, std::function<void(const CommitRequest&)> before_commit)
      : store_(store), before_commit_(std::move(before_commit)) {}

  Status commit(const CommitRequest& request) override {
    if (finished_) return failed_precondition("rocksdb: the transaction is already finished");
    finished_ = true;
    if (before_commit_) before_commit_(request);
    Status s = store_.commit_into(batch_, request);
    batch_.Clear();
    return s;
  }

  void rollback() override {
    batch_.Clear();
    finished_ = true;
  }

  Status put(std::string_view cf, std::string_view key, std::string_view value) override {
    auto h = handle(cf);
    if (!h.ok()) return h.status();
    ++writes_;
    return to_status(batch_.Put(*h, slice(key), slice(value)), "batch put");
  }

  Status del(std::string_view cf, std::string_view key) override {
    auto h = handle(cf);
    if (!h.ok()) return h.status();
    ++writes_;
    return to_status(batch_.Delete(*h, slice(key)), "batch delete");
  }

  StatusOr<std::optional<std::string>> get(std::string_view cf, std::string_view key) const override {
    auto h = handle(cf);
    if (!h.ok()) return h.status();
    std::string v;
    auto s = store_.db().Get(::rocksdb::ReadOptions(), *h, slice(key), &v);
    if (s.IsNotFound()) return std::optional<std::string>();
    if (!s.ok()) return to_status(s, "batch get");
    return std::optional<std::string>(std::move(v));
  }

  std::size_t size() const override { return writes_; }

 private:
  static ::rocksdb::Slice slice(std::string_view s) { return {s.data(), s.size()}; }

  StatusOr<::rocksdb::ColumnFamilyHandle*> handle(std::string_view cf) const {
    if (finished_) return failed_precondition("rocksdb: the transaction is already finished");
    auto* h = store_.user_cf(cf);
    if (h == nullptr)
      return invalid_argument("rocksdb: column family \"" + std::string(cf) +
                              "\" is not a user column family (use \"default\" or one named in "
                              "Options::user_column_families)");
    return h;
  }

  RocksStore& store_;
  std::function<void(const CommitRequest&)> before_commit_;
  ::rocksdb::WriteBatch batch_;
  std::size_t writes_ = 0;
  bool finished_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<StoreTransaction>> RocksStore::begin_observed(
    TimePoint now, std::function<void(const CommitRequest&)> before_commit) {
  observe(to_unix_ms(now));
  return std::unique_ptr<StoreTransaction>(std::make_unique<RocksTransaction>(*this, std::move(before_commit)));
}

StatusOr<std::unique_ptr<StoreTransaction>> RocksStore::begin(TimePoint now) { return begin_observed(now, nullptr); }

}  // namespace idem::rocksdb::detail

namespace idem::rocksdb {

Batch* batch(const HandlerContext& ctx) { return dynamic_cast<Batch*>(ctx.transaction()); }

}  // namespace idem::rocksdb

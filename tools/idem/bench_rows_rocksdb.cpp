// `idem bench` on rocksdb: the raw primitive is Get then Put per id, batched as one
// MultiGet and one WriteBatch, in a database of its own beside the store's
// (PATH.raw-bench, destroyed afterwards), with the options idem::rocksdb uses.
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <stdexcept>
#include <string>
#include <unordered_set>

#include "bench_rows.hpp"
#include "idem/backend/store_uri.hpp"

namespace idem::cli {
namespace {

const std::function<void(const Msg&)> noop_handler = [](const Msg&) {};

// A value of the size of idem's record without result or fingerprint (11 bytes).
const std::string kValue(11, 'v');

void check(const ::rocksdb::Status& s, const std::string& what) {
  if (!s.ok()) throw std::runtime_error("raw rocksdb: " + what + ": " + s.ToString());
}

// A fresh database, destroyed on destruction.
class RawRocksDb {
 public:
  explicit RawRocksDb(std::string path) : path_(std::move(path)) {
    options_.create_if_missing = true;
    options_.write_buffer_size = 4 << 20;
    options_.memtable_prefix_bloom_size_ratio = 0.1;
    options_.memtable_whole_key_filtering = true;
    options_.max_background_jobs = 2;
    ::rocksdb::BlockBasedTableOptions t;
    t.block_cache = ::rocksdb::NewLRUCache(64 << 20);
    t.filter_policy.reset(::rocksdb::NewBloomFilterPolicy(10, false));
    options_.table_factory.reset(::rocksdb::NewBlockBasedTableFactory(t));
    (void)::rocksdb::DestroyDB(path_, options_);
    ::rocksdb::DB* db = nullptr;
    check(::rocksdb::DB::Open(options_, path_, &db), "open " + path_);
    db_.reset(db);
  }
  ~RawRocksDb() {
    db_.reset();
    (void)::rocksdb::DestroyDB(path_, options_);
  }
  RawRocksDb(const RawRocksDb&) = delete;
  RawRocksDb& operator=(const RawRocksDb&) = delete;

  // Get: true iff present.
  bool contains(const std::string& id) {
    const ::rocksdb::Status s = db_->Get(::rocksdb::ReadOptions(), id, &value_);
    if (!s.ok() && !s.IsNotFound()) check(s, "get");
    return s.ok();
  }
  void put(const std::string& id) { check(db_->Put(::rocksdb::WriteOptions(), id, kValue), "put"); }

  // One MultiGet of ms, then one WriteBatch of the new ones (a repeat within ms counts
  // as a duplicate of its first copy).
  void batch(std::span<const Msg> ms, BenchCounts& c) {
    keys_.clear();
    for (const Msg& m : ms) keys_.emplace_back(m.id);
    values_.resize(ms.size());
    statuses_.resize(ms.size());
    db_->MultiGet(::rocksdb::ReadOptions(), db_->DefaultColumnFamily(), keys_.size(), keys_.data(), values_.data(),
                  statuses_.data());
    ::rocksdb::WriteBatch wb;
    std::unordered_set<std::string_view> fresh;
    for (std::size_t i = 0; i < ms.size(); ++i) {
      values_[i].Reset();
      if (statuses_[i].ok() || !fresh.insert(ms[i].id).second) {
        ++c.duplicates;
        continue;
      }
      check(wb.Put(keys_[i], kValue), "batch put");
      ++c.processed;
    }
    check(db_->Write(::rocksdb::WriteOptions(), &wb), "write batch");
  }

 private:
  std::string path_;
  ::rocksdb::Options options_;
  std::unique_ptr<::rocksdb::DB> db_;
  std::string value_;
  std::vector<::rocksdb::Slice> keys_;
  std::vector<::rocksdb::PinnableSlice> values_;
  std::vector<::rocksdb::Status> statuses_;
};

std::string raw_path(const BenchSetup& s) {
  auto uri = StoreUri::parse(s.store_uri);
  const std::string base = uri.ok() && !uri->body.empty() ? uri->body : "/tmp/idem-bench-rocksdb";
  return base + ".raw-bench";
}

// raw: Get, then Put if absent.
BenchRow get_put(const BenchSetup& s) {
  auto db = std::make_shared<RawRocksDb>(raw_path(s));
  BenchRow row{"raw", 1, nullptr, db};
  row.step = [d = db.get()](std::span<const Msg> ms, const Msg*, BenchCounts& c) {
    for (const Msg& m : ms) {
      if (d->contains(m.id)) {
        ++c.duplicates;
        continue;
      }
      d->put(m.id);
      ++c.processed;
    }
  };
  return row;
}

BenchRow batched(const BenchSetup& s) {
  auto db = std::make_shared<RawRocksDb>(raw_path(s));
  BenchRow row{"raw_batch", s.batch, nullptr, db};
  row.step = [d = db.get()](std::span<const Msg> ms, const Msg*, BenchCounts& c) { d->batch(ms, c); };
  return row;
}

// naive: Get, handler, Put.
BenchRow naive(const BenchSetup& s) {
  auto db = std::make_shared<RawRocksDb>(raw_path(s));
  BenchRow row{"naive", 1, nullptr, db};
  row.step = [d = db.get()](std::span<const Msg> ms, const Msg*, BenchCounts& c) {
    for (const Msg& m : ms) {
      if (d->contains(m.id)) {
        ++c.duplicates;
        continue;
      }
      noop_handler(m);
      d->put(m.id);
      ++c.processed;
    }
  };
  return row;
}

}  // namespace

std::vector<RowFactory> rocksdb_rows(const BenchSetup& s) {
  return {[s] { return get_put(s); }, [s] { return batched(s); }, [s] { return naive(s); }};
}

}  // namespace idem::cli

// Opening a RocksDB store: option checks, layout checks, error mapping.
#include <rocksdb/cache.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/options.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <set>

#include "rocksdb_store_impl.hpp"

namespace idem::rocksdb {
namespace {

namespace fs = std::filesystem;
using detail::kBufferCf;
using detail::kDoneCf;
using detail::kEntitiesCf;
using detail::kMetaCf;
using detail::kOutboxCf;
using detail::kOutboxSentCf;
using detail::kRetriesCf;

// RocksDB's info log, appended to <path>/LOG. It takes the place of RocksDB's own
// file logger, whose file writer asserts (aborting the process in builds with
// assertions, such as Debian's) on the first line logged after a write of the log
// failed, e.g. on a full disk: a line that cannot be written is dropped instead. The
// file is created with the first line, so an open that fails early leaves none.
class InfoLogFile : public ::rocksdb::Logger {
 public:
  InfoLogFile(std::string path, ::rocksdb::InfoLogLevel level) : ::rocksdb::Logger(level), path_(std::move(path)) {}
  ~InfoLogFile() override {
    if (file_ != nullptr) std::fclose(file_);
  }
  using ::rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    if (file_ == nullptr) file_ = std::fopen(path_.c_str(), "a");
    if (file_ == nullptr) return;
    std::vfprintf(file_, format, ap);
    std::fputc('\n', file_);
    if (std::fflush(file_) != 0) std::clearerr(file_);
  }

 private:
  const std::string path_;
  std::FILE* file_ = nullptr;
};

constexpr std::size_t kMiB = 1024 * 1024;
constexpr double kMemtableBloomRatio = 0.1;      // share of the memtable for its Bloom filter
constexpr std::size_t kEntityHashPrefix = 64;    // idem_entities memtable: bytes of the key hashed
constexpr std::size_t kEntityBuckets = 1 << 16;  // idem_entities memtable: hash buckets

std::string quoted(const std::string& p) { return "\"" + p + "\""; }

// Keeps the handle of column family `name` in its member of `store` (a user column
// family's in user_cfs).
void keep_handle(detail::RocksStore& store, const std::string& name, ::rocksdb::ColumnFamilyHandle* h) {
  if (name == kMetaCf)
    store.meta_cf_ = h;
  else if (name == kDoneCf)
    store.done_cf_ = h;
  else if (name == kRetriesCf)
    store.retries_cf_ = h;
  else if (name == kEntitiesCf)
    store.entities_cf_ = h;
  else if (name == kBufferCf)
    store.buffer_cf_ = h;
  else if (name == kOutboxCf)
    store.outbox_cf_ = h;
  else if (name == kOutboxSentCf)
    store.outbox_sent_cf_ = h;
  else if (name.rfind("idem_", 0) != 0)
    store.user_cfs.emplace(name, h);
}

// True iff column family cf holds no key.
bool is_empty(::rocksdb::DB& db, ::rocksdb::ColumnFamilyHandle* cf) {
  std::unique_ptr<::rocksdb::Iterator> it(db.NewIterator(::rocksdb::ReadOptions(), cf));
  it->SeekToFirst();
  return !it->Valid() && it->status().ok();
}

Status check_options(const Options& o) {
  if (o.path.empty()) return invalid_argument("rocksdb: the path is empty");
  if (o.lease_stripes == 0) return invalid_argument("rocksdb: lease_stripes must be > 0");
  if (o.bloom_bits_per_key < 0) return invalid_argument("rocksdb: bloom_bits_per_key must be >= 0");
  if (o.write_buffer_mib == 0) return invalid_argument("rocksdb: write_buffer_mib must be > 0");
  std::set<std::string> seen;
  for (const auto& cf : o.user_column_families) {
    if (cf.empty()) return invalid_argument("rocksdb: a user column family name is empty");
    if (cf.rfind("idem_", 0) == 0)
      return invalid_argument("rocksdb: user column family \"" + cf + "\": names starting with idem_ are reserved");
    if (cf == ::rocksdb::kDefaultColumnFamilyName || !seen.insert(cf).second)
      return invalid_argument("rocksdb: user column family \"" + cf + "\" is named twice");
  }
  return ok_status();
}

// A failed DB::Open, explained.
Status open_error(const ::rocksdb::Status& s, const std::string& path) {
  const std::string m = s.ToString();
  if (s.IsIOError() && (m.find("lock") != std::string::npos || m.find("LOCK") != std::string::npos))
    return unavailable("rocksdb: " + quoted(path) +
                       " is locked by another process or handle (its LOCK file); only one may open it: " + m);
  if (s.IsIOError())
    return unavailable("rocksdb: cannot open " + quoted(path) +
                       " for writing (missing permission or read-only directory?): " + m);
  if (s.IsCorruption()) return data_loss("rocksdb: " + quoted(path) + " is corrupt: " + m);
  return detail::to_status(s, "open " + quoted(path));
}

}  // namespace

StatusOr<std::shared_ptr<RocksDbStore>> open(const Options& o) {
  if (Status s = check_options(o); !s.ok()) return s;
  std::error_code ec;
  const auto st = fs::status(o.path, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    return invalid_argument("rocksdb: " + quoted(o.path) + " exists and is not a directory (a RocksDB store is one)");
  bool existing = fs::exists(fs::path(o.path) / "CURRENT", ec);

  auto store = std::make_shared<detail::RocksStore>();
  store->options = o;
  store->filter = std::make_shared<detail::ExpiryFilter>();
  store->write_options.sync = o.sync;

  ::rocksdb::DBOptions dbo;
  dbo.create_if_missing = !existing;
  dbo.create_missing_column_families = true;
  dbo.max_background_jobs = 2;
  dbo.keep_log_file_num = 4;
  dbo.info_log_level = ::rocksdb::InfoLogLevel::WARN_LEVEL;
  dbo.info_log = std::make_shared<InfoLogFile>((fs::path(o.path) / "LOG").string(), dbo.info_log_level);
  // Required by inplace_update_support (idem_entities, below). The memtable inserts
  // of a write group are then made by its leader alone: measured no slower for
  // dedup with 4 writer threads.
  dbo.allow_concurrent_memtable_write = false;

  ::rocksdb::BlockBasedTableOptions table;
  table.block_cache = ::rocksdb::NewLRUCache(o.block_cache_mib * kMiB);
  if (o.bloom_bits_per_key > 0) table.filter_policy.reset(::rocksdb::NewBloomFilterPolicy(o.bloom_bits_per_key, false));
  std::shared_ptr<::rocksdb::TableFactory> factory(::rocksdb::NewBlockBasedTableFactory(table));
  ::rocksdb::ColumnFamilyOptions plain;
  plain.write_buffer_size = o.write_buffer_mib * kMiB;
  plain.table_factory = factory;
  ::rocksdb::ColumnFamilyOptions expiring = plain;
  expiring.compaction_filter = store->filter.get();
  // Most claims are of new ids: a memtable Bloom filter answers "absent" without a
  // skiplist search.
  expiring.memtable_prefix_bloom_size_ratio = kMemtableBloomRatio;
  expiring.memtable_whole_key_filtering = true;

  // An entity record is rewritten by every commit of its key: updated in place, the
  // memtable holds one entry per key instead of one per commit, and the write is a
  // short search instead of an insert into a large skiplist. A hash-bucketed memtable
  // (by the key's first kEntityHashPrefix bytes) shortens that search further.
  // idem_entities is only read by key (Get, MultiGet), never iterated in order, which
  // is what such a memtable cannot do cheaply.
  ::rocksdb::ColumnFamilyOptions entities = plain;
  entities.inplace_update_support = true;
  entities.prefix_extractor.reset(::rocksdb::NewCappedPrefixTransform(kEntityHashPrefix));
  entities.memtable_factory.reset(::rocksdb::NewHashLinkListRepFactory(kEntityBuckets));

  std::vector<std::string> names;
  if (existing) {
    auto s = ::rocksdb::DB::ListColumnFamilies(dbo, o.path, &names);
    if (!s.ok()) return open_error(s, o.path);
    for (const char* need : {kMetaCf, kDoneCf, kRetriesCf}) {
      if (std::find(names.begin(), names.end(), need) == names.end())
        return data_loss("rocksdb: " + quoted(o.path) + " is a RocksDB database of another layout (no column family " +
                         need + "); idem leaves it untouched");
    }
  } else {
    names = {::rocksdb::kDefaultColumnFamilyName,
             kMetaCf,
             kDoneCf,
             kRetriesCf,
             kEntitiesCf,
             kBufferCf,
             kOutboxCf,
             kOutboxSentCf};
  }
  // A database written before entities (or the outbox) existed lacks their column
  // families: they are added once its layout has been checked (below), not before.
  std::vector<std::string> to_add;
  for (const char* later : {kEntitiesCf, kBufferCf, kOutboxCf, kOutboxSentCf})
    if (std::find(names.begin(), names.end(), later) == names.end()) to_add.emplace_back(later);
  for (const auto& cf : o.user_column_families)
    if (std::find(names.begin(), names.end(), cf) == names.end()) names.push_back(cf);
  std::vector<::rocksdb::ColumnFamilyDescriptor> descs;
  for (const auto& n : names)
    descs.emplace_back(n, n == kDoneCf || n == kRetriesCf || n == kOutboxSentCf ? expiring
                          : n == kEntitiesCf                                    ? entities
                                                                                : plain);

  ::rocksdb::DB* raw = nullptr;
  std::vector<::rocksdb::ColumnFamilyHandle*> handles;
  if (auto s = ::rocksdb::DB::Open(dbo, o.path, descs, &handles, &raw); !s.ok()) return open_error(s, o.path);
  store->db_.reset(raw);
  store->handles = handles;
  for (std::size_t i = 0; i < names.size(); ++i) keep_handle(*store, names[i], handles[i]);

  const std::string layout = std::string(detail::kLayoutPrefix) + std::to_string(kLayoutVersion);
  std::string found;
  auto g = store->db_->Get(::rocksdb::ReadOptions(), store->meta_cf_, detail::kLayoutKey, &found);
  // A database that has idem's column families but no layout yet, and no record, is
  // one whose creation was interrupted (the process died between creating the column
  // families and writing the layout): it is finished here rather than refused.
  if (g.IsNotFound() && existing && is_empty(*store->db_, store->done_cf_) && is_empty(*store->db_, store->retries_cf_))
    existing = false;
  if (g.IsNotFound() && !existing) {
    ::rocksdb::WriteOptions sync;
    sync.sync = true;
    if (auto p = store->db_->Put(sync, store->meta_cf_, detail::kLayoutKey, layout); !p.ok())
      return detail::to_status(p, "write the layout version");
  } else if (!g.ok()) {
    return data_loss("rocksdb: " + quoted(o.path) + " has no idem layout version (" + g.ToString() + ")");
  } else if (found != layout) {
    const std::string prefix = detail::kLayoutPrefix;
    if (found.rfind(prefix, 0) == 0) {
      const std::string v = found.substr(prefix.size());
      if (!v.empty() && std::all_of(v.begin(), v.end(), ::isdigit) && std::stoll(v) > kLayoutVersion)
        return failed_precondition("rocksdb: " + quoted(o.path) + " was written by a newer idem (layout " + v +
                                   ", this build knows " + std::to_string(kLayoutVersion) + ")");
    }
    return data_loss("rocksdb: " + quoted(o.path) + " has an unknown layout \"" + found + "\"");
  }
  for (const auto& name : to_add) {
    ::rocksdb::ColumnFamilyHandle* h = nullptr;
    const auto& cf_options = name == kEntitiesCf ? entities : name == kOutboxSentCf ? expiring : plain;
    if (auto c = store->db_->CreateColumnFamily(cf_options, name, &h); !c.ok())
      return detail::to_status(c, "add column family " + name + " to " + quoted(o.path));
    store->handles.push_back(h);
    keep_handle(*store, name, h);
  }
  store->entity_cache_per_stripe =
      o.entity_cache == 0 ? 0 : std::max<std::size_t>(1, (o.entity_cache + o.lease_stripes - 1) / o.lease_stripes);
  store->stripes.reserve(o.lease_stripes);
  for (std::size_t i = 0; i < o.lease_stripes; ++i) store->stripes.push_back(std::make_unique<detail::Stripe>());
  if (Status s = store->rebuild_buffer_totals(); !s.ok()) return s;

  // Skip reading idem_retries while it is empty.
  std::unique_ptr<::rocksdb::Iterator> it(store->db_->NewIterator(::rocksdb::ReadOptions(), store->retries_cf_));
  it->SeekToFirst();
  store->retries_possible.store(it->Valid() || !it->status().ok());
  it.reset();

  return std::shared_ptr<RocksDbStore>(std::move(store));
}

StatusOr<Options> parse_uri(const StoreUri& u) {
  if (Status s = u.check_params(
          {"sync", "block_cache_mib", "bloom_bits", "write_buffer_mib", "stripes", "entity_cache", "cf"});
      !s.ok())
    return s;
  Options o;
  o.path = u.body;
  auto sync = u.param_bool("sync", o.sync);
  auto cache = u.param_uint("block_cache_mib", o.block_cache_mib);
  auto bits = u.param_uint("bloom_bits", static_cast<std::uint64_t>(o.bloom_bits_per_key));
  auto wb = u.param_uint("write_buffer_mib", o.write_buffer_mib);
  auto stripes = u.param_uint("stripes", o.lease_stripes);
  auto entity_cache = u.param_uint("entity_cache", o.entity_cache);
  for (const Status& s :
       {sync.status(), cache.status(), bits.status(), wb.status(), stripes.status(), entity_cache.status()})
    if (!s.ok()) return s;
  if (*bits > 64) return invalid_argument("rocksdb: bloom_bits must be <= 64");
  o.sync = *sync;
  o.block_cache_mib = *cache;
  o.bloom_bits_per_key = static_cast<int>(*bits);
  o.write_buffer_mib = *wb;
  o.lease_stripes = *stripes;
  o.entity_cache = *entity_cache;
  if (auto cf = u.param("cf")) {
    std::string_view rest = *cf;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      o.user_column_families.emplace_back(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  return o;
}

StatusOr<std::shared_ptr<RocksDbStore>> open(const StoreUri& u) {
  auto o = parse_uri(u);
  if (!o.ok()) return o.status();
  return open(*o);
}

}  // namespace idem::rocksdb

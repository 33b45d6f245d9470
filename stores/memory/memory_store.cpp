#include "idem/memory_store.hpp"

#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace idem {
namespace {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

struct Record {
  RecordState state = RecordState::kPending;
  std::string owner;
  std::int64_t lease_until_ms = 0;
  std::int64_t expires_ms = 0;  // pending / done records
  std::optional<std::uint64_t> fingerprint;
  std::optional<std::string> result;
  std::uint32_t retries = 0;
  std::uint64_t generation = 0;  // matches the FIFO entry that may evict it
};

// True iff the record still says something at `now` (else it counts as absent): a
// lease that has not expired, or a retry count / done record before expires_ms.
bool live(const Record& r, std::int64_t now) {
  if (r.state == RecordState::kInProgress) return r.lease_until_ms > now || (r.retries > 0 && r.expires_ms > now);
  return r.expires_ms > now;
}

bool done(const Record& r, std::int64_t now) {
  return (r.state == RecordState::kCompleted || r.state == RecordState::kDeadLettered) && r.expires_ms > now;
}

bool leased(const Record& r, std::int64_t now) {
  return r.state == RecordState::kInProgress && r.lease_until_ms > now;
}

class Shard {
 public:
  explicit Shard(std::size_t cap) : cap_(cap) {}

  ClaimResult claim(const ClaimRequest& q) {
    const std::int64_t now = to_unix_ms(q.now);
    std::lock_guard lock(mu_);
    auto it = map_.find(q.id);
    if (it != map_.end() && !live(it->second, now)) {
      map_.erase(it);
      it = map_.end();
    }
    if (it != map_.end()) {
      Record& r = it->second;
      if (done(r, now) || leased(r, now)) {
        if (r.fingerprint && q.fingerprint && *r.fingerprint != *q.fingerprint) return ClaimResult::conflict();
        ClaimResult c;
        if (leased(r, now)) {
          c.status = ClaimStatus::kInProgress;
          c.owner = r.owner;
          c.lease_left = Duration(r.lease_until_ms - now);
        } else {
          c.status = ClaimStatus::kCompleted;
          c.result = r.result;
          c.dead_lettered = r.state == RecordState::kDeadLettered;
        }
        return c;
      }
      // Pending (a live retry count) or an expired lease over one: take it over.
      r.state = RecordState::kInProgress;
      r.owner = std::string(q.owner);
      r.lease_until_ms = now + q.lease.count();
      r.fingerprint = q.fingerprint;
      r.result.reset();
      return ClaimResult::granted(r.retries);
    }
    Record r;
    r.state = RecordState::kInProgress;
    r.owner = std::string(q.owner);
    r.lease_until_ms = now + q.lease.count();
    r.fingerprint = q.fingerprint;
    insert(std::string(q.id), std::move(r), now);
    return ClaimResult::granted(0);
  }

  Status commit(const CommitRequest& q) {
    const std::int64_t now = to_unix_ms(q.now);
    std::lock_guard lock(mu_);
    auto it = map_.find(q.id);
    if (it != map_.end()) {
      Record& r = it->second;
      if (done(r, now)) return failed_precondition("id is already completed");
      if (leased(r, now) && r.owner != q.owner) return failed_precondition("lease is held by " + r.owner);
    }
    Record r;
    r.state = q.outcome == Outcome::kDeadLettered ? RecordState::kDeadLettered : RecordState::kCompleted;
    r.expires_ms = now + q.ttl.count();
    r.fingerprint = q.fingerprint;
    if (q.result) r.result = std::string(*q.result);
    if (it != map_.end()) {
      r.generation = it->second.generation;
      it->second = std::move(r);
    } else {
      insert(std::string(q.id), std::move(r), now);
    }
    return Status::ok();
  }

  std::uint32_t release(const ReleaseRequest& q) {
    const std::int64_t now = to_unix_ms(q.now);
    std::lock_guard lock(mu_);
    auto it = map_.find(q.id);
    if (it == map_.end()) {
      if (!q.count_retry) return 0;
      Record r;
      r.expires_ms = now + q.retry_ttl.count();
      r.retries = 1;
      insert(std::string(q.id), std::move(r), now);
      return 1;
    }
    Record& r = it->second;
    if (done(r, now)) return r.retries;
    if (r.state == RecordState::kCompleted || r.state == RecordState::kDeadLettered) {
      // An expired done record counts as absent: start over from an empty record.
      const std::uint64_t generation = r.generation;
      r = Record{};
      r.generation = generation;
    }
    // Another owner's live lease: not ours to give up or to count against.
    if (leased(r, now) && r.owner != q.owner) return r.retries;
    if (r.expires_ms <= now) r.retries = 0;  // the retry count expired
    if (r.state == RecordState::kInProgress) {
      r.state = RecordState::kPending;
      r.owner.clear();
    }
    if (q.count_retry) {
      ++r.retries;
      r.expires_ms = now + q.retry_ttl.count();
    }
    return r.retries;
  }

  Status extend(const ExtendRequest& q) {
    const std::int64_t now = to_unix_ms(q.now);
    std::lock_guard lock(mu_);
    auto it = map_.find(q.id);
    if (it == map_.end() || it->second.state != RecordState::kInProgress || it->second.owner != q.owner)
      return failed_precondition("the lease is not held by this owner");
    Record& r = it->second;
    if (!leased(r, now)) return failed_precondition("the lease expired");
    r.lease_until_ms = now + q.lease.count();
    return Status::ok();
  }

  std::optional<RecordInfo> inspect(std::string_view id, TimePoint t) {
    const std::int64_t now = to_unix_ms(t);
    std::lock_guard lock(mu_);
    auto it = map_.find(id);
    if (it == map_.end()) return std::nullopt;
    const Record& r = it->second;
    if (!live(r, now)) return std::nullopt;
    RecordInfo info;
    info.state = leased(r, now) ? RecordState::kInProgress
                 : r.state == RecordState::kInProgress ? RecordState::kPending
                                                        : r.state;
    if (info.state == RecordState::kInProgress) {
      info.owner = r.owner;
      info.lease_until = from_unix_ms(r.lease_until_ms);
    }
    info.fingerprint = r.fingerprint;
    info.result = r.result;
    info.retries = r.retries;
    info.expires_at = from_unix_ms(r.expires_ms);
    return info;
  }

  std::size_t purge(std::int64_t now, std::size_t max) {
    std::lock_guard lock(mu_);
    return purge_locked(now, max);
  }

 private:
  // Removes up to `max` records that are not live at `now`, examining O(max) entries:
  // first from the oldest insertions, then (behind a live oldest record) onwards from
  // where the previous call stopped, so that one long-lived record cannot shield
  // expired ones inserted after it. REQUIRES: mu_ held.
  std::size_t purge_locked(std::int64_t now, std::size_t max) {
    std::size_t removed = 0;
    while (!fifo_.empty() && removed < max) {
      const auto& [id, gen] = fifo_.front();
      auto it = map_.find(id);
      if (it != map_.end() && it->second.generation == gen) {
        if (live(it->second, now)) break;
        map_.erase(it);
        ++removed;
      }
      pop_front();
    }
    for (std::size_t budget = kScanFactor * max + kScanMin; removed < max && budget > 0 && !fifo_.empty(); --budget) {
      if (cursor_ >= fifo_.size()) cursor_ = 0;
      const auto& [id, gen] = fifo_[cursor_++];
      auto it = map_.find(id);
      if (it != map_.end() && it->second.generation == gen && !live(it->second, now)) {
        map_.erase(it);  // its fifo_ entry is now stale; dropped when compacted or at the front
        ++removed;
      }
    }
    if (fifo_.size() > 2 * map_.size() + kScanMin) compact();
    return removed;
  }

  void pop_front() {
    fifo_.pop_front();
    if (cursor_ > 0) --cursor_;
  }

  // Drops stale fifo_ entries (records erased or re-inserted since). Amortised O(1)
  // per insertion: runs only when stale entries outnumber live ones.
  void compact() {
    std::deque<std::pair<std::string, std::uint64_t>> kept;
    for (auto& e : fifo_) {
      auto it = map_.find(e.first);
      if (it != map_.end() && it->second.generation == e.second) kept.push_back(std::move(e));
    }
    fifo_.swap(kept);
    cursor_ = 0;
  }

  // REQUIRES: mu_ held, id absent.
  void insert(std::string id, Record r, std::int64_t now) {
    if (map_.size() >= cap_) evict(now);
    if (fifo_.size() > 2 * map_.size() + kScanMin) compact();
    r.generation = ++generation_;
    fifo_.emplace_back(id, r.generation);
    map_.emplace(std::move(id), std::move(r));
  }

  // Makes room for one record: drops a record that is no longer live if a bounded
  // search finds one, else the oldest inserted record (which is then forgotten).
  void evict(std::int64_t now) {
    if (purge_locked(now, 1) > 0) return;
    while (!fifo_.empty() && map_.size() >= cap_) {
      auto [id, gen] = std::move(fifo_.front());
      pop_front();
      auto it = map_.find(id);
      if (it != map_.end() && it->second.generation == gen) map_.erase(it);
    }
  }

  static constexpr std::size_t kScanFactor = 4;  // entries examined per record to remove
  static constexpr std::size_t kScanMin = 64;    // and at least this many

  std::mutex mu_;
  std::size_t cap_;
  std::uint64_t generation_ = 0;
  std::unordered_map<std::string, Record, StringHash, std::equal_to<>> map_;
  std::deque<std::pair<std::string, std::uint64_t>> fifo_;  // (id, generation) by insertion
  std::size_t cursor_ = 0;  // where purge_locked continues its scan behind a live head
};

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(const MemoryStoreOptions& o) {
    const std::size_t per = (o.max_records + o.shards - 1) / o.shards;
    shards_.reserve(o.shards);
    for (std::size_t i = 0; i < o.shards; ++i) shards_.push_back(std::make_unique<Shard>(per));
  }

  StoreCapabilities capabilities() const override { return {}; }

  StatusOr<ClaimResult> claim(const ClaimRequest& q) override {
    if (q.id.empty()) return invalid_argument("claim: empty id");
    return shard(q.id).claim(q);
  }
  Status commit(const CommitRequest& q) override {
    if (q.id.empty()) return invalid_argument("commit: empty id");
    return shard(q.id).commit(q);
  }
  StatusOr<std::uint32_t> release(const ReleaseRequest& q) override { return shard(q.id).release(q); }
  Status extend(const ExtendRequest& q) override { return shard(q.id).extend(q); }
  StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint now) override {
    return shard(id).inspect(id, now);
  }
  StatusOr<std::size_t> purge_expired(TimePoint now, std::size_t max_records) override {
    std::size_t removed = 0;
    for (auto& s : shards_) {
      if (removed >= max_records) break;
      removed += s->purge(to_unix_ms(now), max_records - removed);
    }
    return removed;
  }

 private:
  Shard& shard(std::string_view id) { return *shards_[std::hash<std::string_view>{}(id) % shards_.size()]; }
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace

StatusOr<std::shared_ptr<Store>> open_memory_store(MemoryStoreOptions options) {
  if (options.max_records == 0) return invalid_argument("memory store: max_records must be > 0");
  if (options.shards == 0) return invalid_argument("memory store: shards must be > 0");
  if (options.shards > options.max_records) options.shards = options.max_records;
  return std::shared_ptr<Store>(std::make_shared<MemoryStore>(options));
}

}  // namespace idem

// The standalone Bloom store and the front filter, shared by the source files.
#pragma once

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>

#include "generations.hpp"
#include "idem/backend/store_wrapper.hpp"
#include "idem/bloom_store.hpp"
#include "leases.hpp"

namespace idem::bloom::detail {

inline constexpr std::size_t kStripes = 64;

class BloomStore final : public FilterStore {
 public:
  explicit BloomStore(const Options& o) : options_(o), filter_(o, DropRule::kWindow), stripes_(kStripes) {}
  ~BloomStore() override;

  StoreCapabilities capabilities() const override;
  StatusOr<ClaimResult> claim(const ClaimRequest& request) override;
  Status commit(const CommitRequest& request) override;
  StatusOr<std::uint32_t> release(const ReleaseRequest& request) override;
  Status extend(const ExtendRequest& request) override;
  StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint now) override;
  StatusOr<std::size_t> purge_expired(TimePoint now, std::size_t max_records) override;

  Status restore_snapshot();
  void forget_snapshot_path() { options_.snapshot_path.clear(); }
  Status snapshot() override;
  Stats stats() override;

 private:
  Options options_;
  std::atomic<std::size_t> purge_cursor_{0};  // the stripe purge_expired starts at
  // Guards filter_ and stripes_. One lock: every claim of an id without a lease and
  // every commit reads or changes the filter anyway, so per-stripe locks would only
  // add a second lock to each call. Nothing slow runs under it (no I/O, no
  // allocation on the claim/commit path once the spare lease nodes are warm).
  std::mutex mu_;
  Generations filter_;
  Stripes stripes_;
};

// The filter in front of a durable store (the wrapper's target): it changes claim (the
// read it may skip) and every write that must reach the filter first; everything else
// is the durable store's (entity records, the reorder buffer, capabilities, purge).
class Front final : public bloom::FrontStore {
 public:
  Front(std::shared_ptr<Store> durable, const Options& o, DurableHooks hooks)
      : bloom::FrontStore(std::move(durable)), hooks_(std::move(hooks)), filter_(o, DropRule::kAllExpired) {}

  // Fills the filter from the durable store. Without the hook the filter never vouches.
  Status warm();

  StatusOr<ClaimResult> claim(const ClaimRequest& request) override;
  Status commit(const CommitRequest& request) override;
  StatusOr<std::uint32_t> release(const ReleaseRequest& request) override;
  std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> requests) override;
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) override;
  CommitThenClaimResult commit_then_claim(const CommitRequest& c, const ClaimRequest& q) override;
  StatusOr<std::unique_ptr<StoreTransaction>> begin(TimePoint now) override;

  // Adds id before its record is written (so a negative never hides a record).
  void note(std::string_view id, std::int64_t now_ms, std::int64_t expires_ms) {
    const Probe p = probe_of(id);
    std::lock_guard lock(mu_);
    last_now_ms_ = std::max(last_now_ms_, now_ms);
    filter_.add(p, now_ms, expires_ms);
  }
  Stats stats() override;

 private:
  // True if the filter proves id has no record in the durable store.
  bool certainly_absent(std::string_view id, std::int64_t now_ms);
  // True if the claim may skip the durable store's read: its id is certainly absent
  // and it asks for no entity record (which only the durable store can read).
  bool may_skip_read(const ClaimRequest& q) {
    return !q.entity_key && !q.id.empty() && certainly_absent(q.id, to_unix_ms(q.now));
  }

  DurableHooks hooks_;
  std::mutex mu_;
  Generations filter_;
  bool warmed_ = false;
  std::int64_t last_now_ms_ = std::numeric_limits<std::int64_t>::min();  // largest now seen
  std::atomic<std::uint64_t> skipped_{0};
  std::atomic<std::uint64_t> passed_{0};
};

}  // namespace idem::bloom::detail

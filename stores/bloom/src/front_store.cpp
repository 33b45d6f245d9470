// The Bloom filter in front of a durable store.
#include <limits>

#include "bloom_store_impl.hpp"

namespace idem::bloom::detail {
namespace {

// Batches look this many ids ahead when they prefetch filter bits.
constexpr std::size_t kPrefetchAhead = 8;

// Adds the id to the filter before the durable commit inside the transaction.
class FrontTransaction final : public StoreTransaction {
 public:
  FrontTransaction(Front& front, std::unique_ptr<StoreTransaction> inner)
      : front_(front), inner_(std::move(inner)) {}
  Status commit(const CommitRequest& q) override {
    const std::int64_t now = to_unix_ms(q.now);
    front_.note(q.id, now, now + q.ttl.count());
    return inner_->commit(q);
  }
  void rollback() override { inner_->rollback(); }
  StoreTransaction* inner() { return inner_.get(); }

 private:
  Front& front_;
  std::unique_ptr<StoreTransaction> inner_;
};

}  // namespace

Status Front::warm() {
  if (!hooks_.for_each_record) return ok_status();
  std::lock_guard lock(mu_);
  Status s = hooks_.for_each_record(
      [&](std::string_view id, TimePoint expires_at) { filter_.add_warm(id, to_unix_ms(expires_at)); });
  if (!s.ok()) return s;
  warmed_ = true;
  return ok_status();
}

bool Front::certainly_absent(std::string_view id, std::int64_t now_ms) {
  if (!hooks_.claim_absent) return false;
  const Probe p = probe_of(id);
  std::lock_guard lock(mu_);
  last_now_ms_ = std::max(last_now_ms_, now_ms);
  if (!warmed_ || !filter_.vouches(now_ms) || filter_.maybe_contains(p, now_ms)) return false;
  filter_.prefetch_add(p);  // the commit that follows sets these bits
  return true;
}

StatusOr<ClaimResult> Front::claim(const ClaimRequest& q) {
  if (may_skip_read(q)) {
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return hooks_.claim_absent(q);
  }
  passed_.fetch_add(1, std::memory_order_relaxed);
  return base()->claim(q);
}

std::vector<StatusOr<ClaimResult>> Front::claim_batch(std::span<const ClaimRequest> requests) {
  // Which requests the filter vouches for: probes outside the lock, one lock for all.
  std::vector<bool> absent(requests.size(), false);
  std::size_t n_absent = 0;
  if (hooks_.claim_absent) {
    std::vector<Probe> probes(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) probes[i] = probe_of(requests[i].id);
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const auto& q = requests[i];
      if (i + kPrefetchAhead < requests.size())
        filter_.prefetch_lookup(probes[i + kPrefetchAhead], to_unix_ms(requests[i + kPrefetchAhead].now));
      if (q.entity_key || q.id.empty()) continue;
      const std::int64_t now = to_unix_ms(q.now);
      last_now_ms_ = std::max(last_now_ms_, now);
      absent[i] = warmed_ && filter_.vouches(now) && !filter_.maybe_contains(probes[i], now);
      n_absent += absent[i];
    }
  }
  skipped_.fetch_add(n_absent, std::memory_order_relaxed);
  passed_.fetch_add(requests.size() - n_absent, std::memory_order_relaxed);
  if (n_absent == 0) return base()->claim_batch(requests);
  // An id's copies all fall on the same side (a caller sets the same entity key on
  // every claim of an id), so in-batch order is kept per id.
  std::vector<ClaimRequest> skip, rest;
  skip.reserve(n_absent);
  rest.reserve(requests.size() - n_absent);
  for (std::size_t i = 0; i < requests.size(); ++i) (absent[i] ? skip : rest).push_back(requests[i]);
  std::vector<StatusOr<ClaimResult>> from_rest;
  if (!rest.empty()) from_rest = base()->claim_batch(rest);
  std::vector<StatusOr<ClaimResult>> from_skip;
  if (hooks_.claim_absent_batch) {
    from_skip = hooks_.claim_absent_batch(skip);
  } else {
    from_skip.reserve(skip.size());
    for (const auto& q : skip) from_skip.push_back(hooks_.claim_absent(q));
  }
  std::vector<StatusOr<ClaimResult>> result;
  result.reserve(requests.size());
  std::size_t k_skip = 0, k_rest = 0;
  for (std::size_t i = 0; i < requests.size(); ++i)
    result.push_back(std::move(absent[i] ? from_skip[k_skip++] : from_rest[k_rest++]));
  return result;
}

Status Front::commit(const CommitRequest& q) {
  const std::int64_t now = to_unix_ms(q.now);
  if (!q.id.empty()) note(q.id, now, now + q.ttl.count());
  return base()->commit(q);
}

std::vector<Status> Front::commit_batch(std::span<const CommitRequest> requests) {
  {
    std::vector<Probe> probes(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) probes[i] = probe_of(requests[i].id);
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const auto& q = requests[i];
      if (i + kPrefetchAhead < requests.size()) filter_.prefetch_add(probes[i + kPrefetchAhead]);
      const std::int64_t now = to_unix_ms(q.now);
      last_now_ms_ = std::max(last_now_ms_, now);
      if (!q.id.empty()) filter_.add(probes[i], now, now + q.ttl.count());
    }
  }
  return base()->commit_batch(requests);
}

CommitThenClaimResult Front::commit_then_claim(const CommitRequest& c, const ClaimRequest& q) {
  // The durable store combines the two in one round trip: the filter learns c.id first,
  // as in commit(); q then goes to the durable store (its answers are the durable
  // store's either way). Otherwise the two calls through this filter, so that q may
  // skip the durable read.
  if (!base()->capabilities().combined_commit_claim) return Store::commit_then_claim(c, q);
  const std::int64_t now = to_unix_ms(c.now);
  if (!c.id.empty()) note(c.id, now, now + c.ttl.count());
  return base()->commit_then_claim(c, q);
}

StatusOr<std::uint32_t> Front::release(const ReleaseRequest& q) {
  if (q.count_retry && !q.id.empty()) {
    const std::int64_t now = to_unix_ms(q.now);
    note(q.id, now, now + q.retry_ttl.count());
  }
  return base()->release(q);
}

StatusOr<std::unique_ptr<StoreTransaction>> Front::begin(TimePoint now) {
  // A filter that never vouches need not learn the ids: the backend's own transaction.
  if (!hooks_.claim_absent || !warmed_) return base()->begin(now);
  if (hooks_.begin_observed) {
    return hooks_.begin_observed(now, [this](const CommitRequest& q) {
      const std::int64_t t = to_unix_ms(q.now);
      note(q.id, t, t + q.ttl.count());
    });
  }
  auto inner = base()->begin(now);
  if (!inner.ok()) return inner.status();
  return std::unique_ptr<StoreTransaction>(std::make_unique<FrontTransaction>(*this, std::move(inner).value()));
}

Stats Front::stats() {
  std::lock_guard lock(mu_);
  Stats s = filter_.stats();
  s.skipped_reads = skipped_.load();
  s.durable_claims = passed_.load();
  s.vouching = warmed_ && hooks_.claim_absent && filter_.vouches(last_now_ms_);
  return s;
}

}  // namespace idem::bloom::detail

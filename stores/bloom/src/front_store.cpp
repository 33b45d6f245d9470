// The Bloom filter in front of a durable store.
#include <limits>

#include "bloom_store_impl.hpp"

namespace idem::bloom::detail {
namespace {

// Adds the id to the filter before the durable commit inside the transaction.
class FrontTransaction final : public StoreTransaction {
 public:
  FrontTransaction(FrontStore& front, std::unique_ptr<StoreTransaction> inner)
      : front_(front), inner_(std::move(inner)) {}
  Status commit(const CommitRequest& q) override {
    const std::int64_t now = to_unix_ms(q.now);
    front_.note(q.id, now, now + q.ttl.count());
    return inner_->commit(q);
  }
  void rollback() override { inner_->rollback(); }
  StoreTransaction* inner() { return inner_.get(); }

 private:
  FrontStore& front_;
  std::unique_ptr<StoreTransaction> inner_;
};

}  // namespace

Status FrontStore::warm() {
  if (!hooks_.for_each_record) return Status::ok();
  std::lock_guard lock(mu_);
  Status s = hooks_.for_each_record(
      [&](std::string_view id, TimePoint expires_at) { filter_.add_warm(id, to_unix_ms(expires_at)); });
  if (!s.is_ok()) return s;
  warmed_ = true;
  return Status::ok();
}

bool FrontStore::certainly_absent(std::string_view id, std::int64_t now_ms) {
  if (!hooks_.claim_absent) return false;
  std::lock_guard lock(mu_);
  last_now_ms_ = std::max(last_now_ms_, now_ms);
  return warmed_ && filter_.vouches(now_ms) && !filter_.maybe_contains(id, now_ms);
}

StatusOr<ClaimResult> FrontStore::claim(const ClaimRequest& q) {
  if (may_skip_read(q)) {
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return hooks_.claim_absent(q);
  }
  passed_.fetch_add(1, std::memory_order_relaxed);
  return durable_->claim(q);
}

std::vector<StatusOr<ClaimResult>> FrontStore::claim_batch(std::span<const ClaimRequest> requests) {
  std::vector<bool> absent(requests.size());
  std::vector<ClaimRequest> rest;
  std::vector<std::size_t> rest_index;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    absent[i] = may_skip_read(requests[i]);
    if (!absent[i]) {
      rest.push_back(requests[i]);
      rest_index.push_back(i);
    }
  }
  std::vector<StatusOr<ClaimResult>> from_durable;
  if (!rest.empty()) from_durable = durable_->claim_batch(rest);
  std::vector<std::optional<StatusOr<ClaimResult>>> out(requests.size());
  for (std::size_t k = 0; k < rest_index.size(); ++k) out[rest_index[k]] = std::move(from_durable[k]);
  // An id's copies all fall on the same side (a caller sets the same entity key on
  // every claim of an id), so in-batch order is kept per id.
  for (std::size_t i = 0; i < requests.size(); ++i)
    if (absent[i]) out[i] = hooks_.claim_absent(requests[i]);
  skipped_.fetch_add(requests.size() - rest.size(), std::memory_order_relaxed);
  passed_.fetch_add(rest.size(), std::memory_order_relaxed);
  std::vector<StatusOr<ClaimResult>> result;
  result.reserve(requests.size());
  for (auto& o : out) result.push_back(std::move(*o));
  return result;
}

Status FrontStore::commit(const CommitRequest& q) {
  const std::int64_t now = to_unix_ms(q.now);
  if (!q.id.empty()) note(q.id, now, now + q.ttl.count());
  return durable_->commit(q);
}

std::vector<Status> FrontStore::commit_batch(std::span<const CommitRequest> requests) {
  {
    std::lock_guard lock(mu_);
    for (const auto& q : requests) {
      const std::int64_t now = to_unix_ms(q.now);
      last_now_ms_ = std::max(last_now_ms_, now);
      if (!q.id.empty()) filter_.add(q.id, now, now + q.ttl.count());
    }
  }
  return durable_->commit_batch(requests);
}

StatusOr<std::uint32_t> FrontStore::release(const ReleaseRequest& q) {
  if (q.count_retry && !q.id.empty()) {
    const std::int64_t now = to_unix_ms(q.now);
    note(q.id, now, now + q.retry_ttl.count());
  }
  return durable_->release(q);
}

StatusOr<std::unique_ptr<StoreTransaction>> FrontStore::begin(TimePoint now) {
  // A filter that never vouches need not learn the ids: the backend's own transaction.
  if (!hooks_.claim_absent || !warmed_) return durable_->begin(now);
  if (hooks_.begin_observed) {
    return hooks_.begin_observed(now, [this](const CommitRequest& q) {
      const std::int64_t t = to_unix_ms(q.now);
      note(q.id, t, t + q.ttl.count());
    });
  }
  auto inner = durable_->begin(now);
  if (!inner.ok()) return inner.status();
  return std::unique_ptr<StoreTransaction>(std::make_unique<FrontTransaction>(*this, std::move(inner).value()));
}

Stats FrontStore::stats() {
  std::lock_guard lock(mu_);
  Stats s = filter_.stats();
  s.skipped_reads = skipped_.load();
  s.durable_claims = passed_.load();
  s.vouching = warmed_ && hooks_.claim_absent && filter_.vouches(last_now_ms_);
  return s;
}

}  // namespace idem::bloom::detail

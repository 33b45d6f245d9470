// A real store with hooks and call counts: every call is forwarded to the store it
// wraps; `before_claim` runs before each claim (batch claims: before each request),
// `before_commit_batch` before each batch commit. Not thread-safe (one test thread).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "idem/store.hpp"

namespace idem::ordering_test {

class HookedStore final : public Store {
 public:
  explicit HookedStore(std::shared_ptr<Store> s) : s_(std::move(s)) {}
  std::function<void(const ClaimRequest&)> before_claim;
  std::function<void(std::span<const CommitRequest>)> before_commit_batch;

  // Calls made so far.
  struct Counts {
    int claim = 0, claim_batch = 0, commit = 0, commit_batch = 0, buffer_remove = 0, buffer_put_batch = 0;
  };
  Counts counts;

  StoreCapabilities capabilities() const override { return s_->capabilities(); }
  StatusOr<ClaimResult> claim(const ClaimRequest& r) override {
    ++counts.claim;
    if (before_claim) before_claim(r);
    return s_->claim(r);
  }
  Status commit(const CommitRequest& r) override {
    ++counts.commit;
    return s_->commit(r);
  }
  StatusOr<std::uint32_t> release(const ReleaseRequest& r) override { return s_->release(r); }
  Status extend(const ExtendRequest& r) override { return s_->extend(r); }
  StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint now) override {
    return s_->inspect(id, now);
  }
  std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> r) override {
    ++counts.claim_batch;
    for (const auto& one : r)
      if (before_claim) before_claim(one);
    return s_->claim_batch(r);
  }
  std::vector<Status> commit_batch(std::span<const CommitRequest> r) override {
    ++counts.commit_batch;
    if (before_commit_batch) before_commit_batch(r);
    return s_->commit_batch(r);
  }
  StatusOr<std::unique_ptr<StoreTransaction>> begin(TimePoint now) override { return s_->begin(now); }
  StatusOr<EntityRecord> read_entity(std::string_view key) override { return s_->read_entity(key); }
  Status write_entity(const EntityWrite& w) override { return s_->write_entity(w); }
  Status buffer_put(const BufferPut& p) override { return s_->buffer_put(p); }
  std::vector<Status> buffer_put_batch(std::span<const BufferPut> puts) override {
    ++counts.buffer_put_batch;
    return s_->buffer_put_batch(puts);
  }
  StatusOr<std::vector<BufferEntry>> buffer_read(std::string_view key, std::size_t max) override {
    return s_->buffer_read(key, max);
  }
  Status buffer_remove(std::string_view key, std::uint64_t version) override {
    ++counts.buffer_remove;
    return s_->buffer_remove(key, version);
  }
  StatusOr<BufferSummary> buffer_summary(std::size_t max_keys) override { return s_->buffer_summary(max_keys); }
  StatusOr<std::size_t> purge_expired(TimePoint now, std::size_t max) override { return s_->purge_expired(now, max); }

 private:
  std::shared_ptr<Store> s_;
};

}  // namespace idem::ordering_test

// A real store with hooks and call counts: every call is forwarded to the store it
// wraps; `before_claim` runs before each claim (batch claims: before each request),
// `before_commit_batch` before each batch commit. Not thread-safe (one test thread).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "idem/backend/store_wrapper.hpp"

namespace idem::ordering_test {

class HookedStore final : public StoreWrapper {
 public:
  using StoreWrapper::StoreWrapper;
  std::function<void(const ClaimRequest&)> before_claim;
  std::function<void(std::span<const CommitRequest>)> before_commit_batch;

  // Calls made so far.
  struct Counts {
    int claim = 0, claim_batch = 0, commit = 0, commit_batch = 0, buffer_remove = 0, buffer_put_batch = 0;
  };
  Counts counts;

  StatusOr<ClaimResult> claim(const ClaimRequest& r) override {
    ++counts.claim;
    if (before_claim) before_claim(r);
    return StoreWrapper::claim(r);
  }
  Status commit(const CommitRequest& r) override {
    ++counts.commit;
    return StoreWrapper::commit(r);
  }
  std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> r) override {
    ++counts.claim_batch;
    for (const auto& one : r)
      if (before_claim) before_claim(one);
    return StoreWrapper::claim_batch(r);
  }
  std::vector<Status> commit_batch(std::span<const CommitRequest> r) override {
    ++counts.commit_batch;
    if (before_commit_batch) before_commit_batch(r);
    return StoreWrapper::commit_batch(r);
  }
  // The two calls above (counted, hooked), as Store's default makes them.
  CommitThenClaimResult commit_then_claim(const CommitRequest& c, const ClaimRequest& q) override {
    return Store::commit_then_claim(c, q);
  }
  std::vector<Status> buffer_put_batch(std::span<const BufferPut> puts) override {
    ++counts.buffer_put_batch;
    return StoreWrapper::buffer_put_batch(puts);
  }
  Status buffer_remove(std::string_view key, std::uint64_t version) override {
    ++counts.buffer_remove;
    return StoreWrapper::buffer_remove(key, version);
  }
};

}  // namespace idem::ordering_test

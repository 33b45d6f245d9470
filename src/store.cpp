// Default batch and transaction forms of the store contract.
#include "idem/store.hpp"

namespace idem {

std::vector<StatusOr<ClaimResult>> Store::claim_batch(std::span<const ClaimRequest> requests) {
  std::vector<StatusOr<ClaimResult>> out;
  out.reserve(requests.size());
  for (const auto& r : requests) out.push_back(claim(r));
  return out;
}

std::vector<Status> Store::commit_batch(std::span<const CommitRequest> requests) {
  std::vector<Status> out;
  out.reserve(requests.size());
  for (const auto& r : requests) out.push_back(commit(r));
  return out;
}

StatusOr<std::unique_ptr<StoreTransaction>> Store::begin(TimePoint) {
  return failed_precondition("this store is not transactional");
}

}  // namespace idem

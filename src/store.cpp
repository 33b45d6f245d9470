// Default batch and transaction forms of the store contract.
#include "idem/store.hpp"

#include <string>

#include "idem/backend/request_checks.hpp"

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
  EntityChains chains;  // entity_chains
  for (const auto& r : requests) {
    if (Status s = chains.check(r); !s.ok()) {
      out.push_back(std::move(s));
      continue;
    }
    out.push_back(commit(r));
    chains.note(r, out.back());
  }
  return out;
}

CommitThenClaimResult Store::commit_then_claim(const CommitRequest& c, const ClaimRequest& q) {
  Status committed = commit(c);
  return {std::move(committed), claim(q)};
}

StatusOr<TimePoint> Store::server_time() {
  return unimplemented("this store has no time of its own: its timeline is its host's clock");
}

StatusOr<std::unique_ptr<StoreTransaction>> Store::begin(TimePoint) {
  return unimplemented("this store is not transactional");
}

StatusOr<std::unique_ptr<BatchTransaction>> Store::begin_batch(TimePoint) {
  return unimplemented("this store has no batch transactions");
}

std::vector<Status> EntityStore::buffer_put_batch(std::span<const BufferPut> puts) {
  std::vector<Status> out;
  out.reserve(puts.size());
  for (const BufferPut& p : puts) out.push_back(buffer_put(p));
  return out;
}

}  // namespace idem

// Default batch and transaction forms of the store contract.
#include "idem/store.hpp"

#include <string>

#include "idem/request_checks.hpp"

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

StatusOr<std::unique_ptr<StoreTransaction>> Store::begin(TimePoint) {
  return unimplemented("this store is not transactional");
}

StatusOr<std::unique_ptr<BatchTransaction>> Store::begin_batch(TimePoint) {
  return unimplemented("this store has no batch transactions");
}

namespace {
Status no_entities() { return unimplemented("this store keeps no entity records or reorder buffer"); }
}  // namespace

StatusOr<EntityRecord> Store::read_entity(std::string_view) { return no_entities(); }
Status Store::write_entity(const EntityWrite&) { return no_entities(); }
Status Store::buffer_put(const BufferPut&) { return no_entities(); }
std::vector<Status> Store::buffer_put_batch(std::span<const BufferPut> puts) {
  std::vector<Status> out;
  out.reserve(puts.size());
  for (const BufferPut& p : puts) out.push_back(buffer_put(p));
  return out;
}
StatusOr<std::vector<BufferEntry>> Store::buffer_read(std::string_view, std::size_t) { return no_entities(); }
Status Store::buffer_remove(std::string_view, std::uint64_t) { return no_entities(); }
StatusOr<BufferSummary> Store::buffer_summary(std::size_t) { return no_entities(); }

namespace {
Status not_supported(std::string_view what) {
  return unimplemented(std::string(what) + ": not supported by this store");
}
}  // namespace

namespace {
Status no_outbox() { return unimplemented("this store keeps no outbox"); }
}  // namespace

StatusOr<std::vector<OutboxEntry>> Store::outbox_pending(const OutboxQuery&) { return no_outbox(); }
Status Store::outbox_mark_sent(std::span<const OutboxEntry>, TimePoint, Duration) { return no_outbox(); }

StatusOr<RecordCounts> Store::count_records(TimePoint) { return not_supported("counting records"); }
StatusOr<bool> Store::remove_record(std::string_view, TimePoint) { return not_supported("removing one record"); }
StatusOr<bool> Store::remove_entity(std::string_view) { return not_supported("removing one entity"); }

}  // namespace idem

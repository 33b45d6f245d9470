// For backend authors: the checks every store makes of the requests it is given, the
// claim decision, the entity write and the entity-chain rule of commit_batch, written
// once so that every backend refuses the same requests with the same messages and
// answers the same claims alike.
//
// A check returns OK, or kInvalidArgument with the message "<method>: <what is wrong>"
// (e.g. "claim: empty id"). A store calls it first and answers its error unchanged,
// writing nothing. Backend limits beyond the contract (e.g. a key length a format
// cannot encode) stay the backend's own checks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "idem/entity.hpp"
#include "idem/status.hpp"
#include "idem/store.hpp"

namespace idem {

// id non-empty; lease > 0; entity_key non-empty if set.
[[nodiscard]] Status check_claim(const ClaimRequest& request);
// id non-empty; ttl > 0; the entity write (if set) as check_entity_write.
[[nodiscard]] Status check_commit(const CommitRequest& request);
// id non-empty; retry_ttl > 0 if count_retry; entity_key non-empty if set.
[[nodiscard]] Status check_release(const ReleaseRequest& request);
// id non-empty; lease > 0; entity_key non-empty if set.
[[nodiscard]] Status check_extend(const ExtendRequest& request);
// key non-empty; state non-empty if set. `method` names the caller in the message
// ("write_entity", "commit").
[[nodiscard]] Status check_entity_write(const EntityWrite& write, std::string_view method);
// key non-empty (read_entity, buffer_read, buffer_remove: `method`).
[[nodiscard]] Status check_entity_key(std::string_view key, std::string_view method);
// key non-empty; version > 0; id non-empty.
[[nodiscard]] Status check_buffer_put(const BufferPut& put);

// Applies an entity write to `record`, the key's record as the store holds it, once
// the store has found record.revision == write.expect_revision: the revision becomes
// expect_revision + 1, the version and state change where the write sets them. Every
// backend that applies entity writes in C++ calls it (Redis's commit script does the
// same on the server).
void apply_entity_write(const EntityWrite& write, EntityRecord& record);

// What a claim finds held for its id, for answer_held(): a live done record (its
// expiry not yet passed) and a live lease (until_ms > the claim's now).
struct HeldRecord {
  std::optional<std::uint64_t> fingerprint;
  std::optional<std::string_view> result;
  bool dead_lettered = false;
};
struct HeldLease {
  std::optional<std::uint64_t> fingerprint;
  std::string_view owner;
  std::int64_t until_ms = 0;  // Unix milliseconds
};

// The claim decision every backend makes (Redis's claim script makes it on the
// server): for claim q at now_ms (Unix milliseconds) of an id whose live done record
// is `done` and whose live lease is `lease` (null: none), the answer when one is held,
// or nullopt when neither is, and the claim is then granted. A done record wins over a
// lease. A held fingerprint that differs from q's (both set) is kConflict; else
// kCompleted (its result and dead-letter mark) or kInProgress (the owner and the time
// left). The caller adds what only it reads (ClaimResult::outbox_unsent).
std::optional<ClaimResult> answer_held(const ClaimRequest& q, std::int64_t now_ms, const HeldRecord* done,
                                       const HeldLease* lease);

// The rule of StoreCapabilities::entity_chains for one commit_batch call: once a
// request carrying an entity write of key K has failed, every later request of the
// batch with an entity write of K fails with kAborted and writes nothing.
//
//   EntityChains chains;
//   for (const CommitRequest& q : requests) {
//     if (Status s = chains.check(q); !s.ok()) { out.push_back(s); continue; }
//     Status s = commit_one(q);
//     chains.note(q, s);
//     out.push_back(s);
//   }
//
// Holds views of the requests' keys: lives no longer than the batch. Not thread-safe.
class EntityChains {
 public:
  // kAborted iff q carries an entity write of a key whose chain has stopped; else OK.
  [[nodiscard]] Status check(const CommitRequest& q) const;
  // Notes q's answer: a failure stops the chain of q's entity key (if q has one).
  void note(const CommitRequest& q, const Status& answer) {
    if (!answer.ok()) stop(q);
  }
  // Stops the chain of q's entity key, if q has an entity write.
  void stop(const CommitRequest& q) {
    if (q.entity) stopped_.insert(q.entity->key);
  }

 private:
  std::unordered_set<std::string_view> stopped_;
};

// True iff a commit batch may be written in another order than its input's: no
// request writes an entity or outbox entries (entity chains, and the outbox entries'
// positions, follow the input order).
bool reorderable(std::span<const CommitRequest> requests);

// The order in which to visit a batch's requests: by id when by_id (stable, so that
// the requests of one id keep their input order), else input order. A store that
// keeps records in key order visits a batch by id so that its lookups and writes
// walk the keys in one pass.
template <class Request>
std::vector<std::size_t> visit_order(std::span<const Request> requests, bool by_id) {
  std::vector<std::size_t> order(requests.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (by_id)
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return requests[a].id < requests[b].id; });
  return order;
}

}  // namespace idem

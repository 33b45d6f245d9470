// The request checks every store makes (idem/backend/request_checks.hpp).
#include "idem/backend/request_checks.hpp"

#include <string>

namespace idem {
namespace {

Status refuse(std::string_view method, std::string_view what) {
  return invalid_argument(std::string(method) + ": " + std::string(what));
}

Status check_entity_key_of(const std::optional<std::string_view>& key, std::string_view method) {
  if (key && key->empty()) return refuse(method, "empty entity key");
  return ok_status();
}

}  // namespace

Status check_claim(const ClaimRequest& q) {
  if (q.id.empty()) return refuse("claim", "empty id");
  if (q.lease.count() <= 0) return refuse("claim", "lease must be > 0");
  return check_entity_key_of(q.entity_key, "claim");
}

Status check_commit(const CommitRequest& q) {
  if (q.id.empty()) return refuse("commit", "empty id");
  if (q.ttl.count() <= 0) return refuse("commit", "ttl must be > 0");
  for (const OutboxEntry& e : q.outbox) {
    if (e.incoming_id != q.id) return refuse("commit", "an outbox entry of another incoming id");
    if (e.destination.empty()) return refuse("commit", "an outbox entry without a destination");
  }
  if (q.entity) return check_entity_write(*q.entity, "commit");
  return ok_status();
}

Status check_release(const ReleaseRequest& q) {
  if (q.id.empty()) return refuse("release", "empty id");
  if (q.count_retry && q.retry_ttl.count() <= 0) return refuse("release", "retry_ttl must be > 0");
  return check_entity_key_of(q.entity_key, "release");
}

Status check_extend(const ExtendRequest& q) {
  if (q.id.empty()) return refuse("extend", "empty id");
  if (q.lease.count() <= 0) return refuse("extend", "lease must be > 0");
  return check_entity_key_of(q.entity_key, "extend");
}

std::optional<ClaimResult> answer_held(const ClaimRequest& q, std::int64_t now_ms, const HeldRecord* done,
                                       const HeldLease* lease) {
  if (done == nullptr && lease == nullptr) return std::nullopt;
  const std::optional<std::uint64_t>& held = done != nullptr ? done->fingerprint : lease->fingerprint;
  if (held && q.fingerprint && *held != *q.fingerprint) return ClaimResult::conflict();
  ClaimResult c;
  if (done != nullptr) {
    c.status = ClaimStatus::kCompleted;
    if (done->result) c.result.emplace(*done->result);
    c.dead_lettered = done->dead_lettered;
  } else {
    c.status = ClaimStatus::kInProgress;
    c.owner.assign(lease->owner);
    c.lease_left = Duration(lease->until_ms - now_ms);
  }
  return c;
}

void apply_entity_write(const EntityWrite& w, EntityRecord& r) {
  r.revision = w.expect_revision + 1;
  if (w.version) r.version = *w.version;
  if (w.state) r.state.assign(*w.state);
}

Status check_entity_write(const EntityWrite& w, std::string_view method) {
  if (w.key.empty()) return refuse(method, "empty entity key");
  if (w.state && w.state->empty()) return refuse(method, "the entity state is set but empty");
  return ok_status();
}

Status check_entity_key(std::string_view key, std::string_view method) {
  if (key.empty()) return refuse(method, "empty entity key");
  return ok_status();
}

Status check_buffer_put(const BufferPut& p) {
  if (p.key.empty()) return refuse("buffer_put", "empty entity key");
  if (p.version == 0) return refuse("buffer_put", "version must be > 0");
  if (p.id.empty()) return refuse("buffer_put", "empty id");
  return ok_status();
}

Status EntityChains::check(const CommitRequest& q) const {
  if (q.entity && stopped_.contains(q.entity->key))
    return aborted("commit: an earlier entity write of this key in the batch failed");
  return ok_status();
}

bool reorderable(std::span<const CommitRequest> requests) {
  return std::none_of(requests.begin(), requests.end(),
                      [](const CommitRequest& q) { return q.entity || !q.outbox.empty(); });
}

}  // namespace idem

// A base for stores that wrap a store (a filter in front of it, a test double that
// counts or injects, a store that adds metrics): it forwards every call to the
// wrapped store, so that a wrapper overrides only what it changes.
//
//   class CountingStore final : public idem::StoreWrapper {
//    public:
//     using StoreWrapper::StoreWrapper;
//     idem::Status commit(const idem::CommitRequest& r) override {
//       ++commits;
//       return StoreWrapper::commit(r);
//     }
//     std::atomic<int> commits{0};
//   };
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/store.hpp"

namespace idem {

// Forwards each virtual method of Store to the same method of base(), with the same
// arguments, and returns its answer unchanged; capabilities() are the target's.
//
// Each method forwards on its own: the batch forms, commit_then_claim and begin() go to
// the target's batch forms, commit_then_claim and begin(), not through this object's
// claim() and commit(). A wrapper that changes what commit does must therefore also
// override commit_batch, commit_then_claim and begin (whose transaction commits) if
// those should change too — either forwarding them itself or calling Store's default
// (e.g. `return Store::commit_batch(requests);`), which loops over this object's own
// single forms. The same holds for claim and claim_batch, and for buffer_put and
// buffer_put_batch.
//
// A wrapper that changes what a store promises overrides capabilities(); one that
// drops what the target keeps (e.g. its entities) overrides entities() to return null.
//
// Thread-safety: as the target's; the wrapper adds no state of its own.
class StoreWrapper : public Store, public EntityStore, public OutboxStore, public StoreAdmin {
 public:
  // REQUIRES: target is not null.
  explicit StoreWrapper(std::shared_ptr<Store> target) : target_(std::move(target)) {}

  // The wrapped store. Its typed handle (e.g. what rocksdb::open returned) keeps its
  // backend's own calls: keep that handle, or cast base() back to it.
  const std::shared_ptr<Store>& base() const { return target_; }

  StoreCapabilities capabilities() const override { return target_->capabilities(); }
  StatusOr<ClaimResult> claim(const ClaimRequest& request) override { return target_->claim(request); }
  Status commit(const CommitRequest& request) override { return target_->commit(request); }
  StatusOr<std::uint32_t> release(const ReleaseRequest& request) override { return target_->release(request); }
  Status extend(const ExtendRequest& request) override { return target_->extend(request); }
  StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint now) override {
    return target_->inspect(id, now);
  }
  StatusOr<TimePoint> server_time() override { return target_->server_time(); }
  std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> requests) override {
    return target_->claim_batch(requests);
  }
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) override {
    return target_->commit_batch(requests);
  }
  CommitThenClaimResult commit_then_claim(const CommitRequest& c, const ClaimRequest& q) override {
    return target_->commit_then_claim(c, q);
  }
  StatusOr<std::unique_ptr<StoreTransaction>> begin(TimePoint now) override { return target_->begin(now); }
  StatusOr<std::unique_ptr<BatchTransaction>> begin_batch(TimePoint now) override { return target_->begin_batch(now); }

  StatusOr<std::size_t> purge_expired(TimePoint now, std::size_t max_records) override {
    return target_->purge_expired(now, max_records);
  }

  // The wrapper is itself each facet the target has, forwarding to the target's: a
  // wrapper overrides a facet's call as it overrides a Store call. One that drops a
  // facet overrides its accessor to return null.
  EntityStore* entities() override { return target_->entities() != nullptr ? this : nullptr; }
  OutboxStore* outbox() override { return target_->outbox() != nullptr ? this : nullptr; }
  StoreAdmin* admin() override { return target_->admin() != nullptr ? this : nullptr; }

  StatusOr<EntityRecord> read_entity(std::string_view key) override { return target_->entities()->read_entity(key); }
  Status write_entity(const EntityWrite& write) override { return target_->entities()->write_entity(write); }
  Status buffer_put(const BufferPut& put) override { return target_->entities()->buffer_put(put); }
  std::vector<Status> buffer_put_batch(std::span<const BufferPut> puts) override {
    return target_->entities()->buffer_put_batch(puts);
  }
  StatusOr<std::vector<BufferEntry>> buffer_read(std::string_view key, std::size_t max) override {
    return target_->entities()->buffer_read(key, max);
  }
  Status buffer_remove(std::string_view key, std::uint64_t version) override {
    return target_->entities()->buffer_remove(key, version);
  }
  StatusOr<BufferSummary> buffer_summary(std::size_t max_keys) override {
    return target_->entities()->buffer_summary(max_keys);
  }
  StatusOr<std::vector<OutboxEntry>> outbox_pending(const OutboxQuery& q) override {
    return target_->outbox()->outbox_pending(q);
  }
  Status outbox_mark_sent(std::span<const OutboxEntry> sent, TimePoint now, Duration ttl) override {
    return target_->outbox()->outbox_mark_sent(sent, now, ttl);
  }
  StatusOr<RecordCounts> count_records(TimePoint now) override { return target_->admin()->count_records(now); }
  StatusOr<bool> remove_record(std::string_view id, TimePoint now) override {
    return target_->admin()->remove_record(id, now);
  }
  StatusOr<bool> remove_entity(std::string_view key) override { return target_->admin()->remove_entity(key); }

 private:
  std::shared_ptr<Store> target_;
};

}  // namespace idem

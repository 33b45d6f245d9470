// The record batches as encoded pipelines (EncodedPipeline): each request is written
// straight into the connection's RESP buffer and each answer is read in place, so
// that a batch costs no Command, argv or Reply per request. A commit that waits for
// replicas uses the Command path instead (redis_store.cpp); both paths answer alike.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "connection.hpp"
#include "redis_store_impl.hpp"

namespace idem::redis::detail {

// claim_batch_plain's first round trip: per request requests[where[k]], the SET NX PX
// of the value the claim script writes for an absent key. Each answer lands in out:
// granted (the key was absent), an error's Status, or (the key exists) the request's
// index appended to *scripted, for the claim script to decide.
class FreshClaims final : public EncodedPipeline {
 public:
  FreshClaims(const RedisStoreImpl& store, const Options& o, std::span<const ClaimRequest> requests,
              std::span<const std::size_t> where, std::vector<StatusOr<ClaimResult>>& out,
              std::vector<std::size_t>& scripted)
      : store_(store), o_(o), requests_(requests), where_(where), out_(out), scripted_(scripted) {}

  std::size_t size() const override { return where_.size(); }
  void encode(std::size_t k, bool eval, RespWriter& w) override;
  void take(std::size_t k, const ReplyView& r) override;
  void fail(std::size_t k, const Status& s) override { out_[where_[k]] = s; }
  std::string key(std::size_t k) const override { return store_.key_of(requests_[where_[k]].id); }

 private:
  const RedisStoreImpl& store_;
  const Options& o_;
  std::span<const ClaimRequest> requests_;
  std::span<const std::size_t> where_;
  std::vector<StatusOr<ClaimResult>>& out_;
  std::vector<std::size_t>& scripted_;
  std::string value_;  // the record value being encoded (reused)
};

// commit_batch_plain's round trip without WAIT: the commits requests[where[k]] (valid,
// in order) as commit_many scripts of up to max_keys commits that share owner, now and
// ttl (those arguments sent once) and, when by_slot (a cluster), one key slot. Each
// commit's Status lands in out[where[k]], as decode_commit answers the single commit
// script.
class CommitMany final : public EncodedPipeline {
 public:
  // REQUIRES: o.wait_replicas <= 0; max_keys > 0.
  CommitMany(const RedisStoreImpl& store, const Options& o, const Script& script,
             std::span<const CommitRequest> requests, std::span<const std::size_t> where, std::vector<Status>& out,
             std::size_t max_keys, bool by_slot);

  // The number of scripts.
  std::size_t size() const override { return groups_.size(); }
  void encode(std::size_t g, bool eval, RespWriter& w) override;
  void take(std::size_t g, const ReplyView& r) override;
  void fail(std::size_t g, const Status& s) override;
  std::string key(std::size_t g) const override { return store_.key_of(request(groups_[g].first).id); }

 private:
  const CommitRequest& request(std::size_t k) const { return requests_[where_[k]]; }
  // True iff a and b may share one script (same owner, now and ttl).
  static bool shareable(const CommitRequest& a, const CommitRequest& b);
  // The Status of the k-th key of a script whose answer (copied) gives that key
  // another code than kCommitted; detail is the index of the answer's next detail.
  Status uncommon(const Reply& answer, std::size_t k, std::size_t& detail, const std::string& key) const;

  const RedisStoreImpl& store_;
  const Options& o_;
  const Script& script_;
  std::span<const CommitRequest> requests_;
  std::span<const std::size_t> where_;
  std::vector<Status>& out_;
  std::vector<std::pair<std::size_t, std::size_t>> groups_;  // [first, end) into where_, per script
  std::string value_;                                        // the record value being encoded (reused)
};

}  // namespace idem::redis::detail

// The Redis store's implementation class, internal to idem::redis: request → script
// command → decoded answer. Records (claim, commit, release, extend, retries and
// batches) are in redis_store.cpp, entity records and the reorder buffer in
// entities.cpp, opening and the URI in open.cpp.
//
// Thread-safety: the class holds no mutable state of its own; every call borrows its
// connections from the executor, which is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "entity_layout.hpp"
#include "executor.hpp"
#include "idem/redis_store.hpp"
#include "script_codes.hpp"
#include "scripts.hpp"

namespace idem::redis::detail {

// At most 96 bytes of `bytes`, non-printable ones as \xNN (for error messages).
std::string printable(std::string_view bytes);

// The Status for an error reply (or a {kScriptError, message} answer) at `key`.
Status error_status(std::string_view msg, const std::string& key);

// The array a script answered, or the Status of whatever else came back (an error
// reply, a kScriptError answer, something that is not an array with a code).
StatusOr<const Reply*> script_answer(const Reply& r, const std::string& key);
StatusOr<const Reply*> script_answer(const StatusOr<Reply>& r, const std::string& key);

// Element i of an array answer as a string / integer ("" / 0 if there is none).
const std::string& str_at(const Reply& a, std::size_t i);
std::int64_t int_at(const Reply& a, std::size_t i);

// A claim script's answer (ClaimCode) as a ClaimResult.
StatusOr<ClaimResult> decode_claim(const Reply& a, const std::string& key);
// A commit script's answer (CommitCode) as a Status; kUnavailable if fewer replicas
// than o.wait_replicas acknowledged it.
Status decode_commit(const Reply& a, const Options& o, const std::string& key);
// A SET NX PX's answer. True: the lease was granted (the key was absent); false: the
// key exists.
StatusOr<bool> fresh_claim_answer(const StatusOr<Reply>& r, const std::string& key);

// Key k's answer in commit_many's {codes, details…} as the single commit script's
// answer; detail is the index of the next detail (the owner of a kLeasedByOther, the
// message of a kCommitManyError), advanced past the one it takes.
// REQUIRES: r is an array whose first element holds more than k codes.
Reply commit_many_answer(const Reply& r, std::size_t k, std::size_t& detail);

// Returns kInvalidArgument naming what is wrong with `o`.
Status validate(const Options& o);

class RedisStoreImpl final : public RedisStore, public EntityStore {
 public:
  RedisStoreImpl(Options o, std::unique_ptr<Executor> ex) : o_(std::move(o)), ex_(std::move(ex)) {}

  // Loads the scripts (SCRIPT LOAD) so that calls send EVALSHA.
  Status load_scripts();

  // --- records (redis_store.cpp) ------------------------------------------------------
  StoreCapabilities capabilities() const override;
  EntityStore* entities() override { return this; }
  StatusOr<ClaimResult> claim(const ClaimRequest& q) override;
  Status commit(const CommitRequest& q) override;
  StatusOr<std::uint32_t> release(const ReleaseRequest& q) override;
  Status extend(const ExtendRequest& q) override;
  StatusOr<std::optional<RecordInfo>> inspect(std::string_view id, TimePoint now) override;
  std::vector<StatusOr<ClaimResult>> claim_batch(std::span<const ClaimRequest> requests) override;
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) override;
  // One round trip: the commit script and a plain SET NX PX for the claim, pipelined
  // (in this order on one connection when both keys are on one node). Only if the
  // claimed id's key exists, a second round trip runs the claim script.
  CommitThenClaimResult commit_then_claim(const CommitRequest& c, const ClaimRequest& q) override;
  StatusOr<std::size_t> purge_expired(TimePoint, std::size_t) override;
  // TIME of the server (a cluster: of the master that holds the buffer totals' slot,
  // one node for every process of the store).
  StatusOr<TimePoint> server_time() override;

  std::string record_key(std::string_view id) const override { return key_of(id); }
  StatusOr<std::string> record_key(std::string_view id, std::string_view entity_key) const override;
  std::string key_of(std::string_view id) const;
  std::string key_of(std::string_view id, std::string_view entity_key) const;
  StatusOr<std::optional<RecordInfo>> inspect_with_entity(std::string_view id, std::string_view entity_key,
                                                          TimePoint now) override;

  // --- entity records and the reorder buffer (entities.cpp) ---------------------------
  StatusOr<EntityRecord> read_entity(std::string_view key) override;
  Status write_entity(const EntityWrite& w) override;
  Status buffer_put(const BufferPut& p) override;
  StatusOr<std::vector<BufferEntry>> buffer_read(std::string_view key, std::size_t max) override;
  Status buffer_remove(std::string_view key, std::uint64_t version) override;
  StatusOr<BufferSummary> buffer_summary(std::size_t max_keys) override;

 private:
  // --- records ------------------------------------------------------------------------
  // The record key of an id: on a cluster in the entity's slot when claimed with an
  // entity key (so that one script reaches both); on a standalone server always
  // key_of(id), which every script can reach.
  std::string id_key(std::string_view id, const std::optional<std::string_view>& entity_key) const;
  StatusOr<std::optional<RecordInfo>> inspect_key(const std::string& key, TimePoint now);
  std::vector<StatusOr<ClaimResult>> claim_batch_plain(std::span<const ClaimRequest> requests);
  std::vector<Status> commit_batch_plain(std::span<const CommitRequest> requests);
  // commit_batch_plain on a standalone server with WAIT: cmds (commit_cmd's, valid
  // requests, at out[where[k]]) merged into commit_many scripts.
  void commit_many(std::vector<Command>& cmds, const std::vector<std::size_t>& where, std::vector<Status>& out);
  // The claim script's command for q.
  Command claim_cmd(const ClaimRequest& q) const;
  // SET NX PX of the value the claim script writes for an absent key.
  Command fresh_claim_cmd(const ClaimRequest& q) const;
  // The commit script's command for q: args now, owner, value, prefix, px, slack.
  Command commit_cmd(const CommitRequest& q) const;
  std::string slack() const { return std::to_string(o_.expiry_slack.count()); }
  // Runs single-key script commands (whose last argument is the slack) in one round
  // trip and calls f(k, answer of cmds[k]) for each. On a standalone server they are
  // merged into `many` scripts of up to kKeysPerScript keys each (per_key arguments per
  // key, without the slack); on a cluster each is sent as it is.
  template <class F>
  void for_each_answer(const std::vector<Command>& cmds, const Script& many, std::size_t per_key, int wait, F&& f);
  StatusOr<Reply> run_one(const Command& cmd, int wait_replicas);

  // --- entities -----------------------------------------------------------------------
  // A buffer_put script's answer other than kLimit (which put_entry returns as the
  // limit's Status).
  struct PutAnswer {
    BufferCode code = BufferCode::kOk;
    bool stored = false;  // kOk: the entry was stored (false: the same entry was there)
  };
  // Runs the buffer_put script for p in `mode` ("put" or "check"); bytes is the
  // entry's size as the limits count it.
  StatusOr<PutAnswer> put_entry(const BufferPut& p, std::size_t bytes, const char* mode);
  // buffer_put's Status for an answer; total_limit names the total limit a cluster's
  // reservation met (a 'check' that found no entry), else "".
  static Status put_status(const PutAnswer& put, const BufferPut& p, std::size_t bytes, const std::string& total_limit);
  void add_global_keys(std::vector<std::string>& keys) const;
  void add_buffer_keys(std::vector<std::string>& keys, const EntityKeys& ks) const;
  // buffer_account (cluster): the totals change by dc/db (checked against `limits`
  // first if given); the index entry of key is updated as `mode` says.
  Command account_cmd(std::int64_t dc, std::int64_t db, const BufferLimits* limits, std::string_view key,
                      const char* mode, std::string score) const;
  // After a script answered after_remove's {0, 1, bytes, has_oldest, oldest} (cluster:
  // an entry was removed), the totals and the index follow in their slot. A failure
  // here leaves the totals off by one entry (docs/stores.md); the removal stands.
  void account_removal(const Reply& a, std::string_view key);
  // Measures each key in its own slot (one round trip): keys with entries go to
  // *found, the others to *empty.
  Status measure(const std::vector<std::string>& keys, std::vector<BufferedKey>* found,
                 std::vector<std::string>* empty);
  // The commit (with entity write) of requests[i] for each i in `at`, in one round
  // trip; then, on a cluster, the totals of removed buffer entries in another.
  void commit_entities(std::span<const CommitRequest> requests, std::span<const std::size_t> at,
                       std::vector<Status>& out);
  // The claims with an entity key of requests[i] for each i in `at`: one round trip of
  // SET NX PX + HMGET of the entity per request; only for ids whose key exists, one
  // more of claim_entity scripts (which read the entity in the same step).
  void claim_entities(std::span<const ClaimRequest> requests, std::span<const std::size_t> at,
                      std::vector<StatusOr<ClaimResult>>& out);
  // claim_entities' second round trip: the claim_entity scripts of requests[i] for
  // each i in `scripted` (sorted here, so that repeated ids run in request order).
  void claim_entities_scripted(std::span<const ClaimRequest> requests, std::vector<std::size_t>& scripted,
                               std::vector<StatusOr<ClaimResult>>& out);

  const Options o_;
  std::unique_ptr<Executor> ex_;
  Script claim_ = claim_script();
  Script commit_ = commit_script();
  Script release_ = release_script();
  Script extend_ = extend_script();
  Script inspect_ = inspect_script();
  Script claim_many_ = claim_many_script();
  Script commit_many_ = commit_many_script();
  Script claim_entity_ = claim_entity_script();
  Script commit_entity_ = commit_entity_script();
  Script write_entity_ = write_entity_script();
  Script buffer_put_ = buffer_put_script();
  Script buffer_read_ = buffer_read_script();
  Script buffer_remove_ = buffer_remove_script();
  Script buffer_key_info_ = buffer_key_info_script();
  Script buffer_account_ = buffer_account_script();
  const std::string totals_key_ = buffer_totals_key(o_.prefix);
  const std::string index_key_ = buffer_index_key(o_.prefix);
  // Keys per batch script: bounds how long one script holds the server (~1 ms).
  static constexpr std::size_t kKeysPerScript = 200;
};

}  // namespace idem::redis::detail

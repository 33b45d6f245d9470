// process_batch for consumers behind the entity gates (ordering by version, a state
// machine): one batch claim and one batch commit for the messages that apply in order,
// the single-message path for everything else. Under strict ordering the batch runs
// each key's versions in version order, so that an early version whose predecessor is
// in the same batch is not buffered.
//
// The walk keeps, per key, the entity record as the batch's pending commits will leave
// it (a projection), and gates each message against it. A message that applies runs
// its handler and its commit joins the pending ones: its entity write expects the
// revision the earlier pending commit of its key produces. A store with entity_chains
// checks the writes of one key in order and stops a key's chain at its first failure
// (the conformance suite proves it), so a chain lands as a prefix; without it, at most
// one write per key goes into a batch commit (a later one could otherwise land on a
// revision another writer produced after the earlier one failed). Anything else
// (stale, early, an invalid transition, a handler failure, a lost lease) takes the
// single-message path, which may itself write the entity; if its key has pending
// commits they land first, so that the store holds what the projection says.
//
// Under strict ordering on a store with entity_chains, the buffered successors of a
// key run inside the batch too ("absorbed"): when the key's buffer holds the version
// its projection expects next (found by an early message of the key, and before the
// batch's final commit), those entries are claimed in one batch claim, run, and their
// commits (each removing its buffer entry) chain on the key's pending writes, as
// drain() would run them one transaction at a time once those writes had landed.
//
// Internal. One object per process_batch call; not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "batch_index.hpp"
#include "pipeline.hpp"

namespace idem::detail {

class GatedBatch final : public Pipeline::HeldClaims {
 public:
  // REQUIRES: p's consumer is entity-gated, effectively_once, not transactional.
  GatedBatch(Pipeline& p, std::span<const MessageView> ms, detail::HandlerThunk h);

  // Decides every message of the batch, in input order. Call once.
  std::vector<Decision> run();

  // HeldClaims: the batch's claim on id, if a first copy not yet run holds it and the
  // batch's claims are not due for renewal at now; walk() then runs that message as
  // process() would meet it after the drain (run_taken).
  std::optional<ClaimResult> take(std::string_view id, TimePoint now) override;

 private:
  // What the batch knows of one of its keys, by the key's BatchIndex.
  struct KeyState {
    // The key's entity record as the batch's pending commits leave it; none: not met
    // yet, or forgotten (then read from the store: the claim's copy may be stale).
    std::optional<EntityRecord> projected;
    bool stale = false;                // changed in the store outside the projection
    bool drain = false;                // strict: a version landed; drain after
    // The versions drain_first last read in the key's buffer (none: not read yet).
    std::optional<std::vector<std::uint64_t>> buffered;
    std::vector<std::size_t> pending;  // where its writes are among the pending commits
  };

  // A buffered successor run inside the batch; its commit is among the pending ones.
  struct Absorbed {
    std::uint32_t key = 0;  // the batch's index of entry.key
    BufferEntry entry;
    Gate gate;  // views into entry
    Run run;
  };

  // What out_of_turn did with a message.
  enum class Turn {
    kDecided,  // decided (stale, too far ahead, buffered)
    kSingle,   // take the single-message path
    kRecheck,  // buffered successors were absorbed: the projection moved, gate it again
  };

  // What run_absorbed did with one claimed buffer entry.
  enum class Step {
    kRan,      // its commit joined the pending ones
    kDecided,  // the handler failed and the entry was decided: stop after it
    kLeft,     // not run (left to drain()): stop before it
  };

  // --- the walk, in run() order ------------------------------------------------
  // Validates each message, indexes its key, and splits first copies of an id from
  // later ones (`repeats_`, which go through process() at the end).
  void index_messages();
  // Strict: each key's first copies in version order (stable otherwise).
  void order_by_version();
  // One batch claim for the first copies, at start_.
  void claim_firsts();
  // The k-th first copy: decided, run in order (its commit pending), or single path.
  void walk(std::size_t k);
  // The projection of message i's key, read from the store if not known. Decides i
  // (and returns null) if the read fails.
  EntityRecord* projection(std::size_t i, const ClaimResult& claim);
  // Message i applies in order against `p` (gate `g`): runs its handler; a success
  // joins the pending commits and moves the projection, a failure is decided.
  void run_in_order(std::size_t i, const ClaimResult& claim, EntityRecord& p, Gate& g, TimePoint t);
  // The early versions' puts in one call (see buffer_early's deferred puts).
  void put_deferred();
  // Strict, entity_chains: message i applies in order after its key's pending writes,
  // where process() would have drained the key's buffer after the last of them: absorbs
  // the buffered entries that are next (i's own buffered copy among them, under i's
  // claim: take()). Reads the key's buffer once per batch, and again only when that
  // read showed the version the projection now expects. True iff any ran.
  bool drain_first(std::size_t i, EntityRecord& p);
  // Strict, entity_chains: absorbs the successors the pending writes make next.
  void absorb_after_pending();
  // Counts and reports the decisions; runs the repeats.
  void finish_all();

  // --- the pending commits -----------------------------------------------------
  // Forgets the projection of key k: the store changed it outside the projection.
  void forget(std::uint32_t k);
  // Notes the last pending commit as a write of key k.
  void add_pending(std::uint32_t k);
  // Lands the pending commits (one batch commit) and decides what they carried.
  void flush();
  // After the batch commit: the decision of message i, whose commit answered s.
  void land_message(std::size_t i, const Status& s);
  // After the batch commit: the decision of an absorbed entry, reported as drain()
  // would report it.
  void land_absorbed(Absorbed& a, const Status& s);
  // Lands the pending commits if one of them writes key k, then (strict) drains the
  // key's successors if a commit of it landed, as process() would have right after it.
  // The single-message path of a key touches that key only: other keys' commits wait.
  void settle(std::uint32_t k);

  // --- absorbing buffered successors ---------------------------------------------
  // Strict, entity_chains: runs `entries` (the key's buffer, by version) from the one
  // the projection `p` expects next, inside the batch (see the file comment). Stops at
  // the first entry that needs more than an in-order run: a gap, a claim not granted,
  // an undecodable frame, a transition that does not apply (drain() decides those), or
  // a handler failure (decided here, as drain() would). Returns how many successors it
  // decided.
  std::size_t absorb(std::uint32_t k, EntityRecord& p, std::vector<BufferEntry>& entries);
  // Where a buffered entry's claim was not granted because this batch holds its id (a
  // redelivery of the buffered message, claimed at start_ and not yet run), the batch's
  // claim runs the entry (take()), as drain() would have run it before process() met
  // the redelivery.
  void take_batch_claims(const std::vector<BufferEntry>& entries, TimePoint t,
                         std::vector<StatusOr<ClaimResult>>& granted);
  // Message i, whose claim ran its buffered copy: the key's pending writes land, then
  // i goes through process() (a duplicate, or its next attempt after a failure).
  void run_taken(std::size_t i);
  // Drops the leading entries at or below the projection (stale). One that a pending
  // commit of the batch applies (a redelivery of a buffered message, run in order) is
  // removed by that commit, as drain() would remove it after the commit. Returns how
  // many entries then follow the projection without a gap.
  std::size_t drop_stale(std::uint32_t k, const EntityRecord& p, std::vector<BufferEntry>& entries);
  // Runs `entry`, claimed (`claim`) at t, against the projection `p`.
  Step run_absorbed(std::uint32_t k, EntityRecord& p, BufferEntry& entry, const ClaimResult& claim, TimePoint t);

  // --- the single-message path ---------------------------------------------------
  // Message i, claimed by the batch at start_, through the single-message path: the
  // key's pending commits land first, the entity is read back, the lease is renewed if
  // the batch's handlers used up more than a tenth of it (`renew`).
  void single(std::size_t i, const ClaimResult& claim, TimePoint t, bool renew);
  // Strict: message i is stale or early against the projection `p`. Decides it (stale,
  // too far ahead, buffered) without landing the key's pending writes — none of these
  // writes the entity — unless the key's buffer holds the version the projection
  // expects next, which process() would have drained before i: then those entries are
  // absorbed if they can be (kRecheck), else i takes the single-message path.
  Turn out_of_turn(std::size_t i, const ClaimResult& claim, EntityRecord& p, TimePoint t);
  // True iff m runs now against entity record e with no store step of its own (the
  // next version, a valid transition); then fills g. Reads nothing.
  bool applies_in_order(const MessageView& m, const EntityRecord& e, Gate& g) const;

  Pipeline& p_;
  const ConsumerOptions& o_;
  Store& store_;
  const std::span<const MessageView> ms_;
  const detail::HandlerThunk h_;
  const bool strict_;  // Ordering::kStrict
  const bool chains_;  // the store's entity_chains

  std::vector<Decision> out_;                  // by message index
  std::vector<bool> finished_;                 // decided and counted by process()
  std::vector<bool> taken_;                    // its claim ran its buffered copy (run_taken)
  std::size_t walking_ = 0;                    // firsts_ from here have not run yet
  std::vector<std::size_t> firsts_, repeats_;  // first and later copies of each id
  BatchIndex key_index_;                       // the batch's keys
  std::vector<std::uint32_t> key_of_;          // each valid message's key, by index
  std::vector<std::string_view> key_names_;    // the keys, by index
  std::vector<std::optional<std::uint64_t>> fps_;
  std::vector<Run> runs_;
  std::vector<std::optional<TimePoint>> handler_start_;
  TimePoint start_{};                          // when the batch claimed
  std::vector<StatusOr<ClaimResult>> claims_;  // by position in firsts_

  std::vector<KeyState> keys_;
  std::vector<std::uint32_t> pending_keys_;  // the keys with a write among commits_
  std::vector<CommitRequest> commits_;
  std::vector<std::size_t> commit_index_;  // into ms_, or ms_.size() + an index into absorbed_
  std::deque<Absorbed> absorbed_;          // stable addresses: commits_ view into them
  // Stale buffer entries that a pending commit (at the index) removes: reported as
  // drain() reports them once it lands.
  std::vector<std::pair<std::size_t, BufferEntry>> unbuffered_;
  std::vector<Pipeline::DeferredPut> deferred_;  // early versions, put into the buffer together
};

}  // namespace idem::detail

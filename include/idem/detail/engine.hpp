// Not part of the public API: the compiled, type-erased pipeline behind Consumer<Msg>
// (consumer.hpp), which is all an application uses. Installed because Consumer<Msg>
// is a template over it; its names may change in any release.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/decision.hpp"
#include "idem/handler.hpp"
#include "idem/message.hpp"
#include "idem/metrics.hpp"
#include "idem/options.hpp"
#include "idem/status.hpp"

namespace idem::detail {

// Calls the user's handler for message `index` of the current call (0 for process()),
// or (call_encoded) for a message from the reorder buffer: decodes `encoded` and calls
// the handler on it, returning false without calling it if it cannot be decoded.
// encode returns the encoded form of message `index`. Both may be null when strict
// ordering is off.
struct HandlerThunk {
  void* self = nullptr;
  HandlerResult (*call)(void* self, std::size_t index, HandlerContext& ctx) = nullptr;
  std::string (*encode)(void* self, std::size_t index) = nullptr;
  bool (*call_encoded)(void* self, std::string_view encoded, HandlerContext& ctx, HandlerResult& out) = nullptr;
};

// Thread-safe: process() and process_batch() may be called from many threads at once
// (the stores are thread-safe).
class Engine {
 public:
  // Validates options against each other, the store's capabilities and the
  // extractors present. Returns kInvalidArgument naming the option to change.
  static StatusOr<std::unique_ptr<Engine>> create(ConsumerOptions options, ExtractorSet extractors);
  ~Engine();

  Decision process(const MessageView& m, HandlerThunk handler, std::size_t index = 0);

  // Lookahead (Consumer::process(m, next); lookahead.cpp): process(m), and where it
  // applies (an effectively_once consumer without ordering, state machine or
  // transaction, over a store with capabilities().combined_commit_claim) m's commit
  // also claims *next in the same round trip; the claim is kept for the call that
  // processes next and released by any other call, by flush_lookahead() or on
  // destruction. next null: process(m) (using a claim kept for m). Thread-safe.
  Decision process_ahead(const MessageView& m, HandlerThunk handler, const MessageView* next, std::size_t index = 0);
  // Releases the claim kept by process_ahead(), if any. Returns the release's status.
  Status flush_lookahead();

  // Decisions in input order, each the one sequential process() calls would give.
  // Uses the store's batch claim and commit; handlers of first copies run in input
  // order. The batch is claimed at once; a message's lease is renewed (one extend) when its
  // handler starts more than a tenth of the lease after the claim, so each lease still
  // runs from its handler's start. A repeated id is processed after the batch as
  // process() would, against what the earlier copy left in the store. Transactional
  // consumers (effectively_once or manual, without entity gates or watermarks) over a
  // store with capabilities().batch_transactions run the batch in one store
  // transaction: each message's handler and commit in a nested transaction (a
  // savepoint), so a failed handler's writes roll back alone and the rest commit
  // together; if that transaction's commit fails, nothing landed and every decision
  // but bad_message is retry / store_unavailable. Other transactional consumers and
  // guarantees other than effectively_once process the batch one message at a time.
  // Behind the entity gates (ordering, a state machine; gated_batch.cpp):
  //  - a message that applies in order against its key's record as the batch's
  //    pending commits leave it (the next version, a valid transition) runs its
  //    handler and joins the batch commit, its entity write chained on the key's
  //    earlier ones. A store without capabilities().entity_chains gets at most one
  //    write per key in a batch commit (the key's pending commit lands first).
  //  - strict ordering: each key's messages run in version order (an early version
  //    whose predecessor is in the same batch is processed, not buffered). A stale,
  //    too-far-ahead or early version is decided against that projected record
  //    without landing the pending commits (none of these writes the entity); the
  //    early ones go into the reorder buffer together, in one buffer_put_batch before
  //    the batch commits, each answered as its own put would be.
  //  - strict ordering over a store with entity_chains: buffered successors that the
  //    batch's pending writes make next (found by an early message of the key, by a
  //    message that applies after the key's pending writes, and looked for once per
  //    advanced key before the commit) are claimed in one batch claim, run in order,
  //    and join the batch commit, each removing its entry, as drain() would run them
  //    after those writes. A buffered entry whose id the batch itself holds (its
  //    redelivery, not yet run) runs under the batch's claim, and the redelivery is
  //    then answered as process() would answer it after the drain (a duplicate, or
  //    its next attempt).
  //  - any other message (an invalid transition, a handler failure, a lease to
  //    renew, a next version that waits in the buffer but cannot be run in the batch)
  //    lands the pending commits if its key has any, then takes the single-message
  //    path.
  //  - after the batch commit, what is still buffered behind the keys it advanced
  //    drains as after a single commit.
  // Handlers of different keys may run in another order than the input's.
  std::vector<Decision> process_batch(std::span<const MessageView> ms, HandlerThunk handler);

  // Work that waits on time rather than on deliveries (strict ordering): drains keys
  // whose next version is buffered (e.g. after a crash mid-drain), applies the gap
  // policy to gaps older than gap_timeout, and refreshes the buffer metrics. process()
  // does the same every gap_timeout / 4; call tick() in idle periods and once at
  // start-up. Returns the number of buffered messages that left the buffer.
  std::size_t tick(HandlerThunk handler);

  // Watermark: sets the stream's watermark to `position` (positions <= it are dropped
  // from now on; later ones pass), e.g. after a cursor reset or a requested redelivery.
  void reset_watermark(std::string_view stream, std::uint64_t position);

  const ConsumerOptions& options() const { return opts_; }
  Metrics& metrics() { return *metrics_; }

  // HandlerContext calls.
  Status extend_lease(HandlerContext& ctx, Duration lease);
  void misplaced_manual_call();

  struct Impl;  // opaque

 private:
  explicit Engine(ConsumerOptions options);

  ConsumerOptions opts_;
  std::shared_ptr<Metrics> metrics_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace idem::detail

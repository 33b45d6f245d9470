// The compiled, type-erased pipeline behind Consumer<Msg>. Users normally use
// Consumer<Msg> (consumer.hpp); the engine is public for adapters that already hold
// MessageViews.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "idem/decision.hpp"
#include "idem/handler.hpp"
#include "idem/message.hpp"
#include "idem/metrics.hpp"
#include "idem/options.hpp"
#include "idem/status.hpp"

namespace idem {

// Calls the user's handler for message `index` of the current call (0 for process()).
struct HandlerThunk {
  void* self = nullptr;
  HandlerResult (*call)(void* self, std::size_t index, HandlerContext& ctx) = nullptr;
};

namespace detail {

// Thread-safe: process() and process_batch() may be called from many threads at once
// (the stores are thread-safe).
class Engine {
 public:
  // Validates options against each other, the store's capabilities and the
  // extractors present. Returns kInvalidArgument naming the option to change.
  static StatusOr<std::unique_ptr<Engine>> create(ConsumerOptions options, ExtractorSet extractors);
  ~Engine();

  Decision process(const MessageView& m, HandlerThunk handler, std::size_t index = 0);

  // Decisions in input order, each the one sequential process() calls would give.
  // Uses the store's batch claim and commit; handlers of first copies run in input
  // order. The batch is claimed at once; a message's lease is renewed (one extend) when its
  // handler starts more than a tenth of the lease after the claim, so each lease still
  // runs from its handler's start. A repeated id is processed after the batch as
  // process() would, against what the earlier copy left in the store. Transactional
  // consumers and guarantees other than effectively_once process the batch one message
  // at a time.
  std::vector<Decision> process_batch(std::span<const MessageView> ms, HandlerThunk handler);

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

}  // namespace detail
}  // namespace idem

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

  // Decisions in input order. Uses the store's batch claim and commit. Handlers run in
  // input order; a repeated id within the batch is answered after the first copy.
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

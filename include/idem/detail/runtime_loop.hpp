// Not part of the public API: the type-erased loop behind Runtime<Msg> (runtime.hpp),
// installed because Runtime<Msg> is a template over it; its names may change in any
// release.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "idem/decision.hpp"
#include "idem/source.hpp"
#include "idem/status.hpp"

namespace idem {

struct RuntimeOptions;
class RuntimeMetrics;

namespace detail {

// The keyed queue's key for `s` (an entity key or a message id): its hash, never 0.
// Two strings that share a hash only run one after the other, which costs
// parallelism, not order.
inline std::uint64_t queue_key(std::string_view s) {
  const std::uint64_t h = std::hash<std::string_view>{}(s);
  return h != 0 ? h : 1;
}

// One fetched delivery inside the runtime.
struct WorkItem {
  virtual ~WorkItem() = default;
  Delivery delivery;
  std::uint64_t key = 0;  // queue_key(); runs after the earlier items of the same key
  bool keyed = false;     // false: runs freely
  bool decided = false;   // decided when prepared (e.g. a body that cannot be parsed)
  Decision decision;
  WorkItem* next_of_key = nullptr;  // the keyed queue's own: the next item waiting behind this one
};

// What the loop needs from the typed part of Runtime<Msg>.
class WorkProcessor {
 public:
  virtual ~WorkProcessor() = default;
  // On the loop thread: parses the delivery and sets key/keyed, or decides it.
  virtual std::unique_ptr<WorkItem> prepare(Delivery d) = 0;
  // On a worker thread: sets the decision of every item (their keys are distinct).
  virtual void process(std::span<WorkItem* const> items) = 0;
  // On the loop thread while nothing is in flight: Consumer::tick().
  virtual std::size_t tick() = 0;
  // On the loop thread, right after the item's decision was applied to the broker (or
  // the delivery was held).
  virtual void applied(const WorkItem& item) = 0;
};

// The loop and its workers (src/runtime/loop.cpp).
class Loop {
 public:
  Loop(const RuntimeOptions& options, MessageSource& source, WorkProcessor& processor, RuntimeMetrics& metrics);
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;
  Status run();
  void stop() { stop_.store(true, std::memory_order_relaxed); }

 private:
  struct Impl;
  std::atomic<bool> stop_{false};
  std::unique_ptr<Impl> impl_;
};

// Returns kInvalidArgument naming the option when `o` cannot be used.
Status validate(const RuntimeOptions& o);

}  // namespace detail
}  // namespace idem

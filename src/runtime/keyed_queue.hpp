// The runtime's dispatch queue: per-key order with different keys in parallel.
// A keyed item becomes ready only when no earlier item of its key is ready or
// running; unkeyed items are ready at once. Not thread-safe: the loop guards it with
// its mutex.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "idem/runtime.hpp"

namespace idem::detail {

class KeyedQueue {
 public:
  // Adds `item` behind the earlier items of its key.
  void push(WorkItem* item);

  // Moves up to `max` ready items into `out` (their keys are distinct), oldest first.
  void take(std::size_t max, std::vector<WorkItem*>& out);

  // `item`, taken earlier, is finished: the next item of its key becomes ready.
  // Returns true iff an item became ready.
  bool finish(const WorkItem* item);

  // Removes every item not yet taken for which `pred` is true, into `out`, keeping
  // the order of each key (a later item of a key is never left behind an earlier one
  // that was removed: removing an item removes the rest of its key's queue too).
  void remove_waiting(const std::function<bool(const WorkItem&)>& pred, std::vector<WorkItem*>& out);

  std::size_t ready() const { return ready_.size(); }
  // Items pushed and not taken.
  std::size_t queued() const { return queued_; }

 private:
  std::deque<WorkItem*> ready_;
  // Keys with an item ready or running → the items queued behind it.
  std::unordered_map<std::string, std::deque<WorkItem*>> busy_;
  std::size_t queued_ = 0;
};

}  // namespace idem::detail

// The runtime's dispatch queue: per-key order with different keys in parallel.
// A keyed item becomes ready only when no earlier item of its key is ready or
// running; unkeyed items are ready at once. Not thread-safe: the loop guards it with
// its mutex. Keys live in one flat table and the items waiting behind a key are
// chained through WorkItem::next_of_key, so queueing an item allocates nothing but
// the table's growth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
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
  // The items waiting behind a key's ready or running item, oldest first.
  struct Waiting {
    WorkItem* head = nullptr;
    WorkItem* tail = nullptr;
  };
  // Keys (queue_key(), never 0) → Waiting, in one array probed linearly: no allocation
  // per key, since every message of a consumer without entity keys is keyed by its id.
  class KeyTable {
   public:
    Waiting* find(std::uint64_t key);
    // The key's entry, and whether it was added.
    std::pair<Waiting*, bool> try_emplace(std::uint64_t key);
    void erase(std::uint64_t key);
    template <class F>
    void for_each(F&& f) {
      for (Slot& s : slots_)
        if (s.key != 0) f(s.waiting);
    }

   private:
    struct Slot {
      std::uint64_t key = 0;  // 0: empty
      Waiting waiting;
    };
    std::size_t slot_of(std::uint64_t key) const;  // its slot, or the empty one ending its probe
    void grow();

    std::vector<Slot> slots_ = std::vector<Slot>(64);
    std::size_t size_ = 0;
  };

  // Appends the chain starting at `w` to `out`; returns how many it appended.
  static std::size_t append_chain(WorkItem* w, std::vector<WorkItem*>& out);

  std::deque<WorkItem*> ready_;
  // Keys with an item ready or running → the items waiting behind it.
  KeyTable busy_;
  std::size_t queued_ = 0;
};

}  // namespace idem::detail

#include "keyed_queue.hpp"

namespace idem::detail {

// --- KeyTable --------------------------------------------------------------------

std::size_t KeyedQueue::KeyTable::slot_of(std::uint64_t key) const {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = key & mask;
  while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask;
  return i;
}

KeyedQueue::Waiting* KeyedQueue::KeyTable::find(std::uint64_t key) {
  Slot& s = slots_[slot_of(key)];
  return s.key == key ? &s.waiting : nullptr;
}

std::pair<KeyedQueue::Waiting*, bool> KeyedQueue::KeyTable::try_emplace(std::uint64_t key) {
  if (2 * (size_ + 1) > slots_.size()) grow();  // at most half full: probes stay short
  Slot& s = slots_[slot_of(key)];
  if (s.key == key) return {&s.waiting, false};
  s.key = key;
  s.waiting = Waiting{};
  ++size_;
  return {&s.waiting, true};
}

// Empties the key's slot and moves back each later entry of the probe run that may
// not stay behind the hole (backward-shift deletion: no tombstones).
void KeyedQueue::KeyTable::erase(std::uint64_t key) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t hole = slot_of(key);
  if (slots_[hole].key != key) return;
  for (std::size_t j = (hole + 1) & mask; slots_[j].key != 0; j = (j + 1) & mask) {
    const std::size_t home = slots_[j].key & mask;
    // The entry at j stays when its home lies cyclically in (hole, j].
    const bool stays = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (stays) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole] = Slot{};
  --size_;
}

void KeyedQueue::KeyTable::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  for (const Slot& s : old)
    if (s.key != 0) slots_[slot_of(s.key)] = s;
}

// --- KeyedQueue ------------------------------------------------------------------

void KeyedQueue::push(WorkItem* item) {
  ++queued_;
  item->next_of_key = nullptr;
  if (!item->keyed) {
    ready_.push_back(item);
    return;
  }
  auto [q, fresh] = busy_.try_emplace(item->key);
  if (fresh) {
    ready_.push_back(item);
    return;
  }
  (q->tail != nullptr ? q->tail->next_of_key : q->head) = item;
  q->tail = item;
}

void KeyedQueue::take(std::size_t max, std::vector<WorkItem*>& out) {
  while (max-- > 0 && !ready_.empty()) {
    out.push_back(ready_.front());
    ready_.pop_front();
    --queued_;
  }
}

bool KeyedQueue::finish(const WorkItem* item) {
  if (!item->keyed) return false;
  Waiting* q = busy_.find(item->key);
  if (q == nullptr) return false;
  if (q->head == nullptr) {
    busy_.erase(item->key);
    return false;
  }
  WorkItem* next = q->head;
  q->head = next->next_of_key;
  if (q->head == nullptr) q->tail = nullptr;
  next->next_of_key = nullptr;
  ready_.push_back(next);
  return true;
}

std::size_t KeyedQueue::append_chain(WorkItem* w, std::vector<WorkItem*>& out) {
  std::size_t n = 0;
  for (; w != nullptr; w = w->next_of_key, ++n) out.push_back(w);
  return n;
}

void KeyedQueue::remove_waiting(const std::function<bool(const WorkItem&)>& pred, std::vector<WorkItem*>& out) {
  // Ready items first: a removed ready keyed item takes its key's waiting items along.
  std::deque<WorkItem*> keep;
  for (WorkItem* w : ready_) {
    if (!pred(*w)) {
      keep.push_back(w);
      continue;
    }
    out.push_back(w);
    --queued_;
    if (!w->keyed) continue;
    queued_ -= append_chain(busy_.find(w->key)->head, out);
    busy_.erase(w->key);
  }
  ready_.swap(keep);
  // Then the waiting items of keys whose head runs: cut each chain at its first
  // removed item.
  busy_.for_each([&](Waiting& q) {
    WorkItem* before = nullptr;
    WorkItem* w = q.head;
    while (w != nullptr && !pred(*w)) {
      before = w;
      w = w->next_of_key;
    }
    if (w == nullptr) return;
    queued_ -= append_chain(w, out);
    (before != nullptr ? before->next_of_key : q.head) = nullptr;
    q.tail = before;
  });
}

}  // namespace idem::detail

#include "keyed_queue.hpp"

#include <algorithm>
#include <unordered_set>

namespace idem::detail {

void KeyedQueue::push(WorkItem* item) {
  ++queued_;
  if (!item->keyed) {
    ready_.push_back(item);
    return;
  }
  auto [it, fresh] = busy_.try_emplace(item->key);
  if (fresh) {
    ready_.push_back(item);
  } else {
    it->second.push_back(item);
  }
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
  auto it = busy_.find(item->key);
  if (it == busy_.end()) return false;
  if (it->second.empty()) {
    busy_.erase(it);
    return false;
  }
  ready_.push_back(it->second.front());
  it->second.pop_front();
  return true;
}

void KeyedQueue::remove_waiting(const std::function<bool(const WorkItem&)>& pred, std::vector<WorkItem*>& out) {
  // Ready items first: a removed ready keyed item takes its key's queue with it.
  std::deque<WorkItem*> keep;
  for (WorkItem* w : ready_) {
    if (!pred(*w)) {
      keep.push_back(w);
      continue;
    }
    out.push_back(w);
    --queued_;
    if (!w->keyed) continue;
    auto it = busy_.find(w->key);
    for (WorkItem* q : it->second) out.push_back(q);
    queued_ -= it->second.size();
    busy_.erase(it);
  }
  ready_.swap(keep);
  // Then the queues of keys whose head runs: cut each at its first removed item.
  for (auto& [key, q] : busy_) {
    auto first = std::find_if(q.begin(), q.end(), [&](WorkItem* w) { return pred(*w); });
    for (auto it = first; it != q.end(); ++it) out.push_back(*it);
    queued_ -= static_cast<std::size_t>(q.end() - first);
    q.erase(first, q.end());
  }
}

}  // namespace idem::detail

// The ids met so far in one batch, for "is this the id's first copy in the batch?".
// Internal.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::detail {

// An open-addressing set of views into the batch's own messages, which outlive it:
// one allocation per batch and no node per id (std::unordered_map made one per id
// and spent more freeing them than finding the repeats).
class BatchIds {
 public:
  // Sized for `expected` ids; more than that still work, at a longer probe.
  explicit BatchIds(std::size_t expected)
      : slots_(std::bit_ceil(std::max<std::size_t>(16, 2 * expected))), mask_(slots_.size() - 1) {}

  // Adds id. Returns true iff it was not in the set.
  bool insert(std::string_view id) {
    if (id.data() == nullptr) return !std::exchange(null_seen_, true);  // slots use it for "free"
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (std::size_t at = std::hash<std::string_view>{}(id)&mask_;; at = (at + 1) & mask_) {
      if (slots_[at].data() == nullptr) {
        slots_[at] = id;
        ++size_;
        return true;
      }
      if (slots_[at] == id) return false;
    }
  }

 private:
  void grow() {
    std::vector<std::string_view> old(slots_.size() * 2);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (std::string_view id : old) {
      if (id.data() == nullptr) continue;
      std::size_t at = std::hash<std::string_view>{}(id)&mask_;
      while (slots_[at].data() != nullptr) at = (at + 1) & mask_;
      slots_[at] = id;
    }
  }

  std::vector<std::string_view> slots_;  // a null data() marks a free slot
  std::size_t mask_;
  std::size_t size_ = 0;
  bool null_seen_ = false;  // the id with a null data() (an empty view) was inserted
};

}  // namespace idem::detail

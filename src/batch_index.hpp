// Dense indexes for the strings met in one batch (ids, entity keys). Internal.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::detail {

// An open-addressing map from views into the batch's own messages, which outlive it,
// to 0, 1, 2, … in order of first insertion: one allocation per batch and no node per
// string (std::unordered_map made one per string and spent more freeing them than
// finding the repeats).
class BatchIndex {
 public:
  // Sized for `expected` strings; more than that still work, at a longer probe.
  explicit BatchIndex(std::size_t expected)
      : slots_(std::bit_ceil(std::max<std::size_t>(16, 2 * expected))), mask_(slots_.size() - 1) {}

  // Returns s's index, and true iff s was not in the map before (it is now).
  std::pair<std::uint32_t, bool> insert(std::string_view s) {
    if (s.data() == nullptr) {  // slots use a null data() for "free"
      if (null_index_) return {*null_index_, false};
      null_index_ = size_++;
      return {*null_index_, true};
    }
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (std::size_t at = hash(s) & mask_;; at = (at + 1) & mask_) {
      Slot& slot = slots_[at];
      if (slot.s.data() == nullptr) {
        slot = {s, size_++};
        return {slot.index, true};
      }
      if (slot.s == s) return {slot.index, false};
    }
  }

  // How many distinct strings were inserted.
  std::size_t size() const { return size_; }

 private:
  // A fast hash of a string's bytes, eight at a time (the map lives for one batch, so
  // it need not resist chosen inputs): each word mixed by a multiply, then a final
  // avalanche, so that the low bits that pick the slot depend on every byte.
  static std::size_t hash(std::string_view s) {
    constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ULL;
    std::uint64_t h = s.size() * kMul;
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      std::uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      h = (h ^ w) * kMul;
    }
    if (i < s.size()) {
      std::uint64_t w = 0;
      std::memcpy(&w, s.data() + i, s.size() - i);
      h = (h ^ w) * kMul;
    }
    h ^= h >> 32;
    h *= kMul;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }

  struct Slot {
    std::string_view s;
    std::uint32_t index = 0;
  };

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (slot.s.data() == nullptr) continue;
      std::size_t at = hash(slot.s) & mask_;
      while (slots_[at].s.data() != nullptr) at = (at + 1) & mask_;
      slots_[at] = slot;
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_;
  std::uint32_t size_ = 0;
  std::optional<std::uint32_t> null_index_;  // the index of the empty view with a null data()
};

}  // namespace idem::detail

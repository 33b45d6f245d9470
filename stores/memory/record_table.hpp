// The id records of one memory: shard: a FIFO of records with an open-addressing index
// by id. Internal to idem::memory.
//
// Layout, chosen so that a claim of a new id touches one cold cache line (its index
// slot) and nothing else that is not already hot:
//  - records live in insertion order in blocks of kBlockEntries (a queue of blocks:
//    one is added at the back when the last is full, the front one leaves when its
//    records have all left and is kept as the spare for the next), addressed by a
//    64-bit sequence number; nothing is copied as the table grows;
//  - each record's id lives in an arena of chunks appended in the same order, so the
//    arena is freed from the front as records leave the front;
//  - the index is an array of 8-byte slots (a 32-bit hash tag, the low 32 bits of the
//    record's sequence number), linear probing, kept at most half full, with
//    backward-shift deletion (no tombstones). It is allocated at once for the records
//    the table expects (up to kMaxReservedSlots), zeroed lazily by the OS, so a table
//    that stays within that never rehashes; past it, the index doubles.
// Records leave only from the front (pop_front, or rotate_front which moves a record
// to the back), which is what makes the blocks and the arena FIFOs.
//
// Not thread-safe: the shard's lock guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/store.hpp"

namespace idem::memory_detail {

struct Record {
  RecordState state = RecordState::kPending;
  std::uint32_t owner = 0;  // index into the shard's interned owners (kInProgress)
  std::uint32_t retries = 0;
  std::int64_t lease_until_ms = 0;
  std::int64_t expires_ms = 0;  // pending / done records
  std::optional<std::uint64_t> fingerprint;
  std::unique_ptr<std::string> result;  // null: no result (rare, so kept out of line)
};

// A fast 64-bit hash of an id: eight bytes at a time, each word mixed by a multiply,
// then a final avalanche (MurmurHash3's fmix64), so both halves of the result are
// well mixed (the low half is the tag, the high half chooses the shard).
inline std::uint64_t hash_id(std::string_view id) {
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ULL;
  std::uint64_t h = id.size() * kMul;
  std::size_t i = 0;
  for (; i + 8 <= id.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, id.data() + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  if (i < id.size()) {
    std::uint64_t w = 0;
    if (id.size() >= 8) {
      std::memcpy(&w, id.data() + id.size() - 8, 8);  // the last 8 bytes, overlapping the word before
    } else {
      for (std::size_t k = id.size(); k > i; --k) w = (w << 8) | static_cast<unsigned char>(id[k - 1]);
    }
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ULL;
  h ^= h >> 33;
  return h;
}

// a == b, inline: ids and owners are short, and a call to memcmp costs more than
// comparing them eight bytes at a time.
inline bool same_bytes(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  std::size_t i = 0;
  for (; i + 8 <= a.size(); i += 8) {
    std::uint64_t x, y;
    std::memcpy(&x, a.data() + i, 8);
    std::memcpy(&y, b.data() + i, 8);
    if (x != y) return false;
  }
  if (i == a.size()) return true;
  if (a.size() >= 8) {  // the last 8 bytes, overlapping the word before
    std::uint64_t x, y;
    std::memcpy(&x, a.data() + a.size() - 8, 8);
    std::memcpy(&y, b.data() + b.size() - 8, 8);
    return x == y;
  }
  for (; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// The hash tag of an id: never 0 (0 marks an empty index slot).
inline std::uint32_t tag_of(std::uint64_t hash) {
  const auto t = static_cast<std::uint32_t>(hash);
  return t != 0 ? t : 1;
}

class RecordTable {
 public:
  struct Entry {
    const char* id = nullptr;  // in the arena; id_size bytes
    std::uint32_t id_size = 0;
    std::uint32_t tag = 0;
    Record record;
    std::string_view id_view() const { return {id, id_size}; }
  };

  // An empty table whose index has room for `expected` records without rehashing.
  explicit RecordTable(std::size_t expected);

  std::size_t size() const { return static_cast<std::size_t>(tail_ - head_); }

  // Returns id's record, or null if absent. `tag` is tag_of(hash of id).
  Record* find(std::string_view id, std::uint32_t tag);

  // A hint: starts loading the index slot where find(…, tag) begins.
  void prefetch(std::uint32_t tag) const { __builtin_prefetch(&slots_.get()[home(tag)]); }

  // Appends a new, empty record for id at the back. REQUIRES: id absent.
  Record& push_back(std::string_view id, std::uint32_t tag);

  // REQUIRES: size() > 0.
  const Entry& front() const { return at(head_); }
  // Removes the front record.
  void pop_front();
  // Moves the front record to the back (its id too), unchanged.
  void rotate_front();

  // Calls f(const Record&) for every record, front to back.
  template <class F>
  void for_each(F&& f) const {
    for (std::uint64_t s = head_; s != tail_; ++s) f(at(s).record);
  }

 private:
  struct Slot {
    std::uint32_t tag = 0;  // 0: empty
    std::uint32_t seq = 0;  // low 32 bits of the record's sequence number
  };

  // Ids, appended at the back and released from the front, in record order.
  class Arena {
   public:
    const char* append(std::string_view id);
    void release_front();  // releases the oldest id still held

   private:
    struct Chunk {
      std::unique_ptr<char[]> data;
      std::size_t capacity = 0, used = 0, live = 0;
    };
    static constexpr std::size_t kChunkBytes = 64 * 1024;
    std::deque<Chunk> chunks_;
  };

  static constexpr std::size_t kBlockEntries = 1024;  // a power of two

  // REQUIRES: head_ <= seq < base_ + kBlockEntries * blocks_.size().
  Entry& at(std::uint64_t seq) {
    const std::uint64_t off = seq - base_;
    return blocks_[off / kBlockEntries][off % kBlockEntries];
  }
  const Entry& at(std::uint64_t seq) const {
    const std::uint64_t off = seq - base_;
    return blocks_[off / kBlockEntries][off % kBlockEntries];
  }
  std::uint64_t seq_of(const Slot& s) const {
    return head_ + static_cast<std::uint32_t>(s.seq - static_cast<std::uint32_t>(head_));
  }
  std::size_t home(std::uint32_t tag) const { return tag & (slot_count_ - 1); }
  // The index slot of the record with sequence number seq.
  std::size_t slot_of(std::uint32_t tag, std::uint64_t seq) const;
  void erase_slot(std::size_t i);
  void insert_slot(std::uint32_t tag, std::uint64_t seq);
  void grow_index();
  // Makes at(tail_) valid: adds a block at the back if the last one is full.
  void reserve_back();
  // Removes the front record from the ring, returning it. Its id stays in the arena
  // until the caller's arena_.release_front().
  Entry take_front();

  std::deque<std::unique_ptr<Entry[]>> blocks_;  // each of kBlockEntries
  std::unique_ptr<Entry[]> spare_;               // the last block to leave the front, if any
  std::uint64_t base_ = 0;                       // the sequence number of blocks_[0][0]
  // Frees what zeroed_slots allocated.
  struct FreeSlots {
    std::size_t bytes;  // value-initialised (0) in a default unique_ptr
    void operator()(Slot* p) const;
  };
  // n zeroed slots: a large index is mapped from the OS, which zeroes it page by page
  // as it is first touched, so reserving it costs neither time nor resident memory up
  // front. Throws std::bad_alloc if memory is exhausted, as operator new would.
  static std::unique_ptr<Slot[], FreeSlots> zeroed_slots(std::size_t n);

  std::unique_ptr<Slot[], FreeSlots> slots_;  // slot_count_: a power of two, at most half full
  std::size_t slot_count_ = 0;
  std::uint64_t head_ = 0, tail_ = 0;
  Arena arena_;
};

}  // namespace idem::memory_detail

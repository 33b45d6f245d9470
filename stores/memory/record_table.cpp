#include "record_table.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

namespace idem::memory_detail {
namespace {

constexpr std::size_t kMinSlots = 64;                // index slots of the smallest table
constexpr std::size_t kMaxReservedSlots = 1u << 18;  // 2 MiB: the most reserved up front
constexpr std::size_t kMapBytes = 64 * 1024;         // an index this large is mapped, not allocated

// True iff slot k lies cyclically in (i, j]: a record homed at k may not move to i.
bool between(std::size_t i, std::size_t k, std::size_t j) { return i <= j ? (i < k && k <= j) : (i < k || k <= j); }

}  // namespace

const char* RecordTable::Arena::append(std::string_view id) {
  if (chunks_.empty() || chunks_.back().capacity - chunks_.back().used < id.size()) {
    Chunk c;
    c.capacity = std::max(kChunkBytes, id.size());
    c.data.reset(new char[c.capacity]);  // not zeroed: every byte is written before it is read
    chunks_.push_back(std::move(c));
  }
  Chunk& c = chunks_.back();
  char* p = c.data.get() + c.used;
  if (!id.empty()) std::memcpy(p, id.data(), id.size());
  c.used += id.size();
  ++c.live;
  return p;
}

void RecordTable::Arena::release_front() {
  // Ids leave in the order they came, so the oldest held id is in the first chunk.
  --chunks_.front().live;
  while (chunks_.front().live == 0) {
    if (chunks_.size() == 1) {
      chunks_.front().used = 0;  // keep the last chunk for reuse
      return;
    }
    chunks_.pop_front();
  }
}

RecordTable::RecordTable(std::size_t expected) {
  slot_count_ = kMinSlots;
  while (slot_count_ < kMaxReservedSlots && slot_count_ / 2 < expected) slot_count_ *= 2;
  slots_ = zeroed_slots(slot_count_);
}

std::unique_ptr<RecordTable::Slot[], RecordTable::FreeSlots> RecordTable::zeroed_slots(std::size_t n) {
  const std::size_t bytes = n * sizeof(Slot);
  void* p = nullptr;
  if (bytes >= kMapBytes) {
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
  } else {
    p = std::calloc(n, sizeof(Slot));
    if (p == nullptr) throw std::bad_alloc();
  }
  return std::unique_ptr<Slot[], FreeSlots>(static_cast<Slot*>(p), FreeSlots{bytes});
}

void RecordTable::FreeSlots::operator()(Slot* p) const {
  if (bytes >= kMapBytes) {
    munmap(p, bytes);
  } else {
    std::free(p);
  }
}

Record* RecordTable::find(std::string_view id, std::uint32_t tag) {
  const std::size_t mask = slot_count_ - 1;
  for (std::size_t i = home(tag);; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.tag == 0) return nullptr;
    if (s.tag != tag) continue;
    Entry& e = at(seq_of(s));
    if (same_bytes(e.id_view(), id)) return &e.record;
  }
}

Record& RecordTable::push_back(std::string_view id, std::uint32_t tag) {
  reserve_back();
  if (2 * (size() + 1) > slot_count_) grow_index();
  Entry& e = at(tail_);
  e.id = arena_.append(id);
  e.id_size = static_cast<std::uint32_t>(id.size());
  e.tag = tag;
  e.record = Record{};
  insert_slot(tag, tail_);
  ++tail_;
  return e.record;
}

void RecordTable::pop_front() {
  erase_slot(slot_of(front().tag, head_));
  (void)take_front();
  arena_.release_front();
}

void RecordTable::rotate_front() {
  const std::size_t slot = slot_of(front().tag, head_);
  Entry e = take_front();
  reserve_back();
  // Copy the id before its old copy is released: it may be the only one in its chunk.
  Entry& back = at(tail_);
  back.id = arena_.append(e.id_view());
  arena_.release_front();
  back.id_size = e.id_size;
  back.tag = e.tag;
  back.record = std::move(e.record);
  slots_[slot].seq = static_cast<std::uint32_t>(tail_);
  ++tail_;
}

RecordTable::Entry RecordTable::take_front() {
  Entry& f = at(head_);
  Entry e;
  e.id = f.id;
  e.id_size = f.id_size;
  e.tag = f.tag;
  e.record = std::move(f.record);
  f = Entry{};
  ++head_;
  if (head_ - base_ == kBlockEntries) {  // the front block is empty: keep it as the spare
    spare_ = std::move(blocks_.front());
    blocks_.pop_front();
    base_ += kBlockEntries;
  }
  return e;
}

void RecordTable::reserve_back() {
  if (tail_ - base_ < kBlockEntries * blocks_.size()) return;
  blocks_.push_back(spare_ ? std::move(spare_) : std::make_unique<Entry[]>(kBlockEntries));
}

std::size_t RecordTable::slot_of(std::uint32_t tag, std::uint64_t seq) const {
  const std::size_t mask = slot_count_ - 1;
  const auto low = static_cast<std::uint32_t>(seq);
  std::size_t i = home(tag);
  while (slots_[i].tag != tag || slots_[i].seq != low) i = (i + 1) & mask;
  return i;
}

void RecordTable::erase_slot(std::size_t i) {
  const std::size_t mask = slot_count_ - 1;
  for (std::size_t j = (i + 1) & mask; slots_[j].tag != 0; j = (j + 1) & mask) {
    if (between(i, home(slots_[j].tag), j)) continue;
    slots_[i] = slots_[j];
    i = j;
  }
  slots_[i] = Slot{};
}

void RecordTable::insert_slot(std::uint32_t tag, std::uint64_t seq) {
  const std::size_t mask = slot_count_ - 1;
  std::size_t i = home(tag);
  while (slots_[i].tag != 0) i = (i + 1) & mask;
  slots_[i] = Slot{tag, static_cast<std::uint32_t>(seq)};
}

void RecordTable::grow_index() {
  auto old = std::exchange(slots_, zeroed_slots(slot_count_ * 2));
  const std::size_t old_count = std::exchange(slot_count_, slot_count_ * 2);
  for (std::size_t i = 0; i < old_count; ++i)
    if (old[i].tag != 0) insert_slot(old[i].tag, old[i].seq);
}

}  // namespace idem::memory_detail

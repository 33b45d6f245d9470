#include "record_table.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace idem::memory_detail {
namespace {

constexpr std::size_t kInitialSlots = 64;  // index slots of an empty table

// True iff slot k lies cyclically in (i, j]: a record homed at k may not move to i.
bool between(std::size_t i, std::size_t k, std::size_t j) { return i <= j ? (i < k && k <= j) : (i < k || k <= j); }

}  // namespace

const char* RecordTable::Arena::append(std::string_view id) {
  if (chunks_.empty() || chunks_.back().capacity - chunks_.back().used < id.size()) {
    Chunk c;
    c.capacity = std::max(kChunkBytes, id.size());
    c.data = std::make_unique<char[]>(c.capacity);
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

RecordTable::RecordTable() : slots_(kInitialSlots) {}

Record* RecordTable::find(std::string_view id, std::uint32_t tag) {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = home(tag);; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.tag == 0) return nullptr;
    if (s.tag != tag) continue;
    Entry& e = at(seq_of(s));
    if (e.id_size == id.size() && std::memcmp(e.id, id.data(), id.size()) == 0) return &e.record;
  }
}

Record& RecordTable::push_back(std::string_view id, std::uint32_t tag) {
  reserve_back();
  if (2 * (size() + 1) > slots_.size()) grow_index();
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
  const std::size_t mask = slots_.size() - 1;
  const auto low = static_cast<std::uint32_t>(seq);
  std::size_t i = home(tag);
  while (slots_[i].tag != tag || slots_[i].seq != low) i = (i + 1) & mask;
  return i;
}

void RecordTable::erase_slot(std::size_t i) {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t j = (i + 1) & mask; slots_[j].tag != 0; j = (j + 1) & mask) {
    if (between(i, home(slots_[j].tag), j)) continue;
    slots_[i] = slots_[j];
    i = j;
  }
  slots_[i] = Slot{};
}

void RecordTable::insert_slot(std::uint32_t tag, std::uint64_t seq) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = home(tag);
  while (slots_[i].tag != 0) i = (i + 1) & mask;
  slots_[i] = Slot{tag, static_cast<std::uint32_t>(seq)};
}

void RecordTable::grow_index() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  for (const Slot& s : old)
    if (s.tag != 0) insert_slot(s.tag, s.seq);
}

}  // namespace idem::memory_detail

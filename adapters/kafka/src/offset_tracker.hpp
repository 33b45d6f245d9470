// The offset tracker of one Kafka partition (docs/adapters.md, Kafka): which of the
// offsets handed to the runtime have their decision applied, and so which offset the
// consumer group may commit. Handlers finish out of order (different keys run on
// different workers), but a committed offset N says "everything below N is done": the
// tracker commits only the contiguous prefix of decided offsets, so a crash never
// skips an undecided message and redelivers as little as possible.
//
// Offsets need not be consecutive (compacted topics, transaction markers): the prefix
// is contiguous in the offsets that were fetched. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

namespace idem::kafka::detail {

class OffsetTracker {
 public:
  // Records that `offset` was fetched and is undecided. REQUIRES: offset is greater
  // than every offset added before (Kafka delivers a partition in offset order);
  // returns false (and records nothing) otherwise.
  bool add(std::int64_t offset);

  // Records the decision of `offset`. Returns false when the offset is not undecided
  // here (never added, decided already, or below the committed prefix).
  bool done(std::int64_t offset);

  // The offset to commit (the group's next offset to read): the lowest undecided
  // offset, or one past the highest offset when all are decided. nullopt when nothing
  // was added yet, or when it equals the last offset recorded: by sent() or
  // committed() for an asynchronous commit, by committed() alone for a synchronous
  // one (an asynchronous commit may fail unseen, so a synchronous one makes it again).
  std::optional<std::int64_t> to_commit(bool sync = true) const;

  // Records that `offset` (a value to_commit() returned) went in an asynchronous
  // commit, whose outcome is not known.
  void sent(std::int64_t offset) { sent_ = offset; }

  // Records that `offset` (a value to_commit() returned) was committed.
  void committed(std::int64_t offset) { committed_ = sent_ = offset; }

  // How many fetched offsets await their decision.
  std::size_t undecided() const { return undecided_; }

 private:
  struct Entry {
    std::int64_t offset;
    bool done;
  };
  std::deque<Entry> window_;     // from the lowest undecided offset on, ascending
  std::int64_t next_ = -1;       // one past the highest offset added; -1: none yet
  std::int64_t committed_ = -1;  // the last committed() offset; -1: none
  std::int64_t sent_ = -1;       // the last sent() or committed() offset; -1: none
  std::size_t undecided_ = 0;
};

}  // namespace idem::kafka::detail

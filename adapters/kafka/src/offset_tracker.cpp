#include "offset_tracker.hpp"

#include <algorithm>

namespace idem::kafka::detail {

bool OffsetTracker::add(std::int64_t offset) {
  if (offset < 0 || offset < next_) return false;
  window_.push_back({offset, false});
  next_ = offset + 1;
  ++undecided_;
  return true;
}

bool OffsetTracker::done(std::int64_t offset) {
  auto it = std::lower_bound(window_.begin(), window_.end(), offset,
                             [](const Entry& e, std::int64_t o) { return e.offset < o; });
  if (it == window_.end() || it->offset != offset || it->done) return false;
  it->done = true;
  --undecided_;
  while (!window_.empty() && window_.front().done) window_.pop_front();
  return true;
}

std::optional<std::int64_t> OffsetTracker::to_commit(bool sync) const {
  if (next_ < 0) return std::nullopt;
  const std::int64_t at = window_.empty() ? next_ : window_.front().offset;
  if (at == (sync ? committed_ : sent_)) return std::nullopt;
  return at;
}

}  // namespace idem::kafka::detail

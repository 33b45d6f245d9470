// Watermarks of Ordering::kWatermark: per stream, the largest position acked. Internal.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace idem::detail {

// Thread-safe. In memory only: after a restart the broker redelivers from its
// committed cursor and the dedup stage (if any) answers what the filter would have.
class Watermarks {
 public:
  // Returns the stream's watermark, or nullopt if none is set.
  std::optional<std::uint64_t> get(std::string_view stream) const {
    std::lock_guard lock(mu_);
    auto it = marks_.find(stream);
    if (it == marks_.end()) return std::nullopt;
    return it->second;
  }
  // Raises the stream's watermark to `position` (never lowers it).
  void advance(std::string_view stream, std::uint64_t position) {
    std::lock_guard lock(mu_);
    auto it = marks_.find(stream);
    if (it == marks_.end()) {
      marks_.emplace(std::string(stream), position);
      return;
    }
    if (it->second < position) it->second = position;
  }
  // Sets the stream's watermark to `position`, lower or higher.
  void reset(std::string_view stream, std::uint64_t position) {
    std::lock_guard lock(mu_);
    marks_[std::string(stream)] = position;
  }

 private:
  // Looked up by string_view without building a string (a lookup per message).
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::uint64_t, Hash, std::equal_to<>> marks_;
};

}  // namespace idem::detail

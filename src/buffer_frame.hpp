// The bytes idem stores in a reorder-buffer entry: the message's event (for the state
// machine at drain time) and the user's encoded message. Internal.
//
//   "idem1" | u32 little-endian event length | event | encoded message
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace idem::detail {

inline constexpr std::string_view kBufferFrameMagic = "idem1";

inline std::string frame_buffered(std::string_view event, std::string_view message) {
  std::string out;
  out.reserve(kBufferFrameMagic.size() + 4 + event.size() + message.size());
  out += kBufferFrameMagic;
  const auto n = static_cast<std::uint32_t>(event.size());
  for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xFF);
  out += event;
  out += message;
  return out;
}

struct BufferFrame {
  std::string_view event;
  std::string_view message;
};

// Returns the parts of a framed entry, or nullopt if `bytes` is not one.
inline std::optional<BufferFrame> unframe_buffered(std::string_view bytes) {
  if (bytes.size() < kBufferFrameMagic.size() + 4 || bytes.substr(0, kBufferFrameMagic.size()) != kBufferFrameMagic)
    return std::nullopt;
  bytes.remove_prefix(kBufferFrameMagic.size());
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  bytes.remove_prefix(4);
  if (n > bytes.size()) return std::nullopt;
  return BufferFrame{bytes.substr(0, n), bytes.substr(n)};
}

}  // namespace idem::detail

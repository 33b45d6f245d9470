// Internal helpers for names in messages.
#pragma once

#include <string>
#include <string_view>

namespace idem::detail {

// Longest part of a name quoted in a message, in bytes.
inline constexpr std::size_t kMaxQuotedBytes = 300;

// Returns `name` in double quotes, with " and \ and control bytes escaped, cut after
// kMaxQuotedBytes bytes (marked with "…").
std::string quote_name(std::string_view name);

}  // namespace idem::detail

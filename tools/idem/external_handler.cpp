#include "external_handler.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace idem::cli {

StatusOr<std::unique_ptr<ExternalHandler>> open_external_handler(std::string_view spec,
                                                                 const ExternalHandlerOptions& options) {
  if (spec.starts_with("exec:")) {
    if (spec.size() == 5) return invalid_argument("--handler: exec: needs a command");
    return open_exec_handler(spec.substr(5), options);
  }
  if (spec.starts_with("http://") || spec.starts_with("https://")) return open_http_handler(spec, options);
  return invalid_argument("--handler: \"" + external::head(spec, 60) +
                          "\" is neither http://HOST:PORT/PATH nor exec:COMMAND");
}

namespace external {

std::string timed_out(Duration timeout) {
  return "the handler timed out after " + std::to_string(timeout.count()) + " ms";
}

std::int64_t ms_left(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max<std::int64_t>(1, left.count());
}

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = 0;  // continuation bytes
    std::uint32_t cp = 0;
    if ((c >> 5) == 6) {
      n = 1, cp = c & 0x1f;
    } else if ((c >> 4) == 14) {
      n = 2, cp = c & 0x0f;
    } else if ((c >> 3) == 30) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 2) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    static constexpr std::uint32_t kLeast[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kLeast[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

std::string head(std::string_view text, std::size_t max) {
  if (text.size() <= max) return std::string(text);
  return std::string(text.substr(0, max)) + "…";
}

}  // namespace external
}  // namespace idem::cli

#include "names.hpp"

#include <cstdio>

namespace idem::detail {

std::string quote_name(std::string_view name) {
  const bool cut = name.size() > kMaxQuotedBytes;
  if (cut) name = name.substr(0, kMaxQuotedBytes);
  std::string out = "\"";
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  out += cut ? "\"…" : "\"";
  return out;
}

}  // namespace idem::detail

#include "entity_layout.hpp"

namespace idem::redis::detail {

std::string escape_tag(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 4);
  for (char c : bytes) {
    if (c == '%') {
      out += "%25";
    } else if (c == '}') {
      out += "%7D";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {
std::string tagged(const std::string& prefix, std::string_view entity_key, std::string_view suffix) {
  std::string k;
  k.reserve(prefix.size() + entity_key.size() + suffix.size() + 4);
  k += prefix;
  k += '{';
  k += escape_tag(entity_key);
  k += '}';
  k += suffix;
  return k;
}
}  // namespace

EntityKeys entity_keys(const std::string& prefix, std::string_view entity_key) {
  std::string base = tagged(prefix, entity_key, "");
  return EntityKeys{base + ":e", base + ":b", base + ":t"};
}

std::string entity_id_key(const std::string& prefix, std::string_view entity_key, std::string_view id) {
  return tagged(prefix, entity_key, ":d:") + escape_tag(id);
}

std::string buffer_totals_key(const std::string& prefix) { return prefix + "{%}:totals"; }
std::string buffer_index_key(const std::string& prefix) { return prefix + "{%}:index"; }

std::string ver8(std::uint64_t version) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = static_cast<char>(version & 0xff);
    version >>= 8;
  }
  return out;
}

std::uint64_t from_ver8(std::string_view bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8 && i < bytes.size(); ++i) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

std::string lex_lo(std::uint64_t version) { return "[" + ver8(version); }

std::string lex_hi(std::uint64_t version) {
  if (version == UINT64_MAX) return "+";
  return "(" + ver8(version + 1);
}

}  // namespace idem::redis::detail

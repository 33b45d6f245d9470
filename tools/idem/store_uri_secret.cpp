#include "store_uri_secret.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>

namespace idem::cli {
namespace {

// Where the user part of uri is: [begin, at) between "//" and the last '@' ahead of
// the query (as the redis: URI parser reads it).
struct UserPart {
  std::size_t begin = 0;
  std::size_t at = 0;
};

std::optional<UserPart> user_part(std::string_view uri) {
  const std::string_view head = uri.substr(0, uri.find('?'));
  const std::size_t at = head.rfind('@');
  if (at == std::string_view::npos) return std::nullopt;
  const std::size_t slashes = head.find("//");
  if (slashes == std::string_view::npos || slashes > at) return std::nullopt;  // no authority: a path
  return UserPart{slashes + 2, at};
}

// The password's offset inside the user part: after the first ':', else all of it.
std::size_t password_offset(std::string_view user) {
  const std::size_t colon = user.find(':');
  return colon == std::string_view::npos ? 0 : colon + 1;
}

std::string percent_decoded(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

void replace_all(std::string& text, std::string_view what, std::string_view with) {
  if (what.empty()) return;
  for (std::size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + with.size()))
    text.replace(pos, what.size(), with);
}

}  // namespace

std::string redact_uri(std::string_view uri) {
  const auto p = user_part(uri);
  if (!p) return std::string(uri);
  const std::string_view user = uri.substr(p->begin, p->at - p->begin);
  return std::string(uri.substr(0, p->begin)) + std::string(user.substr(0, password_offset(user))) + "***" +
         std::string(uri.substr(p->at));
}

std::string scrub_secrets(std::string_view message, std::string_view uri) {
  std::string out(message);
  const auto p = user_part(uri);
  if (!p) return out;
  replace_all(out, uri, redact_uri(uri));
  const std::string_view user = uri.substr(p->begin, p->at - p->begin);
  const std::string_view password = user.substr(password_offset(user));
  std::vector<std::string> secrets{std::string(password), percent_decoded(password)};
  std::sort(secrets.begin(), secrets.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (const std::string& s : secrets) replace_all(out, s, "***");
  return out;
}

}  // namespace idem::cli

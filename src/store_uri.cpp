#include "idem/store_uri.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>

namespace idem {
namespace {

StatusOr<std::string> percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2])))
      return invalid_argument("store URI: bad %-escape at \"" + std::string(s.substr(i, 3)) + "\"");
    out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
    i += 2;
  }
  return out;
}

}  // namespace

StatusOr<StoreUri> StoreUri::parse(std::string_view uri) {
  const auto colon = uri.find(':');
  if (colon == std::string_view::npos || colon == 0)
    return invalid_argument("store URI \"" + std::string(uri) +
                            "\" has no scheme; expected e.g. memory:, sqlite:PATH, rocksdb:PATH, redis://HOST:PORT");
  StoreUri u;
  u.scheme = std::string(uri.substr(0, colon));
  std::transform(u.scheme.begin(), u.scheme.end(), u.scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string_view rest = uri.substr(colon + 1);
  const auto q = rest.find('?');
  auto body = percent_decode(rest.substr(0, q));
  if (!body.ok()) return body.status();
  u.body = std::move(body).value();
  if (q == std::string_view::npos) return u;
  std::string_view query = rest.substr(q + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    auto name = percent_decode(pair.substr(0, eq));
    auto value = percent_decode(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1));
    if (!name.ok()) return name.status();
    if (!value.ok()) return value.status();
    if (name->empty()) return invalid_argument("store URI: a parameter has an empty name");
    if (u.param(*name)) return invalid_argument("store URI: parameter \"" + *name + "\" is given twice");
    u.params.emplace_back(std::move(name).value(), std::move(value).value());
  }
  return u;
}

std::optional<std::string> StoreUri::param(std::string_view name) const {
  for (const auto& [k, v] : params)
    if (k == name) return v;
  return std::nullopt;
}

Status StoreUri::check_params(std::initializer_list<std::string_view> known) const {
  for (const auto& [k, v] : params) {
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    std::string list;
    for (auto n : known) list += (list.empty() ? "" : ", ") + std::string(n);
    return invalid_argument("store URI (" + scheme + ":): unknown parameter \"" + k + "\"" +
                            (list.empty() ? std::string(" (this store takes none)") : "; known: " + list));
  }
  return ok_status();
}

StatusOr<std::uint64_t> StoreUri::param_uint(std::string_view name, std::uint64_t fallback) const {
  auto v = param(name);
  if (!v) return fallback;
  std::uint64_t out = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || p != v->data() + v->size() || v->empty())
    return invalid_argument("store URI: parameter \"" + std::string(name) + "\" must be an unsigned integer, not \"" +
                            *v + "\"");
  return out;
}

StatusOr<bool> StoreUri::param_bool(std::string_view name, bool fallback) const {
  auto v = param(name);
  if (!v) return fallback;
  if (*v == "1" || *v == "true" || *v == "on" || *v == "yes") return true;
  if (*v == "0" || *v == "false" || *v == "off" || *v == "no") return false;
  return invalid_argument("store URI: parameter \"" + std::string(name) + "\" must be true or false, not \"" + *v +
                          "\"");
}

StatusOr<double> StoreUri::param_double(std::string_view name, double fallback) const {
  auto v = param(name);
  if (!v) return fallback;
  char* end = nullptr;
  const double d = std::strtod(v->c_str(), &end);
  if (v->empty() || end != v->c_str() + v->size())
    return invalid_argument("store URI: parameter \"" + std::string(name) + "\" must be a number, not \"" + *v + "\"");
  return d;
}

}  // namespace idem

#include "idem/backend/store_uri.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <vector>

#include <sys/stat.h>

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
      // Not echoed: the escape may be part of a password.
      return invalid_argument("store URI: a '%' is not followed by two hex digits (write '%' as %25)");
    out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
    i += 2;
  }
  return out;
}

// Where the password of a URI is written: [begin, end).
struct Span {
  std::size_t begin = 0;
  std::size_t end = 0;
};

// The body of uri (between the scheme's ':' and the '?') percent-decoded as
// StoreUri::parse decodes it, with the offset in uri of each decoded byte (and of the
// body's end), so that a password found in the decoded body is found where it is
// written.
struct DecodedBody {
  std::string text;
  std::vector<std::size_t> offset;  // text.size() + 1 entries
};

DecodedBody decoded_body(std::string_view uri, std::size_t start) {
  const std::string_view rest = uri.substr(start);
  const std::string_view body = rest.substr(0, rest.find('?'));
  DecodedBody d;
  for (std::size_t i = 0; i < body.size(); ++i) {
    d.offset.push_back(start + i);
    if (body[i] == '%' && i + 2 < body.size() && std::isxdigit(static_cast<unsigned char>(body[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(body[i + 2]))) {
      d.text += static_cast<char>(std::stoi(std::string(body.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      d.text += body[i];
    }
  }
  d.offset.push_back(start + body.size());
  return d;
}

// The password as the parsers read it, in the decoded body "//…": the user part
// "USER:PASSWORD@", or "PASSWORD@" when `lone_is_password` (redis-cli's reading; else
// a lone part is a user name and there is no password), up to the last '@'. Without
// an '@', "//USER:PASSWORD/…" whose '@' was forgotten reads as HOST:PORT with a port
// that is not a number: everything after the first ':' of such a first server is taken
// for a password ("[::1]:6379" and "host:6379" have none). Indexes into d.text.
std::optional<Span> password_in(std::string_view d, bool lone_is_password) {
  if (d.substr(0, 2) != "//") return std::nullopt;  // no authority: a path
  if (const std::size_t at = d.rfind('@'); at != std::string_view::npos && at >= 2) {
    const std::size_t colon = d.substr(2, at - 2).find(':');
    if (colon == std::string_view::npos && !lone_is_password) return std::nullopt;
    return Span{colon == std::string_view::npos ? 2 : 2 + colon + 1, at};
  }
  const std::size_t slash = d.find('/', 2);
  std::string_view server = d.substr(2, slash == std::string_view::npos ? std::string_view::npos : slash - 2);
  server = server.substr(0, server.find(','));
  const std::size_t first = server.find(':');
  if (first == std::string_view::npos) return std::nullopt;
  const std::string_view port = server.substr(server.rfind(':') + 1);
  if (!port.empty() && std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return Span{2 + first + 1, 2 + server.size()};
}

// Whether uri's scheme reads a user part without ':' as a user name (libpq, AMQP,
// NATS, also over TLS): "postgres://alice@host" has no password. Redis's reads it as
// the password, and so does any other or no scheme, to be safe.
bool lone_part_is_user(std::string_view uri) {
  const std::size_t colon = uri.find("://");
  if (colon == std::string_view::npos) return false;
  const std::string_view scheme = uri.substr(0, colon);
  for (std::string_view s : {"postgres", "postgresql", "amqp", "amqps", "nats", "tls"})
    if (scheme == s) return true;
  return false;
}

// text with its %XX escapes decoded; a bad escape is left as written.
std::string lenient_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// Adds the value of every secret parameter (secret_name) of the query starting at
// uri[start], matched as written and as decoded.
void add_password_params(std::string_view uri, std::size_t start, std::vector<Span>& spans) {
  while (start < uri.size()) {
    const std::size_t amp = std::min(uri.find('&', start), uri.size());
    const std::string_view pair = uri.substr(start, amp - start);
    const std::size_t eq = pair.find('=');
    if (eq != std::string_view::npos && secret_name(lenient_decode(pair.substr(0, eq))) && eq + 1 < pair.size())
      spans.push_back({start + eq + 1, amp});
    start = amp + 1;
  }
}

// `spans` sorted, with overlapping spans joined into one.
std::vector<Span> merged(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  std::vector<Span> out;
  for (const Span& s : spans) {
    if (!out.empty() && s.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, s.end);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

// Where the password may be written: where the parsers that decode first read it
// (redis://, redis-stream://: after the scheme's ':', decoded), and where those that
// split first read it (amqp://, or a URI without a scheme: after the first "//", as
// written). Both are redacted.
std::vector<Span> password_spans(std::string_view uri) {
  std::vector<Span> spans;
  const bool lone_is_password = !lone_part_is_user(uri);
  if (const std::size_t colon = uri.find(':'); colon != std::string_view::npos) {
    const DecodedBody d = decoded_body(uri, colon + 1);
    if (const auto p = password_in(d.text, lone_is_password)) spans.push_back({d.offset[p->begin], d.offset[p->end]});
  }
  const std::size_t q = uri.find('?');
  const std::string_view head = uri.substr(0, q);
  if (const std::size_t slashes = head.find("//"); slashes != std::string_view::npos) {
    if (const auto p = password_in(head.substr(slashes), lone_is_password))
      spans.push_back({slashes + p->begin, slashes + p->end});
  }
  if (q != std::string_view::npos) add_password_params(uri, q + 1, spans);
  return spans;
}

void replace_all(std::string& text, std::string_view what, std::string_view with) {
  if (what.empty()) return;
  for (std::size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + with.size()))
    text.replace(pos, what.size(), with);
}

}  // namespace

bool secret_name(std::string_view name) {
  if (secret_reference(name)) return false;  // a path or a variable's name, not the secret
  for (std::string_view word : {"password", "secret", "token"})
    if (name.find(word) != std::string_view::npos) return true;
  return false;
}

std::optional<std::string> secret_reference(std::string_view name) {
  for (std::string_view suffix : {"_file", "_env"}) {
    if (!name.ends_with(suffix)) continue;
    const std::string_view stem = name.substr(0, name.size() - suffix.size());
    if (!stem.empty() && secret_name(stem)) return std::string(stem);
  }
  return std::nullopt;
}

std::string redact_uri(std::string_view uri) {
  std::string out;
  std::size_t from = 0;
  for (const Span& s : merged(password_spans(uri))) {
    out.append(uri.substr(from, s.begin - from)).append("***");
    from = s.end;
  }
  return out.append(uri.substr(from));
}

std::string scrub_secrets(std::string_view message, std::string_view uri) {
  std::string out(message);
  const std::vector<Span> spans = password_spans(uri);
  if (spans.empty()) return out;
  replace_all(out, uri, redact_uri(uri));
  // Each password as written and as decoded, longest first.
  std::vector<std::string> secrets;
  for (const Span& s : spans) {
    const std::string_view written = uri.substr(s.begin, s.end - s.begin);
    secrets.emplace_back(written);
    secrets.push_back(lenient_decode(written));
  }
  std::sort(secrets.begin(), secrets.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (const std::string& s : secrets) replace_all(out, s, "***");
  return out;
}

std::optional<UserInfo> take_userinfo(std::string_view* rest) {
  const auto at = rest->rfind('@');
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view userinfo = rest->substr(0, at);
  rest->remove_prefix(at + 1);
  UserInfo u;
  const auto colon = userinfo.find(':');
  u.user = std::string(userinfo.substr(0, colon));
  if (colon != std::string_view::npos) u.password = std::string(userinfo.substr(colon + 1));
  return u;
}

StatusOr<UserInfo> credentials(std::optional<UserInfo> info, const StoreUri& u, bool lone_is_password) {
  UserInfo out;
  const auto param = u.param("password");
  if (info && info->password && param)
    return invalid_argument("the password is given twice (in the user part and as a parameter)");
  if (info && !info->password && lone_is_password && !param) {
    out.password = std::move(info->user);
  } else if (info) {
    out = std::move(*info);
  }
  if (param) out.password = *param;
  if (out.password && out.password->empty()) return invalid_argument("empty password");
  return out;
}

StatusOr<std::uint16_t> parse_port(std::string_view text) {
  unsigned port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc{} || end != text.data() + text.size() || port == 0 || port > 65535)
    return invalid_argument("the port is not a number in 1..65535");
  return static_cast<std::uint16_t>(port);
}

StatusOr<HostPort> parse_host_port(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return invalid_argument("the server is not HOST:PORT");
  auto port = parse_port(text.substr(colon + 1));
  if (!port.ok()) return port.status();
  return HostPort{std::string(text.substr(0, colon)), *port};
}

namespace {

// A secret file is small; /dev/zero or a FIFO named by mistake must not hang a start.
constexpr std::size_t kMaxSecretBytes = 64 * 1024;

StatusOr<std::string> read_secret_file(const std::string& name, const std::string& path) {
  const auto bad = [&](const std::string& why) {
    return invalid_argument("URI parameter " + name + ": \"" + path + "\" " + why);
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return bad(std::string("cannot be read: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return bad("is not a regular file");
  if (static_cast<std::size_t>(st.st_size) > kMaxSecretBytes) return bad("is larger than 64 KiB");
  std::ifstream f(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!f.good() && !f.eof()) return bad("cannot be read");
  if (text.ends_with('\n')) text.pop_back();
  if (text.ends_with('\r')) text.pop_back();
  if (text.empty()) return bad("is empty");
  return text;
}

StatusOr<std::string> read_secret_env(const std::string& name, const std::string& var) {
  const char* v = std::getenv(var.c_str());
  if (v == nullptr || *v == '\0')
    return invalid_argument("URI parameter " + name + ": the environment variable \"" + var +
                            "\" is not set or empty");
  return std::string(v);
}

// Replaces each secret reference (StoreUri::parse) of u by the secret.
Status resolve_secrets(StoreUri& u) {
  for (auto& [name, value] : u.params) {
    const auto stem = secret_reference(name);
    if (!stem) continue;
    if (u.param(*stem))
      return invalid_argument("URI parameter " + *stem + " is given twice (inline and as " + name + ")");
    auto secret = name.ends_with("_file") ? read_secret_file(name, value) : read_secret_env(name, value);
    if (!secret.ok()) return secret.status();
    name = *stem;
    value = std::move(secret).value();
  }
  return ok_status();
}

}  // namespace

StatusOr<StoreUri> StoreUri::parse(std::string_view uri) {
  const auto colon = uri.find(':');
  if (colon == std::string_view::npos || colon == 0)
    return invalid_argument("store URI \"" + redact_uri(uri) +
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
  if (Status s = resolve_secrets(u); !s.ok()) return s;
  return u;
}

std::optional<std::string> StoreUri::param(std::string_view name) const {
  for (const auto& [k, v] : params)
    if (k == name) return v;
  return std::nullopt;
}

Status StoreUri::check_params(std::initializer_list<std::string_view> known) const {
  return check_params(known, {});
}

Status StoreUri::check_params(std::initializer_list<std::string_view> known,
                              std::span<const std::string_view> more) const {
  for (const auto& [k, v] : params) {
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    if (std::find(more.begin(), more.end(), k) != more.end()) continue;
    std::string list;
    for (auto n : known) list += (list.empty() ? "" : ", ") + std::string(n);
    for (auto n : more) list += (list.empty() ? "" : ", ") + std::string(n);
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

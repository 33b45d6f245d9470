#include "trace_line.hpp"

#include <nlohmann/json.hpp>
#include <string>

namespace idem::cli {
namespace {

using Json = nlohmann::json;

std::string quoted(std::string_view name) { return "\"" + std::string(name) + "\""; }

std::string wrong_type(std::string_view name, std::string_view wanted, const Json& value) {
  return quoted(name) + " must be " + std::string(wanted) + ", got " + value.type_name();
}

// Each reader returns an error text, empty on success; an absent field is left unset.
std::string read_string(const Json& obj, std::string_view name, std::optional<std::string>& out) {
  auto it = obj.find(name);
  if (it == obj.end()) return {};
  if (!it->is_string()) return wrong_type(name, "a string", *it);
  out = it->get<std::string>();
  return {};
}

std::string read_uint(const Json& obj, std::string_view name, std::uint64_t max, std::optional<std::uint64_t>& out) {
  auto it = obj.find(name);
  if (it == obj.end()) return {};
  if (!it->is_number_unsigned()) return wrong_type(name, "a non-negative integer", *it);
  const auto v = it->get<std::uint64_t>();
  if (v > max) return quoted(name) + " must be at most " + std::to_string(max) + ", got " + std::to_string(v);
  out = v;
  return {};
}

std::string read_bool(const Json& obj, std::string_view name, bool& out) {
  auto it = obj.find(name);
  if (it == obj.end()) return {};
  if (!it->is_boolean()) return wrong_type(name, "a boolean", *it);
  out = it->get<bool>();
  return {};
}

// "publish": an array of {"to": non-empty string, "payload": any JSON (optional)}.
std::string read_publish(const Json& obj, std::vector<PublishRequest>& out) {
  auto it = obj.find("publish");
  if (it == obj.end()) return {};
  if (!it->is_array()) return wrong_type("publish", "an array", *it);
  for (const Json& item : *it) {
    if (!item.is_object()) return wrong_type("publish[]", "an object", item);
    std::optional<std::string> to;
    if (std::string e = read_string(item, "to", to); !e.empty()) return "\"publish\": " + e;
    if (!to || to->empty()) return "\"publish\": each item needs a non-empty \"to\"";
    PublishRequest p{*to, {}};
    if (auto pl = item.find("payload"); pl != item.end())
      p.payload = pl->is_string() ? pl->get<std::string>() : pl->dump(-1, ' ', false, Json::error_handler_t::replace);
    out.push_back(std::move(p));
  }
  return {};
}

// nlohmann's messages start with "[json.exception.parse_error.101] " and name "line 1"
// of the text it was given; drop both, the decision already names the trace line.
std::string without_tag(std::string message) {
  if (!message.empty() && message.front() == '[') {
    const auto end = message.find("] ");
    if (end != std::string::npos) message.erase(0, end + 2);
  }
  constexpr std::string_view kLineOne = "at line 1, ";
  if (const auto at = message.find(kLineOne); at != std::string::npos) message.erase(at + 3, kLineOne.size() - 3);
  return message;
}

}  // namespace

ParsedLine parse_trace_line(std::string_view text) {
  ParsedLine p;
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (text.find_first_not_of(" \t") == std::string_view::npos) {
    p.error = "empty line (each line must be one JSON object)";
    return p;
  }
  Json obj;
  try {
    obj = Json::parse(text);
  } catch (const Json::exception& e) {
    p.error = "invalid JSON: " + without_tag(e.what());
    return p;
  }
  if (!obj.is_object()) {
    p.error = std::string("a line must be a JSON object, got ") + obj.type_name();
    return p;
  }
  TraceLine& t = p.line;
  constexpr auto kAnyUint = ~std::uint64_t{0};
  for (std::string e :
       {read_string(obj, "id", t.id), read_string(obj, "key", t.key), read_uint(obj, "version", kAnyUint, t.version),
        read_string(obj, "event", t.event), read_string(obj, "payload", t.payload),
        read_string(obj, "stream", t.stream), read_uint(obj, "position", kAnyUint, t.position),
        read_uint(obj, "at_ms", kMaxAtMs, t.at_ms), read_bool(obj, "fail", t.fail), read_bool(obj, "reset", t.reset),
        read_publish(obj, t.publish)}) {
    if (!e.empty()) {
      p.error = std::move(e);
      return p;
    }
  }
  if (t.reset && (!t.stream || !t.position)) p.error = "a reset line needs \"stream\" and \"position\"";
  return p;
}

}  // namespace idem::cli

namespace idem::cli {

std::string encode_trace_line(const TraceLine& t) {
  Json obj = Json::object();
  auto put = [&obj](const char* name, const auto& field) {
    if (field) obj[name] = *field;
  };
  put("id", t.id);
  put("key", t.key);
  put("version", t.version);
  put("event", t.event);
  put("payload", t.payload);
  put("stream", t.stream);
  put("position", t.position);
  put("at_ms", t.at_ms);
  if (t.fail) obj["fail"] = true;
  if (t.reset) obj["reset"] = true;
  if (!t.publish.empty()) {
    Json list = Json::array();
    for (const PublishRequest& p : t.publish) list.push_back({{"to", p.to}, {"payload", p.payload}});
    obj["publish"] = std::move(list);
  }
  // Strings came from JSON, so they are valid UTF-8; replace guards against misuse.
  return obj.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Extractors<TraceLine> trace_extractors() {
  Extractors<TraceLine> x;
  x.id = [](const TraceLine& m) -> std::optional<std::string_view> {
    if (!m.id) return std::nullopt;
    return std::string_view(*m.id);
  };
  x.payload = [](const TraceLine& m) -> std::optional<std::string_view> {
    if (!m.payload) return std::nullopt;
    return std::string_view(*m.payload);
  };
  auto text = [](const std::optional<std::string>& f) -> std::optional<std::string_view> {
    if (!f) return std::nullopt;
    return std::string_view(*f);
  };
  x.key = [text](const TraceLine& m) { return text(m.key); };
  x.event = [text](const TraceLine& m) { return text(m.event); };
  x.stream = [text](const TraceLine& m) { return text(m.stream); };
  x.version = [](const TraceLine& m) { return m.version; };
  x.position = [](const TraceLine& m) { return m.position; };
  x.encode = [](const TraceLine& m) { return encode_trace_line(m); };
  x.decode = [](std::string_view bytes) -> std::optional<TraceLine> {
    ParsedLine p = parse_trace_line(bytes);
    if (!p.ok()) return std::nullopt;
    return std::move(p.line);
  };
  return x;
}

}  // namespace idem::cli

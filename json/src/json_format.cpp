#include "idem/json_format.hpp"

#include <charconv>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/outbox.hpp"

namespace idem::json {
namespace {

enum class From { kNone, kBody, kHeader, kBroker };

From source_of(std::string_view spec) {
  if (spec.empty()) return From::kNone;
  if (spec.front() == '/') return From::kBody;
  if (spec.starts_with("header:")) return From::kHeader;
  if (spec == "broker") return From::kBroker;
  return From::kNone;
}

// Checks one field's spec; `name` is the field's name for the message.
Status check_spec(std::string_view name, std::string_view spec, bool broker_allowed) {
  if (spec.empty()) return ok_status();
  const From from = source_of(spec);
  if (from == From::kNone)
    return invalid_argument(std::string(name) + ": \"" + std::string(spec) +
                            "\" is none of /JSON/POINTER, header:NAME, broker");
  if (from == From::kBroker && !broker_allowed) return invalid_argument(std::string(name) + ": only the id can be \"broker\"");
  if (from == From::kHeader && spec.size() == std::string_view("header:").size())
    return invalid_argument(std::string(name) + ": header: needs a header name");
  if (from == From::kBody) {
    try {
      nlohmann::json::json_pointer p{std::string(spec)};
      (void)p;
    } catch (const nlohmann::json::exception&) {
      return invalid_argument(std::string(name) + ": \"" + std::string(spec) + "\" is not a JSON pointer (RFC 6901)");
    }
  }
  return ok_status();
}

bool any_from_body(const Fields& f) {
  for (const std::string* s : {&f.id, &f.key, &f.version, &f.event})
    if (source_of(*s) == From::kBody) return true;
  return false;
}

// The text of a pointer's value: a string as it is, an integer in decimal.
std::optional<std::string> text_at(const nlohmann::json& doc, const std::string& pointer) {
  try {
    const nlohmann::json& v = doc.at(nlohmann::json::json_pointer(pointer));
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_unsigned()) return std::to_string(v.get<std::uint64_t>());
    if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  } catch (const nlohmann::json::exception&) {
    // absent, or a path through a value that is not an object or array
  }
  return std::nullopt;
}

// One field's value from a delivery and its parsed body; nullopt when missing or of
// another type than a string or an integer.
std::optional<std::string> field_text(const std::string& spec, const Delivery& d, const nlohmann::json& doc) {
  switch (source_of(spec)) {
    case From::kBody:
      return text_at(doc, spec);
    case From::kHeader: {
      const std::string_view name = std::string_view(spec).substr(std::string_view("header:").size());
      for (const auto& [n, v] : d.headers)
        if (n == name) return v;
      return std::nullopt;
    }
    case From::kBroker:
      if (d.broker_id.empty()) return std::nullopt;
      return d.broker_id;
    case From::kNone:
      break;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> parse_version(std::string_view text) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

Status missing(std::string_view name, std::string_view spec) {
  return invalid_argument(std::string(name) + " (" + std::string(spec) + ") is missing or not a string or integer");
}

// Reads the four fields of `d` into m under `f`.
Status read_fields(const Fields& f, const Delivery& d, Message& m) {
  struct Slot {
    const char* name;
    const std::string& spec;
    std::string* out;
  };
  for (const Slot& s : {Slot{"id", f.id, &m.id}, Slot{"key", f.key, &m.key}, Slot{"event", f.event, &m.event}}) {
    if (s.spec.empty()) continue;
    std::optional<std::string> v = field_text(s.spec, d, m.doc);
    if (!v) return missing(s.name, s.spec);
    *s.out = std::move(*v);
  }
  if (!f.version.empty()) {
    std::optional<std::string> v = field_text(f.version, d, m.doc);
    std::optional<std::uint64_t> n = v ? parse_version(*v) : std::nullopt;
    if (!n) return invalid_argument("version (" + f.version + ") is missing or not a non-negative integer");
    m.version = *n;
  }
  return ok_status();
}

// The reorder buffer's bytes of m: its body and fields, each length-prefixed.
std::string encode(const Message& m) {
  return encode_headers({{"body", m.body}, {"id", m.id}, {"key", m.key}, {"version", std::to_string(m.version)},
                         {"event", m.event}});
}

std::optional<Message> decode(std::string_view bytes, bool parse_body) {
  auto parts = decode_headers(bytes);
  if (!parts || parts->size() != 5) return std::nullopt;
  Message m;
  m.body = std::move((*parts)[0].second);
  m.id = std::move((*parts)[1].second);
  m.key = std::move((*parts)[2].second);
  std::optional<std::uint64_t> v = parse_version((*parts)[3].second);
  if (!v) return std::nullopt;
  m.version = *v;
  m.event = std::move((*parts)[4].second);
  m.doc = nlohmann::json::parse(m.body, nullptr, /*allow_exceptions=*/false);
  if (m.doc.is_discarded()) {
    if (parse_body) return std::nullopt;
    m.doc = nullptr;
  }
  return m;
}

std::optional<std::string_view> view_if(bool set, const std::string& s) {
  if (!set) return std::nullopt;
  return std::string_view(s);
}

}  // namespace

StatusOr<Format> Format::create(Fields fields) {
  if (fields.id.empty()) return invalid_argument("id: a message needs an id (a /JSON/POINTER, header:NAME or broker)");
  for (const auto& [name, spec, broker] : {std::tuple<const char*, const std::string&, bool>{"id", fields.id, true},
                                           {"key", fields.key, false},
                                           {"version", fields.version, false},
                                           {"event", fields.event, false}}) {
    if (Status s = check_spec(name, spec, broker); !s.ok()) return s;
  }
  return Format(std::move(fields));
}

StatusOr<Message> Format::read(const Delivery& d) const {
  Message m;
  m.body = d.body;
  m.doc = nlohmann::json::parse(m.body, nullptr, /*allow_exceptions=*/false);
  if (m.doc.is_discarded()) {
    if (any_from_body(fields_)) return invalid_argument("the body is not JSON");
    m.doc = nullptr;
  }
  if (Status s = read_fields(fields_, d, m); !s.ok()) return s;
  m.partition = d.partition;
  m.position = d.position;
  m.delivery_count = d.delivery_count;
  m.received_at = d.received_at;
  return m;
}

Extractors<Message> Format::extractors() const {
  Extractors<Message> e;
  e.id = [](const Message& m) { return std::optional<std::string_view>(m.id); };
  if (!fields_.key.empty()) e.key = [](const Message& m) { return view_if(true, m.key); };
  if (!fields_.version.empty())
    e.version = [](const Message& m) { return std::optional<std::uint64_t>(m.version); };
  if (!fields_.event.empty()) e.event = [](const Message& m) { return view_if(true, m.event); };
  e.payload = [](const Message& m) { return std::optional<std::string_view>(m.body); };
  e.stream = [](const Message& m) { return view_if(!m.partition.empty() && m.position > 0, m.partition); };
  e.position = [](const Message& m) {
    return !m.partition.empty() && m.position > 0 ? std::optional<std::uint64_t>(m.position) : std::nullopt;
  };
  e.delivery_count = [](const Message& m) {
    return m.delivery_count > 0 ? std::optional<std::uint32_t>(m.delivery_count) : std::nullopt;
  };
  e.received_at = [](const Message& m) {
    return m.received_at != TimePoint{} ? std::optional<TimePoint>(m.received_at) : std::nullopt;
  };
  e.encode = [](const Message& m) { return encode(m); };
  e.decode = [parse = any_from_body(fields_)](std::string_view bytes) { return decode(bytes, parse); };
  return e;
}

std::function<StatusOr<Message>(const Delivery&)> Format::decoder() const {
  return [format = *this](const Delivery& d) { return format.read(d); };
}

}  // namespace idem::json

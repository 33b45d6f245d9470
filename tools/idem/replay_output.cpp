#include "replay_output.hpp"

#include <nlohmann/json.hpp>

namespace idem::cli {
namespace {

// ordered_json keeps keys in insertion order, which is the documented order.
using Json = nlohmann::ordered_json;

template <class T>
void put(Json& j, const char* name, const std::optional<T>& v) {
  if (v) j[name] = *v;
}

void write(std::ostream& out, const Json& j) {
  // Strings in the output come from parsed JSON or from idem, so they are UTF-8; an
  // invalid byte (from an error text quoting the input) is replaced, never thrown on.
  out << j.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
}

}  // namespace

void ReplayWriter::effect(const Effect& e) {
  Json j;
  j["type"] = "effect";
  put(j, "id", e.id);
  put(j, "key", e.key);
  put(j, "version", e.version);
  put(j, "event", e.event);
  put(j, "from", e.from);
  put(j, "to", e.to);
  write(out_, j);
}

void ReplayWriter::decision(std::uint64_t line, const std::optional<std::string>& id, const Decision& d) {
  Json j;
  j["type"] = "decision";
  j["line"] = line;
  put(j, "id", id);
  j["action"] = action_name(d.action);
  j["reason"] = reason_name(d.reason);
  if (d.action == Action::kRetry) j["delay_ms"] = d.delay.count();
  if (d.reason == Reason::kBadMessage) j["error"] = d.detail;
  write(out_, j);
}

void ReplayWriter::bad_line(std::uint64_t line, const std::optional<std::string>& id, std::string_view error) {
  decision(line, id, Decision::dead_letter(Reason::kBadMessage, std::string(error)));
}

}  // namespace idem::cli

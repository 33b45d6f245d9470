#include "producer.hpp"

#include <nlohmann/json.hpp>

#include "message_id.hpp"

namespace idem::pulsar::detail {
namespace {

constexpr std::size_t kWindow = 500;  // messages sent ahead of their receipts

nlohmann::json frame(const Outgoing& m, std::uint64_t context) {
  nlohmann::json j = {{"payload", base64_encode(m.payload)}, {"context", std::to_string(context)}};
  if (!m.key.empty()) j["key"] = m.key;
  if (!m.properties.empty()) {
    nlohmann::json props = nlohmann::json::object();
    for (const auto& [name, value] : m.properties) props[name] = value;
    j["properties"] = std::move(props);
  }
  if (m.deliver_after_ms > 0) j["deliverAfterMs"] = m.deliver_after_ms;
  return j;
}

}  // namespace

Endpoint endpoint_of(const Options& o) { return {o.host, o.port, o.token, o.tls}; }

std::string topic_path(const Options& o, const std::string& topic) {
  return "persistent/" + o.tenant + "/" + o.name_space + "/" + topic;
}

Status Producer::connect() {
  auto ws = WebSocket::connect(endpoint_of(o_), "/ws/v2/producer/" + topic_path(o_, topic_), o_.connect_timeout);
  if (!ws.ok()) return ws.status();
  ws_ = std::move(ws).value();
  return ok_status();
}

Status Producer::send(std::span<const Outgoing> messages) {
  if (!ws_ || !ws_->open()) {
    if (Status s = connect(); !s.ok()) return s;
  }
  std::size_t unanswered = 0;
  for (const Outgoing& m : messages) {
    if (unanswered == kWindow) {
      if (Status s = await_receipts(unanswered); !s.ok()) return s;
      unanswered = 0;
    }
    if (Status s = ws_->write(frame(m, next_context_++).dump(), o_.request_timeout); !s.ok()) return s;
    ++unanswered;
  }
  return await_receipts(unanswered);
}

// Reads `count` receipts ({"result":"ok",…} or an error) within the request timeout each.
Status Producer::await_receipts(std::size_t count) {
  std::string text;
  for (std::size_t got = 0; got < count; ++got) {
    auto r = ws_->read(&text, o_.request_timeout);
    if (!r.ok()) return r.status();
    if (!*r) {
      ws_.reset();  // receipts may still come for this connection: start afresh next time
      return unavailable("pulsar: no receipt from " + topic_ + " within the request timeout");
    }
    auto j = nlohmann::json::parse(text, nullptr, false);
    const std::string result = j.is_object() ? j.value("result", std::string()) : std::string();
    if (result != "ok") {
      const std::string why = j.is_object() ? j.value("errorMsg", result) : text.substr(0, 200);
      return unavailable("pulsar: publish to " + topic_ + " failed: " + why);
    }
  }
  return ok_status();
}

}  // namespace idem::pulsar::detail

#include "topic_source.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "message_id.hpp"

namespace idem::pulsar::detail {
namespace {

constexpr Duration kMaxBackoff{2000};
constexpr std::size_t kMaxDetail = 1024;  // bytes of a dead letter's detail kept in its property

const char* type_name(SubscriptionType t) {
  switch (t) {
    case SubscriptionType::kShared: return "Shared";
    case SubscriptionType::kKeyShared: return "Key_Shared";
    case SubscriptionType::kFailover: return "Failover";
    case SubscriptionType::kExclusive: return "Exclusive";
  }
  return "Shared";
}

bool delays_messages(SubscriptionType t) { return t == SubscriptionType::kShared || t == SubscriptionType::kKeyShared; }

std::uint32_t to_count(const nlohmann::json& props, const char* name) {
  auto it = props.find(name);
  if (it == props.end() || !it->is_string()) return 0;
  const std::string& s = it->get_ref<const std::string&>();
  if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return 0;
  return static_cast<std::uint32_t>(std::stoul(s));
}

// The properties to send a delivery on with: its own, with `extra` set over them.
Properties with(const Delivery& d, Properties extra) {
  Properties out;
  for (const auto& h : d.headers) {
    const bool replaced = std::any_of(extra.begin(), extra.end(), [&](const auto& e) { return e.first == h.first; });
    if (!replaced) out.push_back(h);
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

// The id of d's first delivery: its idem-origin property, or its own message id.
std::string origin_of(const Delivery& d, const std::string& message_id) {
  for (const auto& [name, value] : d.headers)
    if (name == "idem-origin") return value;
  return message_id;
}

}  // namespace

TopicSource::TopicSource(Options o)
    : o_(std::move(o)),
      clock_(o_.clock ? o_.clock : system_clock()),
      log_(o_.logger.get()),
      dead_letters_(o_, o_.dead_letter_topic),
      self_(o_, o_.topic) {}

TopicSource::~TopicSource() { close(); }

std::string TopicSource::describe() const {
  return "pulsar " + topic_path(o_, o_.topic) + " subscription " + o_.subscription + " (" + type_name(o_.type) + ")";
}

std::string TopicSource::consumer_target() const {
  std::string t = "/ws/v2/consumer/" + topic_path(o_, o_.topic) + "/" + o_.subscription +
                  "?subscriptionType=" + type_name(o_.type) + "&pullMode=true&subscriptionInitialPosition=Earliest" +
                  "&receiverQueueSize=" + std::to_string(o_.receiver_queue) +
                  "&negativeAckRedeliveryDelay=" + std::to_string(o_.nack_delay.count());
  if (o_.ack_timeout.count() > 0) t += "&ackTimeoutMillis=" + std::to_string(o_.ack_timeout.count());
  return t;
}

Status TopicSource::start() {
  auto ws = WebSocket::connect(endpoint_of(o_), consumer_target(), o_.connect_timeout);
  if (!ws.ok()) return ws.status();
  ws_ = std::move(ws).value();
  return ok_status();
}

Status TopicSource::ensure_connected() {
  if (ws_ && ws_->open()) return ok_status();
  const TimePoint now = clock_->now();
  if (now < reconnect_at_) return unavailable(describe() + ": waiting to connect again");
  if (Status s = start(); !s.ok()) {
    backoff_ = std::min(kMaxBackoff, std::max(Duration(50), backoff_ * 2));
    reconnect_at_ = now + backoff_;
    return s;
  }
  if (log_ != nullptr && backoff_.count() > 0) log_->info("idem: {} connected again", describe());
  backoff_ = Duration(0);
  permits_ = 0;
  return ok_status();
}

void TopicSource::lost(const Status& why) {
  if (log_ != nullptr) log_->warn("idem: {} lost its connection ({}); connecting again", describe(), why.message());
  ws_.reset();
  permits_ = 0;
  backoff_ = std::max(backoff_, Duration(50));
  reconnect_at_ = clock_->now() + backoff_;
}

Status TopicSource::fetch(std::size_t max, Duration timeout, std::vector<Delivery>& out) {
  if (Status s = ensure_connected(); !s.ok()) return s;
  if (permits_ < max) {
    const std::string permit = R"({"type":"permit","permitMessages":)" + std::to_string(max - permits_) + "}";
    if (Status s = ws_->write(permit, o_.request_timeout); !s.ok()) {
      lost(s);
      return s;
    }
    permits_ = max;
  }
  const std::size_t before = out.size();
  const TimePoint deadline = clock_->now() + timeout;
  std::string frame;
  while (out.size() - before < max) {
    const Duration wait = out.size() > before ? Duration(0) : std::max(Duration(0), std::chrono::duration_cast<Duration>(deadline - clock_->now()));
    auto r = ws_->read(&frame, wait);
    if (!r.ok()) {
      lost(r.status());
      return out.size() > before ? ok_status() : r.status();
    }
    if (!*r) break;
    take(frame, out);
  }
  return ok_status();
}

void TopicSource::take(const std::string& frame, std::vector<Delivery>& out) {
  auto j = nlohmann::json::parse(frame, nullptr, false);
  if (!j.is_object() || !j.contains("payload") || !j.contains("messageId")) {
    if (log_ != nullptr && j.is_object() && j.contains("errorMsg")) log_->warn("idem: {}: {}", describe(), frame);
    return;
  }
  if (permits_ > 0) --permits_;
  std::string id = j.value("messageId", std::string());
  const auto mid = parse_message_id(id);
  std::string broker_id = mid ? to_string(*mid) : id;
  if (!in_flight_ids_.insert(id).second) {  // a copy of one this consumer still works on
    if (log_ != nullptr) {
      log_->info("idem: {}: the broker sent {} again while it is handled here (its ack timeout passed, or the topic "
                 "was loaded again); the copy is dropped",
                 describe(), broker_id);
    }
    return;
  }
  Delivery d;
  auto body = base64_decode(j.value("payload", std::string()));
  d.body = body ? std::move(*body) : j.value("payload", std::string());
  d.broker_id = std::move(broker_id);
  d.partition = o_.topic;
  d.position = mid ? position(*mid) : 0;
  d.key = j.value("key", std::string());
  const auto& props = j.contains("properties") && j["properties"].is_object() ? j["properties"] : nlohmann::json::object();
  for (const auto& [name, value] : props.items())
    if (value.is_string()) d.headers.emplace_back(name, value.get<std::string>());
  d.delivery_count = static_cast<std::uint32_t>(j.value("redeliveryCount", 0)) + 1 + to_count(props, "idem-deliveries");
  d.received_at = clock_->now();
  d.handle = next_handle_++;
  in_flight_.emplace(d.handle, std::move(id));
  out.push_back(std::move(d));
}

Status TopicSource::settle(const Delivery& d, const char* type) {
  auto it = in_flight_.find(d.handle);
  if (it == in_flight_.end()) return invalid_argument(describe() + ": unknown delivery " + d.broker_id);
  nlohmann::json j = {{"messageId", it->second}};
  if (*type != '\0') j["type"] = type;
  in_flight_ids_.erase(it->second);
  in_flight_.erase(it);
  if (Status s = ensure_connected(); !s.ok()) return s;  // a new connection's copy is still to come
  if (Status s = ws_->write(j.dump(), o_.request_timeout); !s.ok()) {
    lost(s);
    return s;
  }
  return ok_status();
}

Status TopicSource::ack(const Delivery& d) { return settle(d, ""); }

Status TopicSource::retry(const Delivery& d, Duration delay) {
  if (delay <= o_.nack_delay || !delays_messages(o_.type)) return settle(d, "negativeAcknowledge");
  return republish(d, delay);
}

Status TopicSource::republish(const Delivery& d, Duration delay) {
  return forward(self_, d, {{"idem-deliveries", std::to_string(d.delivery_count)}}, delay);
}

void TopicSource::hold(const Delivery& d) { (void)settle(d, "negativeAcknowledge"); }

Status TopicSource::dead_letter(const Delivery& d, std::string_view reason, std::string_view detail) {
  return forward(dead_letters_, d,
                 {{"idem-reason", std::string(reason)}, {"idem-detail", std::string(detail.substr(0, kMaxDetail))}},
                 Duration(0));
}

Status TopicSource::forward(Producer& to, const Delivery& d, Properties extra, Duration deliver_after) {
  auto it = in_flight_.find(d.handle);
  if (it == in_flight_.end()) return invalid_argument(describe() + ": unknown delivery " + d.broker_id);
  extra.emplace_back("idem-origin", origin_of(d, it->second));
  Outgoing m{.payload = d.body,
             .key = d.key,
             .properties = with(d, std::move(extra)),
             .deliver_after_ms = deliver_after.count()};
  if (Status s = to.send({&m, 1}); !s.ok()) {
    hold(d);
    return s;
  }
  return settle(d, "");
}

StatusOr<bool> TopicSource::drained() {
  std::string body;
  auto code = http_request(endpoint_of(o_), "GET", "/admin/v2/" + topic_path(o_, o_.topic) + "/stats", "", &body,
                           o_.request_timeout);
  if (!code.ok()) return code.status();
  if (*code != 200) return unavailable(describe() + ": topic stats answered HTTP " + std::to_string(*code));
  auto j = nlohmann::json::parse(body, nullptr, false);
  const nlohmann::json* sub = nullptr;
  if (j.is_object() && j.contains("subscriptions") && j["subscriptions"].contains(o_.subscription)) {
    sub = &j["subscriptions"][o_.subscription];
  }
  if (sub == nullptr || !sub->is_object()) return unavailable(describe() + ": the topic stats lack the subscription");
  return sub->value("msgBacklog", std::int64_t{-1}) == 0 && sub->value("unackedMessages", std::int64_t{0}) == 0;
}

void TopicSource::close() {
  if (ws_) ws_->close();
  ws_.reset();
}

}  // namespace idem::pulsar::detail

// open() and the Publisher of the Pulsar adapter.
#include <algorithm>

#include "idem/pulsar_source.hpp"
#include "producer.hpp"
#include "topic_source.hpp"
#include "web.hpp"

namespace idem::pulsar {
namespace {

// Pulsar's names: letters, digits and "-_.=:" (no '/', which separates the path).
bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= 255 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("-_.=:").find(c) != std::string_view::npos;
  });
}

// Fills the defaults and checks what is left.
Status complete(Options& o, bool needs_subscription) {
  for (const auto& [what, name] : {std::pair{"tenant", &o.tenant}, {"namespace", &o.name_space}, {"topic", &o.topic}}) {
    if (!valid_name(*name)) return invalid_argument(std::string("pulsar: bad ") + what + " name (letters, digits, -_.=:)");
  }
  if (needs_subscription && !valid_name(o.subscription)) {
    return invalid_argument("pulsar: Options::subscription is required (letters, digits, -_.=:)");
  }
  if (o.dead_letter_topic.empty()) o.dead_letter_topic = o.topic + "-DLQ";
  if (!valid_name(o.dead_letter_topic)) return invalid_argument("pulsar: bad dead-letter topic name");
  if (o.token.find_first_of("\r\n") != std::string::npos) return invalid_argument("pulsar: the token has a line break");
  if (o.receiver_queue == 0 || o.receiver_queue > 1000) return invalid_argument("pulsar: receiver_queue must be in 1..1000");
  if (o.ack_timeout.count() < 0 || (o.ack_timeout.count() > 0 && o.ack_timeout.count() < 1000)) {
    return invalid_argument("pulsar: ack_timeout must be 0 (none) or at least 1000 ms (Pulsar's minimum)");
  }
  if (o.nack_delay.count() <= 0 || o.connect_timeout.count() <= 0 || o.request_timeout.count() <= 0) {
    return invalid_argument("pulsar: nack_delay and the timeouts must be positive");
  }
  return ok_status();
}

class TopicPublisher final : public Publisher {
 public:
  explicit TopicPublisher(Options o) : o_(std::move(o)), producer_(o_, o_.topic) {}

  Status connect() { return producer_.send({}); }

  Status publish(std::span<const OutgoingMessage> messages) override {
    std::vector<detail::Outgoing> out;
    out.reserve(messages.size());
    for (const OutgoingMessage& m : messages) {
      detail::Outgoing o{.payload = m.body, .key = m.key, .properties = m.headers};
      if (!m.id.empty()) o.properties.emplace_back("idem-id", m.id);
      out.push_back(std::move(o));
    }
    return producer_.send(out);
  }

 private:
  Options o_;
  detail::Producer producer_;
};

}  // namespace

StatusOr<std::unique_ptr<MessageSource>> open(Options options) {
  if (Status s = complete(options, true); !s.ok()) return s;
  auto source = std::make_unique<detail::TopicSource>(std::move(options));
  if (Status s = source->start(); !s.ok()) return s;
  return std::unique_ptr<MessageSource>(std::move(source));
}

StatusOr<std::unique_ptr<Publisher>> open_publisher(const Options& options) {
  Options o = options;
  if (Status s = complete(o, false); !s.ok()) return s;
  auto p = std::make_unique<TopicPublisher>(std::move(o));
  if (Status s = p->connect(); !s.ok()) return s;
  return std::unique_ptr<Publisher>(std::move(p));
}

Status remove(const Options& options) {
  Options o = options;
  if (Status s = complete(o, false); !s.ok()) return s;
  for (const std::string& topic : {o.topic, o.dead_letter_topic}) {
    std::string body;
    const std::string target = "/admin/v2/" + detail::topic_path(o, topic) + "?force=true";
    auto code = detail::http_request(detail::endpoint_of(o), "DELETE", target, "", &body, o.request_timeout);
    if (!code.ok()) return code.status();
    if (*code != 200 && *code != 204 && *code != 404) {
      return failed_precondition("pulsar: deleting topic " + topic + " answered HTTP " + std::to_string(*code) + ": " +
                                 body.substr(0, 200));
    }
  }
  return ok_status();
}

}  // namespace idem::pulsar

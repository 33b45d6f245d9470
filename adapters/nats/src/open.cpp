// open() and the Publisher of the NATS JetStream adapter.
#include <atomic>
#include <mutex>

#include "connection.hpp"
#include "idem/nats_source.hpp"
#include "pull_source.hpp"

namespace idem::nats {
namespace {

constexpr std::int64_t kMaxPendingPublishes = 4096;  // async publishes awaiting their ack

bool has_wildcard(const std::string& subject) {
  return subject.find('*') != std::string::npos || subject.find('>') != std::string::npos;
}

bool valid_name(const std::string& name) { return !name.empty() && name.find_first_of(".*> \t") == std::string::npos; }

// Fills the defaults (subject, dead-letter names) and checks what is left.
Status complete(Options& o, bool needs_durable) {
  if (!valid_name(o.stream)) return invalid_argument("nats: Options::stream is required (no '.', '*', '>' or space)");
  if (needs_durable && !valid_name(o.durable)) {
    return invalid_argument("nats: Options::durable is required (no '.', '*', '>' or space)");
  }
  if (o.subject.empty()) o.subject = o.stream;
  if (o.dead_letter_subject.empty()) {
    if (has_wildcard(o.subject)) return invalid_argument("nats: a subject with wildcards needs a dead-letter subject");
    o.dead_letter_subject = o.subject + ".dlq";
  }
  if (o.dead_letter_stream.empty()) o.dead_letter_stream = o.stream + "_DLQ";
  if (!valid_name(o.dead_letter_stream)) return invalid_argument("nats: bad dead-letter stream name");
  if (o.password.size() > 0 && o.user.empty()) return invalid_argument("nats: a password needs a user");
  if (o.lease.count() < 100) return invalid_argument("nats: Options::lease (AckWait) must be at least 100 ms");
  if (o.max_ack_pending <= 0) return invalid_argument("nats: Options::max_ack_pending must be positive");
  if (o.connect_timeout.count() <= 0 || o.request_timeout.count() <= 0) {
    return invalid_argument("nats: timeouts must be positive");
  }
  return ok_status();
}

// Counts failed async publishes (nats.c calls it from its own thread).
struct PublishErrors {
  std::atomic<std::uint64_t> count{0};
  std::mutex mu;
  std::string first;
};

void on_publish_error(jsCtx*, jsPubAckErr* pae, void* closure) {
  auto* errors = static_cast<PublishErrors*>(closure);
  if (errors->count.fetch_add(1) == 0) {
    std::lock_guard lock(errors->mu);
    errors->first = pae->ErrText != nullptr ? pae->ErrText : natsStatus_GetText(pae->Err);
  }
}

class JetStreamPublisher final : public Publisher {
 public:
  JetStreamPublisher(std::unique_ptr<detail::Connection> c, Options o, std::unique_ptr<PublishErrors> e)
      : conn_(std::move(c)), o_(std::move(o)), errors_(std::move(e)) {}

  Status publish(std::span<const OutgoingMessage> messages) override {
    errors_->count = 0;
    for (const OutgoingMessage& m : messages) {
      if (Status s = send(m); !s.ok()) return s;
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = o_.request_timeout.count();
    if (natsStatus s = js_PublishAsyncComplete(conn_->js(), &po); s != NATS_OK) {
      return detail::from_nats(s, "waiting for the server to acknowledge the publishes to " + o_.subject);
    }
    if (const std::uint64_t n = errors_->count.load(); n > 0) {
      std::lock_guard lock(errors_->mu);
      return unavailable("nats: " + std::to_string(n) + " publishes to " + o_.subject + " failed: " + errors_->first);
    }
    return ok_status();
  }

 private:
  Status send(const OutgoingMessage& m) {
    natsMsg* raw = nullptr;
    natsStatus s = natsMsg_Create(&raw, o_.subject.c_str(), nullptr, m.body.data(), static_cast<int>(m.body.size()));
    if (s != NATS_OK) return detail::from_nats(s, "message");
    for (const auto& [name, value] : m.headers) {
      if (s == NATS_OK) s = natsMsgHeader_Add(raw, name.c_str(), value.c_str());
    }
    if (s != NATS_OK) {
      natsMsg_Destroy(raw);
      return detail::from_nats(s, "message headers");
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    if (!m.id.empty()) po.MsgId = m.id.c_str();
    s = js_PublishMsgAsync(conn_->js(), &raw, &po);  // takes raw on success
    if (s != NATS_OK) {
      natsMsg_Destroy(raw);
      return detail::from_nats(s, "publish to " + o_.subject);
    }
    return ok_status();
  }

  std::unique_ptr<detail::Connection> conn_;
  Options o_;
  std::unique_ptr<PublishErrors> errors_;
};

}  // namespace

StatusOr<std::unique_ptr<MessageSource>> open(Options options) {
  if (Status s = complete(options, true); !s.ok()) return s;
  auto source = std::make_unique<detail::PullSource>(std::move(options));
  if (Status s = source->start(); !s.ok()) return s;
  return std::unique_ptr<MessageSource>(std::move(source));
}

StatusOr<std::unique_ptr<Publisher>> open_publisher(const Options& options) {
  Options o = options;
  if (Status s = complete(o, false); !s.ok()) return s;
  auto errors = std::make_unique<PublishErrors>();
  auto conn = detail::Connection::open(o, kMaxPendingPublishes, on_publish_error, errors.get());
  if (!conn.ok()) return conn.status();
  if (Status s = (*conn)->declare_stream(o.stream, o.subject); !s.ok()) return s;
  return std::unique_ptr<Publisher>(new JetStreamPublisher(std::move(conn).value(), std::move(o), std::move(errors)));
}

Status remove(const Options& options) {
  Options o = options;
  if (Status s = complete(o, false); !s.ok()) return s;
  auto conn = detail::Connection::open(o);
  if (!conn.ok()) return conn.status();
  if (Status s = (*conn)->remove_stream(o.stream); !s.ok()) return s;
  return (*conn)->remove_stream(o.dead_letter_stream);
}

}  // namespace idem::nats

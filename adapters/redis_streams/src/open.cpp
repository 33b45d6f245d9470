// open() and the Publisher of the Redis Streams adapter.
#include <hiredict/hiredict.h>

#include "connection.hpp"
#include "idem/redis_stream_source.hpp"
#include "stream_source.hpp"

namespace idem::redis_streams {
namespace {

constexpr std::size_t kPublishChunk = 1000;  // XADDs per pipelined write

Status check(const Options& o, bool needs_group) {
  if (o.stream.empty()) return invalid_argument("redis-stream: Options::stream is required");
  if (needs_group && o.group.empty()) return invalid_argument("redis-stream: Options::group is required");
  if (o.password.empty() && !o.user.empty()) return invalid_argument("redis-stream: a user needs a password");
  if (o.lease.count() <= 0) return invalid_argument("redis-stream: Options::lease must be positive");
  if (o.connect_timeout.count() <= 0 || o.command_timeout.count() <= 0) {
    return invalid_argument("redis-stream: timeouts must be positive");
  }
  return ok_status();
}

class StreamPublisher final : public Publisher {
 public:
  StreamPublisher(std::unique_ptr<detail::Connection> c, Options o) : conn_(std::move(c)), o_(std::move(o)) {}

  Status publish(std::span<const OutgoingMessage> messages) override {
    for (std::size_t i = 0; i < messages.size(); i += kPublishChunk) {
      std::vector<std::vector<std::string>> cmds;
      for (std::size_t j = i; j < std::min(messages.size(), i + kPublishChunk); ++j) {
        cmds.push_back(xadd(messages[j]));
      }
      auto replies = conn_->pipeline(cmds, o_.command_timeout);
      if (!replies.ok()) return replies.status();
      for (const auto& r : *replies) {
        if (std::string e = detail::error_text(r.get()); !e.empty()) {
          return failed_precondition("redis-stream: XADD to " + o_.stream + " refused: " + e);
        }
      }
    }
    return ok_status();
  }

 private:
  std::vector<std::string> xadd(const OutgoingMessage& m) const {
    std::vector<std::string> cmd{"XADD", o_.stream, "*", "body", m.body};
    if (!m.id.empty()) cmd.insert(cmd.end(), {"id", m.id});
    for (const auto& [name, value] : m.headers) cmd.insert(cmd.end(), {name, value});
    return cmd;
  }

  std::unique_ptr<detail::Connection> conn_;
  Options o_;
};

}  // namespace

StatusOr<std::unique_ptr<MessageSource>> open(Options options) {
  if (Status s = check(options, true); !s.ok()) return s;
  auto source = std::make_unique<detail::StreamSource>(std::move(options));
  if (Status s = source->start(); !s.ok()) return s;
  return std::unique_ptr<MessageSource>(std::move(source));
}

StatusOr<std::unique_ptr<Publisher>> open_publisher(const Options& options) {
  if (Status s = check(options, false); !s.ok()) return s;
  auto conn = detail::Connection::open(options);
  if (!conn.ok()) return conn.status();
  return std::unique_ptr<Publisher>(new StreamPublisher(std::move(conn).value(), options));
}

Status remove(const Options& options) {
  if (Status s = check(options, false); !s.ok()) return s;
  auto conn = detail::Connection::open(options);
  if (!conn.ok()) return conn.status();
  auto r = (*conn)->call({"DEL", options.stream, detail::dead_letter_stream_of(options)}, options.command_timeout);
  if (!r.ok()) return r.status();
  if (const std::string e = detail::error_text(r->get()); !e.empty())
    return failed_precondition("redis-stream: DEL " + options.stream + " refused: " + e);
  return ok_status();
}

}  // namespace idem::redis_streams

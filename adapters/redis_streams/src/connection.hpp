// One hiredict connection of the Redis Streams adapter: connect, AUTH, SELECT, and
// commands with a per-call timeout. Not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "idem/redis_stream_source.hpp"

struct redictContext;
struct redictReply;

namespace idem::redis_streams::detail {

struct ReplyDeleter {
  void operator()(redictReply* r) const;
};
using ReplyPtr = std::unique_ptr<redictReply, ReplyDeleter>;

class Connection {
 public:
  // Connects and authenticates. kUnavailable: unreachable; kFailedPrecondition: refused.
  static StatusOr<std::unique_ptr<Connection>> open(const Options& o);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends argv and reads its reply, waiting up to `timeout`. A server error reply is
  // returned as a reply (type REDICT_REPLY_ERROR); kUnavailable on I/O errors (the
  // connection is then broken()).
  StatusOr<ReplyPtr> call(const std::vector<std::string>& argv, Duration timeout);
  // The same for a command already in RESP (encode_bulk()): no per-argument formatting.
  StatusOr<ReplyPtr> call_encoded(const std::string& command, Duration timeout);
  // Sends every command in one write, then reads their replies in order.
  StatusOr<std::vector<ReplyPtr>> pipeline(const std::vector<std::vector<std::string>>& cmds, Duration timeout);

  bool broken() const { return broken_; }

 private:
  explicit Connection(redictContext* c) : c_(c) {}
  void set_timeout(Duration timeout);
  Status io_error(const char* what);

  redictContext* c_;
  bool broken_ = false;
  Duration timeout_{-1};
};

// Appends `arg` to `out` as a RESP bulk string ("$<len>\r\n<arg>\r\n"); a command is
// "*<argc>\r\n" followed by its arguments so encoded.
void encode_bulk(std::string& out, std::string_view arg);

// Returns "ERR …" text of an error reply, or empty when `r` is not an error.
std::string error_text(const redictReply* r);

}  // namespace idem::redis_streams::detail

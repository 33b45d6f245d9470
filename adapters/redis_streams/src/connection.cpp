#include "connection.hpp"

#include "tls_context.hpp"

#include <hiredict/hiredict.h>
#include <sys/time.h>

#include <cstring>

namespace idem::redis_streams::detail {
namespace {

timeval to_timeval(Duration d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

void append(redictContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (const std::string& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  redictAppendCommandArgv(c, static_cast<int>(argv.size()), ptrs.data(), lens.data());
}

}  // namespace

void ReplyDeleter::operator()(redictReply* r) const { freeReplyObject(r); }

void encode_bulk(std::string& out, std::string_view arg) {
  out += '$';
  out += std::to_string(arg.size());
  out += "\r\n";
  out += arg;
  out += "\r\n";
}

std::string error_text(const redictReply* r) {
  if (r == nullptr || r->type != REDICT_REPLY_ERROR) return {};
  return std::string(r->str, r->len);
}

StatusOr<std::unique_ptr<Connection>> Connection::open(const Options& o) {
  const std::string where = o.host + ":" + std::to_string(o.port);
  redictContext* c = redictConnectWithTimeout(o.host.c_str(), o.port, to_timeval(o.connect_timeout));
  if (c == nullptr) return unavailable("redis-stream: cannot connect to " + where + ": out of memory");
  if (c->err != 0) {
    std::string why = c->errstr;
    redictFree(c);
    return unavailable("redis-stream: cannot connect to " + where + ": " + why);
  }
  std::unique_ptr<Connection> conn(new Connection(c));
  if (o.tls.enabled) {
    auto tls = redis_tls::Context::make(o.tls);
    if (!tls.ok()) return invalid_argument("redis-stream: " + tls.status().message());
    conn->set_timeout(o.connect_timeout);  // the handshake's reads and writes
    if (Status s = (*tls)->start(c, o.host, "redis-stream at " + where); !s.ok()) return s;
  }
  std::vector<std::vector<std::string>> setup;
  if (!o.password.empty()) {
    setup.push_back({"AUTH"});
    if (!o.user.empty()) setup.back().push_back(o.user);
    setup.back().push_back(o.password);
  }
  if (o.db != 0) setup.push_back({"SELECT", std::to_string(o.db)});
  for (const auto& cmd : setup) {
    auto r = conn->call(cmd, o.command_timeout);
    if (!r.ok()) return r.status();
    if (std::string e = error_text(r->get()); !e.empty()) {
      return failed_precondition("redis-stream: " + where + " refused " + cmd[0] + ": " + e);
    }
  }
  return conn;
}

Connection::~Connection() { redictFree(c_); }

void Connection::set_timeout(Duration timeout) {
  if (timeout == timeout_) return;
  redictSetTimeout(c_, to_timeval(timeout));
  timeout_ = timeout;
}

Status Connection::io_error(const char* what) {
  broken_ = true;
  return unavailable(std::string("redis-stream: ") + what + ": " + (c_->err ? c_->errstr : "connection lost"));
}

StatusOr<ReplyPtr> Connection::call(const std::vector<std::string>& argv, Duration timeout) {
  auto replies = pipeline({argv}, timeout);
  if (!replies.ok()) return replies.status();
  return std::move(replies->front());
}

StatusOr<ReplyPtr> Connection::call_encoded(const std::string& command, Duration timeout) {
  if (broken_) return unavailable("redis-stream: the connection is broken");
  set_timeout(timeout);
  redictAppendFormattedCommand(c_, command.data(), command.size());
  void* reply = nullptr;
  if (redictGetReply(c_, &reply) != REDICT_OK || reply == nullptr) return io_error("reading a reply");
  return ReplyPtr(static_cast<redictReply*>(reply));
}

StatusOr<std::vector<ReplyPtr>> Connection::pipeline(const std::vector<std::vector<std::string>>& cmds,
                                                     Duration timeout) {
  if (broken_) return unavailable("redis-stream: the connection is broken");
  set_timeout(timeout);
  for (const auto& argv : cmds) append(c_, argv);
  std::vector<ReplyPtr> out;
  out.reserve(cmds.size());
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    void* reply = nullptr;
    if (redictGetReply(c_, &reply) != REDICT_OK || reply == nullptr) return io_error("reading a reply");
    out.emplace_back(static_cast<redictReply*>(reply));
  }
  return out;
}

}  // namespace idem::redis_streams::detail

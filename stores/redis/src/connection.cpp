#include "connection.hpp"

#include <hiredict/hiredict.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>

#include "scripts.hpp"

namespace idem::redis::detail {
namespace {

timeval to_timeval(Duration d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

}  // namespace

Reply::Type ReplyView::type() const {
  switch (static_cast<const redictReply*>(raw_)->type) {
    case REDICT_REPLY_STRING:
      return Reply::Type::kString;
    case REDICT_REPLY_STATUS:
      return Reply::Type::kStatus;
    case REDICT_REPLY_ERROR:
      return Reply::Type::kError;
    case REDICT_REPLY_INTEGER:
      return Reply::Type::kInteger;
    case REDICT_REPLY_ARRAY:
      return Reply::Type::kArray;
    default:
      return Reply::Type::kNil;
  }
}

bool ReplyView::error_is(std::string_view code) const {
  const std::string_view s = str();
  return is_error() && s.size() >= code.size() && s.compare(0, code.size(), code) == 0 &&
         (s.size() == code.size() || s[code.size()] == ' ');
}

std::int64_t ReplyView::integer() const {
  const auto* r = static_cast<const redictReply*>(raw_);
  return r->type == REDICT_REPLY_INTEGER ? r->integer : 0;
}

std::string_view ReplyView::str() const {
  const auto* r = static_cast<const redictReply*>(raw_);
  const bool text = r->type == REDICT_REPLY_STRING || r->type == REDICT_REPLY_STATUS || r->type == REDICT_REPLY_ERROR;
  return text ? std::string_view(r->str, r->len) : std::string_view();
}

std::size_t ReplyView::size() const {
  const auto* r = static_cast<const redictReply*>(raw_);
  return r->type == REDICT_REPLY_ARRAY ? r->elements : 0;
}

ReplyView ReplyView::at(std::size_t i) const { return ReplyView(static_cast<const redictReply*>(raw_)->element[i]); }

Reply ReplyView::to_reply() const {
  Reply out;
  out.type = type();
  out.integer = integer();
  out.str = str();
  const std::size_t n = size();
  out.elements.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.elements.push_back(at(i).to_reply());
  return out;
}

std::string to_string(const Endpoint& e) { return e.host + ":" + std::to_string(e.port); }

StatusOr<std::unique_ptr<Connection>> Connection::open(const Endpoint& at, const ConnectOptions& o) {
  redictContext* c = redictConnectWithTimeout(at.host.c_str(), at.port, to_timeval(o.connect_timeout));
  if (c == nullptr) return unavailable("redis: cannot allocate a connection to " + to_string(at));
  if (c->err != 0) {
    std::string why = c->errstr;
    redictFree(c);
    return unavailable("redis: cannot connect to " + to_string(at) + ": " + why);
  }
  redictSetTimeout(c, to_timeval(o.command_timeout));
  redictEnableKeepAlive(c);
  std::unique_ptr<Connection> conn(new Connection(c, at));
  if (o.tls != nullptr)
    if (Status s = o.tls->start(c, at.host, "redis at " + to_string(at)); !s.ok()) return s;
  if (!o.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!o.user.empty()) auth.push_back(o.user);
    auth.push_back(o.password);
    auto r = conn->call(auth);
    if (!r.ok()) return r.status();
    if (r->is_error())  // the server refused: the credentials, not the URI's form, are wrong
      return failed_precondition("redis: authentication at " + to_string(at) + " failed: " + r->str);
  }
  if (o.db != 0) {
    auto r = conn->call({"SELECT", std::to_string(o.db)});
    if (!r.ok()) return r.status();
    if (r->is_error())
      return invalid_argument("redis: SELECT " + std::to_string(o.db) + " at " + to_string(at) + " failed: " + r->str);
  }
  return conn;
}

Connection::~Connection() {
  drop_view();
  redictFree(c_);
}

void Connection::drop_view() {
  if (view_ != nullptr) freeReplyObject(view_);
  view_ = nullptr;
}

void Connection::append_out() {
  if (redictAppendFormattedCommand(c_, out_.text().data(), out_.text().size()) != REDICT_OK) broken_ = true;
}

void Connection::append(const std::vector<std::string>& argv) {
  out_.clear();
  out_.command(argv.size());
  for (const auto& a : argv) out_.arg(a);
  append_out();
}

void Connection::append(const Command& cmd, bool eval) {
  if (cmd.script == nullptr) {
    append(cmd.args);
    return;
  }
  const bool use_eval = eval || cmd.script->sha.empty();
  out_.clear();
  out_.command(3 + cmd.keys.size() + cmd.args.size());
  out_.arg(use_eval ? std::string_view("EVAL") : std::string_view("EVALSHA"));
  out_.arg(use_eval ? cmd.script->body : cmd.script->sha);
  out_.arg_int(static_cast<std::int64_t>(cmd.keys.size()));
  for (const auto& k : cmd.keys) out_.arg(k);
  for (const auto& a : cmd.args) out_.arg(a);
  append_out();
}

StatusOr<Reply> Connection::read() {
  auto v = read_view();
  if (!v.ok()) return v.status();
  Reply out = v->to_reply();
  drop_view();
  return out;
}

StatusOr<ReplyView> Connection::read_view() {
  drop_view();
  if (broken_) return unavailable("redis: connection to " + to_string(at_) + " is broken");
  if (redictGetReply(c_, &view_) != REDICT_OK || view_ == nullptr) {
    broken_ = true;
    view_ = nullptr;
    const bool timeout = c_->err == REDICT_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
    return unavailable("redis: " + to_string(at_) + ": " +
                       (timeout ? std::string("no reply within the command timeout") : std::string(c_->errstr)));
  }
  return ReplyView(view_);
}

void Connection::run(EncodedPipeline& p) {
  std::vector<Encoded> cmds(p.size());
  for (std::size_t i = 0; i < cmds.size(); ++i) cmds[i].index = i;
  // Round 0 sends every command; round 1, as EVAL, the scripts the node did not know
  // (rare).
  for (int round = 0; round < 2 && !cmds.empty(); ++round) {
    std::vector<Encoded> again;
    send(p, cmds);
    const std::size_t read = receive(cmds, [&](std::size_t k, const ReplyView& r) {
      if (round == 0 && r.error_is("NOSCRIPT")) {
        again.push_back({cmds[k].index, true, false});
      } else {
        p.take(cmds[k].index, r);
      }
    });
    if (read < cmds.size()) {
      const Status lost = unavailable("redis: connection to " + to_string(at_) + " lost before the reply");
      for (std::size_t k = read; k < cmds.size(); ++k) p.fail(cmds[k].index, lost);
      return;
    }
    cmds.swap(again);
  }
}

void Connection::send(EncodedPipeline& p, std::span<const Encoded> cmds) {
  out_.clear();
  for (const Encoded& c : cmds) {
    if (c.asking) {
      out_.command(1);
      out_.arg("ASKING");
    }
    p.encode(c.index, c.eval, out_);
  }
  append_out();
  flush();
}

std::size_t Connection::receive(std::span<const Encoded> cmds,
                                const std::function<void(std::size_t, const ReplyView&)>& seen) {
  for (std::size_t k = 0; k < cmds.size(); ++k) {
    if (cmds[k].asking && !read_view().ok()) return k;
    auto r = read_view();
    if (!r.ok()) return k;
    seen(k, *r);
  }
  drop_view();
  return cmds.size();
}

void Connection::flush() {
  if (broken_) return;
  int done = 0;
  while (done == 0) {
    if (redictBufferWrite(c_, &done) != REDICT_OK) {
      broken_ = true;
      return;
    }
  }
}

StatusOr<Reply> Connection::call(const std::vector<std::string>& argv) {
  append(argv);
  return read();
}

bool Connection::looks_alive() const {
  if (broken_ || c_->fd < 0) return false;
  char b;
  const ssize_t n = ::recv(c_->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void queue_pipeline(Connection& conn, std::span<const Command* const> cmds, std::span<const bool> asking,
                    int wait_replicas, Duration wait_timeout) {
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    if (asking[i]) conn.append({"ASKING"});
    conn.append(*cmds[i], false);
  }
  if (wait_replicas > 0) conn.append({"WAIT", std::to_string(wait_replicas), std::to_string(wait_timeout.count())});
}

std::vector<StatusOr<Reply>> collect_pipeline(Connection& conn, std::span<const Command* const> cmds,
                                              std::span<const bool> asking, int wait_replicas, Duration wait_timeout) {
  std::vector<StatusOr<Reply>> out(cmds.size(), StatusOr<Reply>(Reply{}));
  std::vector<std::size_t> todo(cmds.size());
  for (std::size_t i = 0; i < cmds.size(); ++i) todo[i] = i;
  // After an I/O error: the replies from todo[k] on are lost.
  auto lose_from = [&](std::size_t k) {
    const Status lost = unavailable("redis: connection to " + to_string(conn.endpoint()) + " lost before the reply");
    for (; k < todo.size(); ++k) out[todo[k]] = lost;
    return out;
  };
  // Round 0 reads what queue_pipeline sent (EVALSHA); round 1 sends again, as EVAL,
  // the scripts this node did not know (NOSCRIPT).
  for (int round = 0; round < 2 && !todo.empty(); ++round) {
    if (round == 1) {
      for (std::size_t i : todo) {
        if (asking[i]) conn.append({"ASKING"});
        conn.append(*cmds[i], true);
      }
      if (wait_replicas > 0) conn.append({"WAIT", std::to_string(wait_replicas), std::to_string(wait_timeout.count())});
    }
    std::vector<std::size_t> again;
    for (std::size_t k = 0; k < todo.size(); ++k) {
      const std::size_t i = todo[k];
      if (asking[i]) {
        auto a = conn.read();
        if (!a.ok()) return lose_from(k);
      }
      auto r = conn.read();
      if (!r.ok()) return lose_from(k);
      if (round == 0 && r->error_is("NOSCRIPT")) again.push_back(i);
      out[i] = std::move(r);
    }
    if (wait_replicas > 0) {
      auto w = conn.read();
      if (!w.ok()) {
        for (std::size_t i : todo) out[i] = w.status();
        return out;
      }
      const int acked = w->type == Reply::Type::kInteger ? static_cast<int>(w->integer) : 0;
      for (std::size_t i : todo)
        if (out[i].ok()) out[i]->replicas_acked = acked;
    }
    todo = std::move(again);
  }
  return out;
}

std::vector<StatusOr<Reply>> send_pipeline(Connection& conn, std::span<const Command* const> cmds,
                                           std::span<const bool> asking, int wait_replicas, Duration wait_timeout) {
  queue_pipeline(conn, cmds, asking, wait_replicas, wait_timeout);
  return collect_pipeline(conn, cmds, asking, wait_replicas, wait_timeout);
}

NodePool::NodePool(Endpoint at, ConnectOptions o, const Options& so)
    : at_(std::move(at)),
      o_(std::move(o)),
      backoff_min_(so.reconnect_min),
      backoff_max_(so.reconnect_max),
      max_idle_(so.pool_max_idle) {}

StatusOr<std::unique_ptr<Connection>> NodePool::borrow() {
  {
    std::lock_guard lock(mu_);
    const SteadyClock::time_point now = SteadyClock::now();
    while (!idle_.empty()) {
      Idle c = std::move(idle_.back());
      idle_.pop_back();
      if (now - c.since < kCheckIdleAfter || c.conn->looks_alive()) return std::move(c.conn);
    }
    if (backoff_.count() > 0 && now < retry_after_)
      return unavailable("redis: " + to_string(at_) + " is in reconnect backoff after: " + last_error_);
  }
  auto c = Connection::open(at_, o_);
  std::lock_guard lock(mu_);
  if (!c.ok()) {
    backoff_ = backoff_.count() == 0 ? backoff_min_ : std::min(backoff_ * 2, backoff_max_);
    retry_after_ = SteadyClock::now() + backoff_;
    last_error_ = c.status().message();
    return c.status();
  }
  backoff_ = Duration{0};
  return c;
}

void NodePool::give_back(std::unique_ptr<Connection> conn) {
  if (!conn || conn->broken()) return;
  const SteadyClock::time_point now = SteadyClock::now();
  std::lock_guard lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back({std::move(conn), now});
}

}  // namespace idem::redis::detail

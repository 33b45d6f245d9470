// One hiredict connection, and the pool of connections to one node.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "command.hpp"
#include "idem/redis_store.hpp"
#include "reply.hpp"
#include "resp_writer.hpp"
#include "tls_context.hpp"

struct redictContext;

namespace idem::redis::detail {

// What every connection to every node is opened with.
struct ConnectOptions {
  Duration connect_timeout{1000};
  Duration command_timeout{1000};
  std::string user;
  std::string password;
  int db = 0;
  std::shared_ptr<const redis_tls::Context> tls;  // null: plaintext
};

// Renders "host:port".
std::string to_string(const Endpoint& e);

// A pipeline whose commands write their own RESP text and whose replies are read in
// place, without a Command or a Reply per command (the standalone batch paths). It
// sends no WAIT: callers that wait for replicas use send_pipeline.
class EncodedPipeline {
 public:
  virtual ~EncodedPipeline() = default;
  // The number of commands.
  virtual std::size_t size() const = 0;
  // Appends command i to out: one command(), then its arguments. A script call is
  // EVAL with the body when eval (the node answered NOSCRIPT), else EVALSHA.
  virtual void encode(std::size_t i, bool eval, RespWriter& out) = 0;
  // Command i's reply, valid only during the call. Called once per command in the
  // order of the replies (a script sent again after NOSCRIPT answers after the
  // others), unless fail() is called for it instead.
  virtual void take(std::size_t i, const ReplyView& r) = 0;
  // Command i got no reply (kUnavailable: the connection failed or was not there).
  virtual void fail(std::size_t i, const Status& s) = 0;
  // The key command i touches: a cluster routes the command by its slot. A script's
  // keys all share one slot, and this is the first of them.
  virtual std::string key(std::size_t i) const = 0;
};

// One command of an EncodedPipeline as a connection sends it.
struct Encoded {
  std::size_t index = 0;  // into the pipeline
  bool eval = false;      // EVAL with the body, not EVALSHA (after NOSCRIPT)
  bool asking = false;    // preceded by ASKING (a cluster's ASK redirection)
};

// A connected, authenticated connection. Not thread-safe: one user at a time.
class Connection {
 public:
  // Connects (with TLS when o.tls is set), AUTHs and SELECTs. Errors: kUnavailable
  // (cannot connect, timeout), kFailedPrecondition (the server's certificate or the
  // credentials refused), kInvalidArgument (SELECT refused).
  static StatusOr<std::unique_ptr<Connection>> open(const Endpoint& at, const ConnectOptions& o);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Queues one command in the output buffer (sent by the next read()).
  void append(const std::vector<std::string>& argv);
  // Queues cmd (EVALSHA, or EVAL when eval is true, for a script call) without
  // copying its strings.
  void append(const Command& cmd, bool eval);
  // Flushes what is queued and reads one reply. kUnavailable on I/O errors or timeout;
  // the connection is then broken() and must be dropped.
  StatusOr<Reply> read();
  // Sends everything queued without reading (so that several connections can be
  // flushed before any is read). A failure breaks the connection.
  void flush();
  // One command, one reply.
  StatusOr<Reply> call(const std::vector<std::string>& argv);
  // Like read(), without copying the reply: the view is valid until the next read on
  // this connection.
  StatusOr<ReplyView> read_view();
  // Sends p's commands in one write and hands each reply to p in order. A script the
  // node does not know (NOSCRIPT) is sent again as EVAL, in one more round trip. On
  // an I/O error the commands not answered yet fail() and the connection is broken.
  void run(EncodedPipeline& p);
  // The two halves of run() without its NOSCRIPT round, for sending to several
  // nodes before reading any. send() writes the commands cmds of p in one write;
  // receive() reads their replies in order (not ASKING's) and hands each to
  // seen(k, reply), k indexing cmds. receive() returns how many replies it read:
  // fewer than cmds.size() after an I/O error, which breaks the connection.
  void send(EncodedPipeline& p, std::span<const Encoded> cmds);
  std::size_t receive(std::span<const Encoded> cmds, const std::function<void(std::size_t, const ReplyView&)>& seen);

  bool broken() const { return broken_; }
  // False iff the server closed the connection while it sat idle (checked without
  // blocking).
  bool looks_alive() const;
  const Endpoint& endpoint() const { return at_; }

 private:
  Connection(redictContext* c, Endpoint at) : c_(c), at_(std::move(at)) {}
  // Queues the RESP text of out_ as it is.
  void append_out();
  // Frees the reply that the last read_view() returned.
  void drop_view();
  redictContext* c_;
  RespWriter out_;        // the RESP text being queued (reused)
  void* view_ = nullptr;  // the reply of the last read_view(), owned
  Endpoint at_;
  bool broken_ = false;
};

// The two halves of send_pipeline, for sending to several nodes before reading any:
// queue_pipeline appends, collect_pipeline reads (and re-sends after NOSCRIPT).
void queue_pipeline(Connection& conn, std::span<const Command* const> cmds, std::span<const bool> asking,
                    int wait_replicas, Duration wait_timeout);
std::vector<StatusOr<Reply>> collect_pipeline(Connection& conn, std::span<const Command* const> cmds,
                                              std::span<const bool> asking, int wait_replicas, Duration wait_timeout);

// Sends `cmds` on `conn` in one write (each preceded by ASKING when asking[i]) and
// then WAIT wait_replicas wait_timeout when wait_replicas > 0, and reads every reply
// in order. A script that the node does not know (NOSCRIPT) is sent again as EVAL on
// the same connection. On an I/O error the replies not read yet are kUnavailable and
// the connection is broken. With WAIT, each reply's replicas_acked is set.
std::vector<StatusOr<Reply>> send_pipeline(Connection& conn, std::span<const Command* const> cmds,
                                           std::span<const bool> asking, int wait_replicas, Duration wait_timeout);

// The connections to one node. Thread-safe.
class NodePool {
 public:
  NodePool(Endpoint at, ConnectOptions o, const Options& store_options);

  // An idle connection that still looks alive, or a new one. A connection given back
  // less than kCheckIdleAfter (50 ms) ago is taken without that check (a syscall, a
  // few percent of a round trip on loopback): if the server closed it meanwhile, the
  // call on it fails with kUnavailable, as a call does when the server dies during
  // it. While a reconnect backoff runs after a failed connect, returns kUnavailable
  // without trying.
  StatusOr<std::unique_ptr<Connection>> borrow();
  // Keeps conn for reuse unless it is broken or enough are idle.
  void give_back(std::unique_ptr<Connection> conn);
  const Endpoint& endpoint() const { return at_; }

 private:
  using SteadyClock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kCheckIdleAfter{50};
  struct Idle {
    std::unique_ptr<Connection> conn;
    SteadyClock::time_point since;  // when it was given back
  };
  const Endpoint at_;
  const ConnectOptions o_;
  const Duration backoff_min_;
  const Duration backoff_max_;
  const std::size_t max_idle_;
  std::mutex mu_;
  std::vector<Idle> idle_;
  SteadyClock::time_point retry_after_{};
  Duration backoff_{0};
  std::string last_error_;
};

}  // namespace idem::redis::detail

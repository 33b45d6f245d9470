#include "support/rabbitmq_server.hpp"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

#include "support/child_process.hpp"

namespace idem::rabbitmq_test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kServer = "/usr/lib/rabbitmq/bin/rabbitmq-server";
constexpr const char* kEpmd = "/usr/bin/epmd";
// The CLI itself: /usr/sbin/rabbitmqctl would run it as the rabbitmq user, whose home
// holds another Erlang cookie than the node of the tests.
constexpr const char* kCtl = "/usr/lib/rabbitmq/bin/rabbitmqctl";

bool accepts(const std::string& address, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

std::uint16_t free_port() { return test_support::free_port(); }

using test_support::reap;
using test_support::spawn;

// A logged-in AMQP connection with channel 1 open, for the checks below.
class Amqp {
 public:
  Amqp(const std::string& address, std::uint16_t port) : c_(amqp_new_connection()) {
    amqp_socket_t* s = amqp_tcp_socket_new(c_);
    timeval tv{1, 0};
    if (s == nullptr || amqp_socket_open_noblock(s, address.c_str(), port, &tv) != AMQP_STATUS_OK) return;
    amqp_set_handshake_timeout(c_, &tv);
    if (amqp_login(c_, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest").reply_type !=
        AMQP_RESPONSE_NORMAL) {
      return;
    }
    amqp_channel_open(c_, 1);
    ok_ = amqp_get_rpc_reply(c_).reply_type == AMQP_RESPONSE_NORMAL;
  }
  ~Amqp() {
    if (ok_) {
      amqp_channel_close(c_, 1, AMQP_REPLY_SUCCESS);
      amqp_connection_close(c_, AMQP_REPLY_SUCCESS);
    }
    amqp_destroy_connection(c_);
  }
  bool ok() const { return ok_; }
  amqp_connection_state_t get() { return c_; }

 private:
  amqp_connection_state_t c_;
  bool ok_ = false;
};

std::string text(amqp_bytes_t b) {
  return b.len == 0 ? std::string() : std::string(static_cast<char*>(b.bytes), b.len);
}

}  // namespace

StatusOr<std::unique_ptr<RabbitServer>> RabbitServer::start(std::string address,
                                                            std::chrono::milliseconds consumer_timeout) {
  static std::atomic<int> counter{0};
  std::unique_ptr<RabbitServer> s(new RabbitServer());
  s->address_ = std::move(address);
  const std::string tag = std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
  s->dir_ = fs::temp_directory_path() / ("idem-rabbitmq-" + tag);
  s->node_ = "idem-" + tag + "@localhost";
  fs::remove_all(s->dir_);
  fs::create_directories(s->dir_ / "home");
  // On 127.0.0.1 the TLS listeners take EXTERNAL logins (the client certificate's CN).
  std::ofstream(s->dir_ / "enabled_plugins")
      << (s->address_ == "127.0.0.1" ? "[rabbitmq_auth_mechanism_ssl].\n" : "[].\n");
  if (s->address_ == "127.0.0.1") {
    std::string error;
    auto files = test_support::make_tls_files(s->dir_ / "tls", &error);
    if (!files) return unavailable(error);
    s->tls_ = std::move(*files);
  }
  std::ofstream advanced(s->dir_ / "advanced.config");
  if (consumer_timeout.count() > 0) {
    // The channel checks its consumers' deliveries every channel_tick_interval (one
    // minute by default, which is why the documentation allows no shorter timeout).
    advanced << "[{rabbit, [{consumer_timeout, " << consumer_timeout.count() << "}, {channel_tick_interval, "
             << std::max<long long>(100, consumer_timeout.count() / 4) << "}]}].\n";
  } else {
    advanced << "[].\n";
  }
  advanced.close();
  Status last = unavailable("no free ports");
  for (int attempt = 0; attempt < 3; ++attempt) {
    s->port_ = free_port();
    s->dist_port_ = free_port();
    s->epmd_port_ = free_port();
    s->tls_port_ = s->address_ == "127.0.0.1" ? free_port() : 0;
    if (s->port_ == 0 || s->dist_port_ == 0 || s->epmd_port_ == 0 || s->port_ == s->dist_port_) continue;
    reap(s->epmd_pid_, SIGKILL);
    if (last = s->start_epmd(); !last.ok()) continue;
    if (last = s->launch(); last.ok()) return s;
  }
  return last;
}

RabbitServer& RabbitServer::shared() {
  static std::unique_ptr<RabbitServer> server = [] {
    auto s = start();
    if (!s.ok()) {
      std::fprintf(stderr, "cannot start rabbitmq-server: %s\n", s.status().to_string().c_str());
      std::abort();
    }
    return std::move(s).value();
  }();
  return *server;
}

RabbitServer::~RabbitServer() {
  kill();
  reap(epmd_pid_, SIGKILL);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string RabbitServer::uri(const std::string& queue) const {
  return "amqp://guest:guest@" + address_ + ":" + std::to_string(port_) + "/%2F?queue=" + queue;
}

// The node's epmd, a child of this process (the node would otherwise start one that
// outlives the test), on a private port so nodes of other tests never meet it.
Status RabbitServer::start_epmd() {
  epmd_pid_ = spawn({kEpmd, "-port", std::to_string(epmd_port_), "-address", "127.0.0.1"}, dir_ / "epmd.log");
  if (epmd_pid_ < 0) return unavailable("fork failed");
  for (int i = 0; i < 200; ++i) {
    if (accepts("127.0.0.1", epmd_port_)) return ok_status();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return unavailable("epmd did not listen on port " + std::to_string(epmd_port_));
}

// rabbitmq.conf: guest from any address off 127.0.0.1, and the TLS listeners on it.
void RabbitServer::write_config() const {
  std::ofstream conf(dir_ / "rabbitmq.conf");
  if (address_ != "127.0.0.1") conf << "loopback_users = none\n";
  if (tls_port_ == 0) return;
  conf << "listeners.ssl.1 = 127.0.0.1:" << tls_port_ << "\nlisteners.ssl.2 = 127.0.0.2:" << tls_port_ << "\n"
       << "ssl_options.cacertfile = " << tls_.ca << "\nssl_options.certfile = " << tls_.server_cert << "\n"
       << "ssl_options.keyfile = " << tls_.server_key << "\nssl_options.verify = verify_peer\n"
       << "ssl_options.fail_if_no_peer_cert = false\n"
       << "auth_mechanisms.1 = PLAIN\nauth_mechanisms.2 = AMQPLAIN\nauth_mechanisms.3 = EXTERNAL\n"
       << "ssl_cert_login_from = common_name\n";
}

Status RabbitServer::launch() {
  write_config();
  const std::string d = dir_.string();
  // RABBITMQ_ALLOW_INPUT makes the start script exec the VM (the PID is the node's own);
  // -noinput keeps it from reading stdin.
  const std::vector<std::string> env = {"HOME=" + d + "/home",
                                        "RABBITMQ_NODENAME=" + node_,
                                        "RABBITMQ_NODE_IP_ADDRESS=" + address_,
                                        "RABBITMQ_NODE_PORT=" + std::to_string(port_),
                                        "RABBITMQ_DIST_PORT=" + std::to_string(dist_port_),
                                        "ERL_EPMD_PORT=" + std::to_string(epmd_port_),
                                        "RABBITMQ_MNESIA_BASE=" + d + "/mnesia",
                                        "RABBITMQ_LOG_BASE=" + d + "/log",
                                        "RABBITMQ_ENABLED_PLUGINS_FILE=" + d + "/enabled_plugins",
                                        "RABBITMQ_CONFIG_FILE=" + d + "/rabbitmq",
                                        "RABBITMQ_ADVANCED_CONFIG_FILE=" + d + "/advanced.config",
                                        "RABBITMQ_ALLOW_INPUT=1",
                                        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-noinput"};
  test_support::SpawnOptions options;
  options.env = std::move(env);
  pid_ = spawn({kServer}, dir_ / "stdout.log", options);
  if (pid_ < 0) return unavailable("fork failed");
  Status s = wait_ready(60'000);
  if (!s.ok()) kill();
  return s;
}

Status RabbitServer::ctl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {kCtl, "-n", node_};
  argv.insert(argv.end(), args.begin(), args.end());
  test_support::SpawnOptions options;
  options.env = {"HOME=" + dir_.string() + "/home", "ERL_EPMD_PORT=" + std::to_string(epmd_port_)};
  const fs::path log = dir_ / "ctl.log";
  const pid_t pid = spawn(argv, log, options);
  if (pid < 0) return unavailable("fork failed");
  const int rc = test_support::wait_exit(pid);
  if (rc == 0) return ok_status();
  std::ifstream f(log);
  return unavailable("rabbitmqctl " + args.front() + " exited " + std::to_string(rc) + ": " +
                     std::string(std::istreambuf_iterator<char>(f), {}));
}

Status RabbitServer::wait_ready(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return unavailable("rabbitmq-server " + node_ + " exited at start (see " + dir_.string() + "/log)");
    }
    if (accepts(address_, port_) && Amqp(address_, port_).ok()) return ok_status();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return unavailable("rabbitmq-server " + node_ + " not ready within " + std::to_string(timeout_ms) + " ms");
}

void RabbitServer::kill() {
  reap(pid_, SIGKILL);
  pid_ = -1;
}

void RabbitServer::stop() {
  reap(pid_, SIGTERM);
  pid_ = -1;
}

// The node is started again on the same ports (clients reconnect to the same address).
// A start right after SIGKILL can fail while epmd still holds the killed node's name,
// so it is tried a few times.
Status RabbitServer::restart() {
  kill();
  Status s = ok_status();
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (s = launch(); s.ok()) return s;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return s;
}

StatusOr<std::uint32_t> RabbitServer::ready(const std::string& queue) const {
  Amqp a(address_, port_);
  if (!a.ok()) return unavailable("cannot connect to the node");
  auto* ok = amqp_queue_declare(a.get(), 1, amqp_cstring_bytes(queue.c_str()), 1, 0, 0, 0, amqp_empty_table);
  if (ok == nullptr) return not_found("no queue " + queue);
  return ok->message_count;
}

StatusOr<std::vector<Message>> RabbitServer::take_all(const std::string& queue) const {
  Amqp a(address_, port_);
  if (!a.ok()) return unavailable("cannot connect to the node");
  std::vector<Message> out;
  for (;;) {
    amqp_rpc_reply_t r = amqp_basic_get(a.get(), 1, amqp_cstring_bytes(queue.c_str()), 1);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) return unavailable("basic.get " + queue + " failed");
    if (r.reply.id != AMQP_BASIC_GET_OK_METHOD) return out;  // get-empty
    amqp_message_t m;
    if (amqp_read_message(a.get(), 1, &m, 0).reply_type != AMQP_RESPONSE_NORMAL) return unavailable("read failed");
    Message msg;
    msg.body = text(m.body);
    if (m.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG) msg.message_id = text(m.properties.message_id);
    if (m.properties._flags & AMQP_BASIC_HEADERS_FLAG) {
      for (int i = 0; i < m.properties.headers.num_entries; ++i) {
        const amqp_table_entry_t& e = m.properties.headers.entries[i];
        if (e.value.kind == AMQP_FIELD_KIND_UTF8 || e.value.kind == AMQP_FIELD_KIND_BYTES) {
          msg.headers[text(e.key)] = text(e.value.value.bytes);
        }
      }
    }
    amqp_destroy_message(&m);
    out.push_back(std::move(msg));
    amqp_maybe_release_buffers(a.get());
  }
}

}  // namespace idem::rabbitmq_test

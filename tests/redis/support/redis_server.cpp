#include "support/redis_server.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "connection.hpp"
#include "support/child_process.hpp"

namespace idem::redis_test {
namespace {

namespace fs = std::filesystem;
using test_support::reap;
using test_support::spawn;

// A port p with p + 10000 (the cluster bus) free too.
std::uint16_t free_port() { return test_support::free_port(10000); }

}  // namespace

StatusOr<int> run_program(const std::vector<std::string>& argv, const fs::path& log, int timeout_ms) {
  const pid_t pid = spawn(argv, log);
  if (pid < 0) return unavailable("fork failed");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  reap(pid, SIGKILL);
  return unavailable(argv[0] + " did not finish within " + std::to_string(timeout_ms) + " ms");
}

StatusOr<std::unique_ptr<RedisServer>> RedisServer::start(ServerConfig config) {
  static std::atomic<int> counter{0};
  std::unique_ptr<RedisServer> s(new RedisServer());
  s->config_ = std::move(config);
  s->dir_ = fs::temp_directory_path() /
            ("idem-redis-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)));
  fs::remove_all(s->dir_);
  fs::create_directories(s->dir_);
  Status last = unavailable("no free port");
  for (int attempt = 0; attempt < 5; ++attempt) {
    s->port_ = free_port();
    if (s->port_ == 0) continue;
    last = s->launch();
    if (last.ok()) return s;
  }
  return last;
}

RedisServer::~RedisServer() {
  kill();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string RedisServer::uri() const {
  std::string auth = config_.password.empty() ? "" : ":" + config_.password + "@";
  std::string at = config_.address + ":" + std::to_string(port_);
  if (config_.tls_cert.empty()) return "redis://" + auth + at;
  std::string tls = "?tls_ca=" + config_.tls_ca;
  if (!config_.tls_client_cert.empty())
    tls += "&tls_cert=" + config_.tls_client_cert + "&tls_key=" + config_.tls_client_key;
  return "rediss://" + auth + at + tls;
}

Status RedisServer::launch() {
  if (!config_.tls_cert.empty() && tls_ == nullptr) {
    TlsOptions t;
    t.enabled = true;
    t.ca_file = config_.tls_ca;
    t.cert_file = config_.tls_client_cert;
    t.key_file = config_.tls_client_key;
    t.insecure = true;  // its own checks: the server may carry a certificate for another name
    auto c = redis_tls::Context::make(t);
    if (!c.ok()) return c.status();
    tls_ = std::move(c).value();
  }
  const bool tls = !config_.tls_cert.empty();
  std::vector<std::string> argv = {"redis-server",
                                   "--port",
                                   tls ? "0" : std::to_string(port_),
                                   "--bind",
                                   config_.address,
                                   "--dir",
                                   dir_.string(),
                                   "--daemonize",
                                   "no",
                                   "--logfile",
                                   (dir_ / "redis.log").string(),
                                   "--save",
                                   "",
                                   "--repl-diskless-sync-delay",
                                   "0",
                                   "--enable-debug-command",
                                   "local"};
  if (config_.persistence) {
    argv.insert(argv.end(), {"--appendonly", "yes", "--appendfsync", "always"});
  } else {
    argv.insert(argv.end(), {"--appendonly", "no"});
  }
  if (config_.cluster) {
    argv.insert(argv.end(), {"--cluster-enabled", "yes", "--cluster-config-file", (dir_ / "nodes.conf").string(),
                             "--cluster-node-timeout", std::to_string(config_.cluster_node_timeout_ms)});
  }
  if (!config_.password.empty()) argv.insert(argv.end(), {"--requirepass", config_.password});
  if (tls) {
    argv.insert(argv.end(), {"--tls-port", std::to_string(port_), "--tls-cert-file", config_.tls_cert, "--tls-key-file",
                             config_.tls_key, "--tls-ca-cert-file", config_.tls_ca, "--tls-auth-clients",
                             config_.tls_auth_clients ? "yes" : "no"});
    if (config_.cluster) argv.insert(argv.end(), {"--tls-cluster", "yes", "--tls-replication", "yes"});
  }
  argv.insert(argv.end(), config_.extra.begin(), config_.extra.end());
  // A partition test's host: reached from other hosts, so not loopback-only.
  if (config_.address != "127.0.0.1") argv.insert(argv.end(), {"--protected-mode", "no"});
  if (!config_.netns.empty()) argv.insert(argv.begin(), {"ip", "netns", "exec", config_.netns});  // execs: same PID
  pid_ = spawn(argv, dir_ / "stdout.log");
  if (pid_ < 0) return unavailable("fork failed");
  Status s = wait_ready(10'000);
  if (!s.ok()) kill();
  return s;
}

Status RedisServer::wait_ready(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Status last = unavailable("not started");
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return unavailable("redis-server on port " + std::to_string(port_) + " exited at start (see " +
                         (dir_ / "redis.log").string() + ")");
    }
    auto r = command({"PING"});
    if (r.ok() && r->type == Reply::Type::kStatus && r->str == "PONG") return ok_status();
    last = r.ok() ? unavailable("PING answered " + r->str) : r.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return last;
}

void RedisServer::kill() {
  reap(pid_, SIGKILL);
  pid_ = -1;
}

void RedisServer::stop() {
  reap(pid_, SIGTERM);
  pid_ = -1;
}

Status RedisServer::restart() {
  kill();
  return launch();
}

StatusOr<Reply> RedisServer::command(const std::vector<std::string>& argv) const {
  redis::detail::ConnectOptions o;
  o.connect_timeout = Duration(500);
  o.command_timeout = Duration(5000);
  o.password = config_.password;
  o.tls = tls_;
  auto c = redis::detail::Connection::open({config_.address, port_}, o);
  if (!c.ok()) return c.status();
  return (*c)->call(argv);
}

}  // namespace idem::redis_test

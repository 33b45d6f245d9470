#include "support/redis_server.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "connection.hpp"

namespace idem::redis_test {
namespace {

namespace fs = std::filesystem;

bool port_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// A port p in [20000, 30000) with p and p + 10000 (the cluster bus) free.
int free_port() {
  static std::mt19937 rng(static_cast<unsigned>(::getpid()) ^
                          static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  for (int i = 0; i < 1000; ++i) {
    const int p = 20000 + static_cast<int>(rng() % 10000);
    if (port_free(p) && port_free(p + 10000)) return p;
  }
  return 0;
}

// fork + exec with the child killed when this process dies.
pid_t spawn(const std::vector<std::string>& argv, const fs::path& out) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::close(fd);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  ::_exit(127);
}

void reap(pid_t pid, int sig) {
  if (pid <= 0) return;
  ::kill(pid, sig);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

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
    s->port_ = static_cast<std::uint16_t>(free_port());
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
  return "redis://" + auth + "127.0.0.1:" + std::to_string(port_);
}

Status RedisServer::launch() {
  std::vector<std::string> argv = {"redis-server",  "--port",   std::to_string(port_), "--bind", "127.0.0.1",
                                   "--dir",         dir_.string(), "--daemonize", "no", "--logfile",
                                   (dir_ / "redis.log").string(), "--save", "",
                                   "--repl-diskless-sync-delay", "0", "--enable-debug-command", "local"};
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
  argv.insert(argv.end(), config_.extra.begin(), config_.extra.end());
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
  auto c = redis::detail::Connection::open({"127.0.0.1", port_}, o);
  if (!c.ok()) return c.status();
  return (*c)->call(argv);
}

}  // namespace idem::redis_test

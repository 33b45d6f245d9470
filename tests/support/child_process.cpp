#include "support/child_process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>

namespace idem::test_support {
namespace {

// This process's environment with `extra` added, "NAME=" entries of `extra` winning.
std::vector<std::string> environment_with(const std::vector<std::string>& extra) {
  std::vector<std::string> out(extra);
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string key = entry.substr(0, entry.find('=') + 1);
    bool overridden = false;
    for (const auto& mine : extra) overridden = overridden || mine.rfind(key, 0) == 0;
    if (!overridden) out.push_back(entry);
  }
  return out;
}

std::vector<char*> pointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// In the child: stdin from /dev/null, stdout and stderr to `out`.
void redirect(const std::filesystem::path& out) {
  if (const int in = ::open("/dev/null", O_RDONLY); in >= 0) ::dup2(in, 0);
  if (const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644); fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::close(fd);
  }
}

}  // namespace

bool port_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

std::uint16_t free_port(int also_free) {
  static std::mt19937 rng(static_cast<unsigned>(::getpid()) ^
                          static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  int ephemeral = 0;
  if (std::FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d", &ephemeral) != 1) ephemeral = 0;
    std::fclose(f);
  }
  int lo = 10000, hi = ephemeral - also_free;
  if (hi - lo < 2000) lo = 20000, hi = 65536 - also_free;  // no room below: take any
  for (int i = 0; i < 1000; ++i) {
    const int p = lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo));
    if (port_free(p) && (also_free == 0 || port_free(p + also_free))) return static_cast<std::uint16_t>(p);
  }
  return 0;
}

pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& out, const SpawnOptions& options) {
  // Everything the child needs is built before fork: it only calls async-signal-safe
  // functions.
  const std::vector<std::string> env = options.env.empty() ? std::vector<std::string>{} : environment_with(options.env);
  std::vector<char*> args = pointers(argv), envp = pointers(env);
  const passwd* user = options.user;
  const uid_t uid = user ? user->pw_uid : 0;
  const gid_t gid = user ? user->pw_gid : 0;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  redirect(out);
  if (user != nullptr && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) ::_exit(126);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // after setuid, which clears it
  if (::getppid() != parent) ::_exit(127);
  if (options.env.empty()) {
    ::execvp(args[0], args.data());
  } else {
    ::execvpe(args[0], args.data(), envp.data());
  }
  ::_exit(127);
}

void reap(pid_t pid, int sig) {
  if (pid <= 0) return;
  ::kill(pid, sig);
  ::waitpid(pid, nullptr, 0);
}

int wait_exit(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace idem::test_support

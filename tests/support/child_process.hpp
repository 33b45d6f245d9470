// Child processes for the tests' private servers (redis-server, nats-server,
// rabbitmq-server, postgres): a free loopback port, fork + exec with the child killed
// when the test process dies, and stop by PID. Never a system-wide service.
#pragma once

#include <pwd.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace idem::test_support {

// True iff TCP `port` can be bound on every local address now.
bool port_free(int port);

// A random port that port_free() accepts, and with it `port + also_free` when
// also_free is not 0 (Redis Cluster's bus port); 0 when 1000 tries found none. Taken
// below the kernel's ephemeral range when that leaves room (10000..32767 by default),
// so no process's outgoing connection takes it between this call and the server's
// bind, nor while a restarted server is down. Randomised per process, so parallel
// tests rarely collide; a caller still retries its start on another port if the
// server cannot bind.
std::uint16_t free_port(int also_free = 0);

struct SpawnOptions {
  // "NAME=value" entries added to this process's environment (overriding the same
  // names). Empty: the child inherits the environment as is.
  std::vector<std::string> env;
  // Run the child as this user (setgroups, setgid, setuid) when not null: postgres
  // refuses to run as root.
  const passwd* user = nullptr;
};

// fork + exec of argv (argv[0] searched in PATH), stdin from /dev/null, stdout and
// stderr appended to `out`. The child gets SIGKILL when this process dies. Returns
// the child's PID, or -1 if fork failed.
pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& out, const SpawnOptions& options = {});

// Sends `sig` to `pid` and waits for it to exit. Does nothing for pid <= 0.
void reap(pid_t pid, int sig);

// Waits for `pid` to exit: its exit code, 128 + the signal that ended it, or -1.
int wait_exit(pid_t pid);

}  // namespace idem::test_support

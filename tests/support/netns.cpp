#include "support/netns.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

namespace idem::test_support {
namespace {

// Runs `ip ARGS`; its output is the error's text when it fails.
Status ip(const std::string& args) {
  const std::string cmd = "ip " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return unavailable("cannot run: " + cmd);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int rc = ::pclose(p);
  if (rc != 0) return unavailable("`ip " + args + "` failed: " + (out.empty() ? "exit " + std::to_string(rc) : out));
  return ok_status();
}

// Slot N (1..250) of this machine, held through a lock file while the host lives, so
// that test processes running side by side never share an address range.
int lock_slot(int* lock_fd) {
  ::mkdir("/run/idem-netns", 0755);
  for (int n = 1; n <= 250; ++n) {
    const std::string path = "/run/idem-netns/" + std::to_string(n);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      *lock_fd = fd;
      return n;
    }
    ::close(fd);
  }
  return -1;
}

}  // namespace

StatusOr<std::unique_ptr<Host>> Host::create() {
  if (::geteuid() != 0) return unavailable("network namespaces need root; this test runs as uid " +
                                           std::to_string(::geteuid()));
  std::unique_ptr<Host> h(new Host());
  int lock_fd = -1;
  const int n = lock_slot(&lock_fd);
  if (n < 0) return unavailable("no free slot under /run/idem-netns");
  h->lock_fd_ = lock_fd;
  const std::string s = std::to_string(n);
  h->name_ = "idem-" + s;
  h->veth_ = "idemv" + s;
  h->here_ = "10.231." + s + ".1";
  h->there_ = "10.231." + s + ".2";
  // What a test process killed before its cleanup left in this slot.
  (void)ip("netns del " + h->name_);
  (void)ip("link del " + h->veth_);
  const std::string peer = h->veth_ + "p";
  for (const std::string& step : {"netns add " + h->name_, "link add " + h->veth_ + " type veth peer name " + peer,
                                  "link set " + peer + " netns " + h->name_,
                                  "addr add " + h->here_ + "/30 dev " + h->veth_, "link set " + h->veth_ + " up",
                                  "-n " + h->name_ + " addr add " + h->there_ + "/30 dev " + peer,
                                  "-n " + h->name_ + " link set " + peer + " up", "-n " + h->name_ + " link set lo up"}) {
    if (Status st = ip(step); !st.ok()) return st;
  }
  h->fd_ = ::open(("/run/netns/" + h->name_).c_str(), O_RDONLY | O_CLOEXEC);
  if (h->fd_ < 0) return unavailable("cannot open /run/netns/" + h->name_);
  return h;
}

Host::~Host() {
  if (fd_ >= 0) ::close(fd_);
  if (!name_.empty()) {
    (void)ip("netns del " + name_);  // takes the veth pair with it
    (void)ip("link del " + veth_);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Status Host::enter() const {
  if (::setns(fd_, CLONE_NEWNET) != 0) return unavailable("setns into " + name_ + " failed");
  return ok_status();
}

Status Host::cut() {
  if (Status s = ip("-n " + name_ + " route add blackhole " + here_ + "/32"); !s.ok()) return s;
  return ip("route add blackhole " + there_ + "/32");
}

Status Host::heal() {
  if (Status s = ip("-n " + name_ + " route del blackhole " + here_ + "/32"); !s.ok()) return s;
  return ip("route del blackhole " + there_ + "/32");
}

}  // namespace idem::test_support

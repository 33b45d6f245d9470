#include "support/netns.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>
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

// Runs `nft ARGS` in namespace ns.
Status nft(const std::string& ns, const std::string& args) {
  return ip("netns exec " + ns + " nft " + args);
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

bool netns_required() {
  const char* v = std::getenv("IDEM_REQUIRE_NETNS");
  return v != nullptr && std::string_view(v) == "1";
}

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

Status Host::lose(int percent) {
  (void)nft(name_, "delete table inet idem_loss");
  if (percent <= 0) return ok_status();
  const std::string rule = "numgen random mod 100 '<' " + std::to_string(percent) + " drop";
  for (const std::string& step :
       {std::string("add table inet idem_loss"),
        std::string("add chain inet idem_loss in '{ type filter hook input priority 0; }'"),
        std::string("add chain inet idem_loss out '{ type filter hook output priority 0; }'"),
        "add rule inet idem_loss in " + rule, "add rule inet idem_loss out " + rule})
    if (Status s = nft(name_, step); !s.ok()) return s;
  return ok_status();
}

StatusOr<std::unique_ptr<Lan>> Lan::create(int hosts) {
  if (::geteuid() != 0) return unavailable("network namespaces need root; this test runs as uid " +
                                           std::to_string(::geteuid()));
  std::unique_ptr<Lan> l(new Lan());
  const int n = lock_slot(&l->lock_fd_);
  if (n < 0) return unavailable("no free slot under /run/idem-netns");
  l->prefix_ = "idemL" + std::to_string(n);
  l->subnet_ = "10.232." + std::to_string(n) + ".";
  l->here_ = l->subnet_ + "1";
  l->hosts_ = hosts;
  const std::string& p = l->prefix_;
  const std::string sw = p + "s";
  (void)ip("netns del " + sw);  // what a test process killed before its cleanup left
  (void)ip("link del " + p + "r");
  for (int i = 0; i < hosts; ++i) (void)ip("netns del " + l->netns(i));
  std::vector<std::string> steps = {"netns add " + sw, "-n " + sw + " link add name sw0 type bridge",
                                    "-n " + sw + " link set sw0 up", "link add " + p + "r type veth peer name " + p + "p",
                                    "link set " + p + "p netns " + sw, "-n " + sw + " link set " + p + "p master sw0",
                                    "-n " + sw + " link set " + p + "p up", "addr add " + l->here_ + "/24 dev " + p + "r",
                                    "link set " + p + "r up"};
  for (int i = 0; i < hosts; ++i) {
    const std::string ns = l->netns(i), end = p + "h" + std::to_string(i), port = p + "q" + std::to_string(i);
    for (const std::string& step :
         {"netns add " + ns, "link add " + end + " type veth peer name " + port, "link set " + end + " netns " + ns,
          "link set " + port + " netns " + sw, "-n " + sw + " link set " + port + " master sw0",
          "-n " + sw + " link set " + port + " up", "-n " + ns + " addr add " + l->address(i) + "/24 dev " + end,
          "-n " + ns + " link set " + end + " up", "-n " + ns + " link set lo up"})
      steps.push_back(step);
  }
  for (const std::string& step : steps)
    if (Status st = ip(step); !st.ok()) return st;
  return l;
}

Lan::~Lan() {
  if (!prefix_.empty()) {
    for (int i = 0; i < hosts_; ++i) (void)ip("netns del " + netns(i));
    (void)ip("netns del " + prefix_ + "s");  // takes the switch's ends of the veth pairs
    (void)ip("link del " + prefix_ + "r");
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string Lan::address(int host) const { return subnet_ + std::to_string(2 + host); }

std::string Lan::netns(int host) const { return prefix_ + "h" + std::to_string(host); }

Status Lan::enter(int host) const {
  const std::string path = "/run/netns/" + netns(host);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return unavailable("cannot open " + path);
  const int rc = ::setns(fd, CLONE_NEWNET);
  ::close(fd);
  if (rc != 0) return unavailable("setns into " + netns(host) + " failed");
  return ok_status();
}

Status Lan::cut(int host) { return ip("-n " + prefix_ + "s link set " + prefix_ + "q" + std::to_string(host) + " down"); }

Status Lan::heal(int host) { return ip("-n " + prefix_ + "s link set " + prefix_ + "q" + std::to_string(host) + " up"); }

}  // namespace idem::test_support

// A simulated host for partition tests: a network namespace of the test's own, joined
// to the test's namespace by a veth pair, with one address on each side (10.231.N.1
// here, 10.231.N.2 there; N distinct per host alive in this process). Servers started
// by the test listen on here(); code in the namespace reaches them there, and
// nothing else: the namespace has no other route. cut() makes the link drop every
// packet silently in both directions (blackhole routes): established connections
// stall and new ones fail, as when a real network partitions; heal() undoes it and
// stalled connections resume. Removed (namespace and veth) when destroyed.
//
// Needs root (CAP_NET_ADMIN) and `ip` from iproute2 (lose(): `nft` too). A test that
// cannot have a host says why through IDEM_NO_NETNS(reason): a skip with the reason
// for a developer without root, a failure with the same reason when
// IDEM_REQUIRE_NETNS=1 (scripts/test.sh sets it when it runs as root, as CI does).
#pragma once

#include <memory>
#include <string>

#include "idem/status.hpp"

namespace idem::test_support {

class Host {
 public:
  // kUnavailable, with what failed, when the namespace cannot be made.
  static StatusOr<std::unique_ptr<Host>> create();
  ~Host();
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  // The test's side of the link (servers listen here) and the host's own address.
  const std::string& here() const { return here_; }
  const std::string& there() const { return there_; }
  const std::string& name() const { return name_; }

  // Moves the calling thread into the host's namespace: sockets it opens from now on
  // belong to the host (a network namespace is per thread). For a thread of its own
  // or a forked child before exec.
  Status enter() const;

  Status cut();
  Status heal();
  // Drops `percent` of the packets that enter or leave the host, at random (an
  // nftables rule in its namespace; `nft` from Debian's nftables). 0 removes it.
  // Delay is not offered: that needs tc's netem, which not every kernel has.
  Status lose(int percent);

 private:
  Host() = default;

  std::string name_, veth_, here_, there_;
  int lock_fd_ = -1;  // holds the slot while the host lives
  int fd_ = -1;       // /run/netns/NAME
};

// Simulated hosts on one switch: `hosts` network namespaces and the test's own side,
// each with one address on a /24 (10.232.N.1 here, 10.232.N.2… for host 0…), joined
// by veth pairs to a bridge in a namespace of its own. Every host reaches every other
// and the test directly, so servers on different hosts can replicate to each other.
// cut(i) takes host i's port on the switch down: its frames are dropped both ways,
// established connections stall and new ones fail; heal(i) brings it back. Removed
// when destroyed. Needs what Host needs.
class Lan {
 public:
  static StatusOr<std::unique_ptr<Lan>> create(int hosts);
  ~Lan();
  Lan(const Lan&) = delete;
  Lan& operator=(const Lan&) = delete;

  int hosts() const { return hosts_; }
  const std::string& here() const { return here_; }  // the test's address
  std::string address(int host) const;
  std::string netns(int host) const;  // the namespace's name, for `ip netns exec`
  // Moves the calling thread into host i's namespace (see Host::enter).
  Status enter(int host) const;

  Status cut(int host);
  Status heal(int host);

 private:
  Lan() = default;
  std::string prefix_;  // "idemLN": names of the namespaces and links
  std::string subnet_;  // "10.232.N."
  std::string here_;
  int hosts_ = 0;
  int lock_fd_ = -1;
};

// True iff IDEM_REQUIRE_NETNS=1: a test that cannot have its namespaces fails.
bool netns_required();

}  // namespace idem::test_support

// Ends the current test (a void function: a TEST body, SetUp) when it cannot have its
// namespaces, with the reason streamed after it: a skip, or a fatal failure when
// netns_required(). Usage: if (!h.ok()) IDEM_NO_NETNS() << h.status().message();
#define IDEM_NO_NETNS()                                                                                 \
  return ::testing::internal::AssertHelper(::idem::test_support::netns_required()                       \
                                               ? ::testing::TestPartResult::kFatalFailure               \
                                               : ::testing::TestPartResult::kSkip,                      \
                                           __FILE__, __LINE__, "no network namespace for this test") = \
             ::testing::Message()

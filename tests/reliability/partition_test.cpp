// Partitions between a consumer and its store, on hosts of the test's own: the
// consumer under test runs on a thread moved into a network namespace
// (support/netns.hpp) and reaches the store's server only over a veth link, which the
// test cuts (every packet dropped, both ways) and heals. A second consumer stays on
// the test's side and keeps its store. Label "partitions"; each test prints one line
// of figures (docs/reliability.md gathers them). Without root the tests skip and say
// why.
//   - Redis store, a consumer cut mid-handler past its lease: the other consumer takes
//     the message over; the first one's late commit is lease_lost (healed before it
//     commits) or store_unavailable within the command timeout (still cut), then a
//     duplicate once healed. The handler ran twice: the bound docs/guarantees.md
//     gives for a lease that expires under a running handler.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <utility>

#include "idem/idem.hpp"
#include "idem/redis_store.hpp"
#include "support/netns.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"

namespace idem::partitions {
namespace {

using namespace std::chrono_literals;
using test_support::Host;

struct Msg {
  std::string id;
};

constexpr Duration kLease{500};

Extractors<Msg> extractors() {
  Extractors<Msg> ex;
  ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  return ex;
}

int lines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

class Partition : public ::testing::Test {
 public:
  void SetUp() override {
    auto h = Host::create();
    if (!h.ok()) IDEM_NO_NETNS() << h.status().message();
    host_ = std::move(*h);
  }
  void TearDown() override {
    if (host_ && cut_) (void)host_->heal();
  }
  void cut() {
    ASSERT_TRUE(host_->cut().ok());
    cut_ = true;
  }
  void heal() {
    ASSERT_TRUE(host_->heal().ok());
    cut_ = false;
  }

 protected:
  std::unique_ptr<Host> host_;
  bool cut_ = false;
};

// What the consumer on the host decided: first for m1 (its handler held until
// `release`), then for m1 again once `healed`.
struct HostDecisions {
  Decision first, again;
  bool first_while_cut = false;  // the first decision came before the test healed the link
  Duration first_took{0};
};

// Runs the consumer on a thread inside the host: opens the store there with
// open_store(), processes m1 with a handler that writes a line to `log`, says when it
// entered, and waits for `release`.
template <class Open>
std::future<HostDecisions> consumer_on_host(Host& host, Open open_store, std::string log, std::promise<void>& entered,
                                            std::shared_future<void> release, std::shared_future<void> healed) {
  return std::async(std::launch::async, [&host, open_store, log, &entered, release, healed]() {
    HostDecisions out;
    if (!host.enter().ok()) return out;
    auto store = open_store(host);
    if (!store.ok()) {
      ADD_FAILURE() << "the consumer on the host cannot open its store: " << store.status().to_string();
      entered.set_value();
      return out;
    }
    ConsumerOptions o;
    o.store = *store;
    o.lease = kLease;
    o.store_retry_delay = 5ms;
    bool first_run = true;
    auto c = Consumer<Msg>::create(o, extractors(), [&](const Msg& m, HandlerContext&) {
      if (std::exchange(first_run, false)) {
        entered.set_value();
        release.wait();
      }
      std::ofstream(log, std::ios::app) << m.id << '\n';
      return HandlerResult::ok();
    });
    if (!c.ok()) return out;
    const auto start = std::chrono::steady_clock::now();
    out.first = c->process({"m1"});
    out.first_took = std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - start);
    out.first_while_cut = healed.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
    healed.wait();
    out.again = c->process({"m1"});
    return out;
  });
}

// The consumer on the host is cut from Redis inside its handler for longer than its
// lease; the one here takes m1 over. heal_first: the link returns before the first
// handler ends (its commit reaches Redis late), else after.
void redis_cut_past_lease(Partition& t, Host& host, bool heal_first, const char* label) {
  auto server = redis_test::RedisServer::start({.extra = {"--bind", "127.0.0.1", host.here(), "--protected-mode", "no"}});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  const std::uint16_t port = (*server)->port();
  testing::TempDir dir("partition-redis");
  const std::string log = dir.sub("effects");
  auto open_there = [port](Host& h) { return redis::open({.endpoints = {{h.here(), port}}}); };
  std::promise<void> entered, release, healed;
  auto first = consumer_on_host(host, open_there, log, entered, release.get_future().share(),
                                healed.get_future().share());
  ASSERT_EQ(entered.get_future().wait_for(10s), std::future_status::ready) << "the handler on the host never ran";
  t.cut();
  std::this_thread::sleep_for(kLease + 300ms);
  auto here = redis::open({.endpoints = {{"127.0.0.1", port}}});
  ASSERT_TRUE(here.ok()) << here.status().to_string();
  ConsumerOptions o;
  o.store = *here;
  o.lease = kLease;
  auto second = Consumer<Msg>::create(o, extractors(), [&](const Msg& m, HandlerContext&) {
    std::ofstream(log, std::ios::app) << m.id << '\n';
    return HandlerResult::ok();
  });
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->process({"m1"}).reason, Reason::kProcessed) << "the expired lease was not taken over";
  if (heal_first) t.heal();
  release.set_value();
  if (!heal_first) {
    // The late commit meets the cut link: it must give up within its command timeout.
    std::this_thread::sleep_for(2500ms);
    t.heal();
  }
  healed.set_value();
  ASSERT_EQ(first.wait_for(30s), std::future_status::ready) << "the consumer on the host hangs";
  const HostDecisions d = first.get();
  if (heal_first) {
    EXPECT_EQ(d.first.reason, Reason::kLeaseLost) << d.first.detail;
  } else {
    EXPECT_EQ(d.first.action, Action::kRetry) << d.first.detail;
    EXPECT_EQ(d.first.reason, Reason::kStoreUnavailable) << d.first.detail;
    // The link comes back 2.5 s after the release: a commit that had not given up by
    // itself (its command timeout) would have waited for it.
    EXPECT_TRUE(d.first_while_cut) << "the commit did not give up while the link was cut";
  }
  EXPECT_EQ(d.again.reason, Reason::kDuplicate) << d.again.detail;
  EXPECT_EQ(second->process({"m1"}).reason, Reason::kDuplicate);
  const int executed = lines(log);
  EXPECT_EQ(executed, 2) << "one run per holder of the lease";
  if (::testing::Test::HasFailure()) return;  // the line below states what the checks found
  std::printf("partition %s: 1 cut past a %lld ms lease; 1 message, handler runs %d (bound 2), late commit %s "
              "(its call took %lld ms), redelivery %s, lost %d\n",
              label, static_cast<long long>(kLease.count()), executed,
              std::string(reason_name(d.first.reason)).c_str(), static_cast<long long>(d.first_took.count()),
              std::string(reason_name(d.again.reason)).c_str(), executed == 0 ? 1 : 0);
}

TEST_F(Partition, RedisStoreCutPastTheLeaseHealedBeforeTheCommitLosesIt) {
  redis_cut_past_lease(*this, *host_, true, "redis store, healed before the commit");
}

TEST_F(Partition, RedisStoreCutPastTheLeaseThroughTheCommitGivesUpThenSeesTheDuplicate) {
  redis_cut_past_lease(*this, *host_, false, "redis store, cut through the commit");
}

}  // namespace
}  // namespace idem::partitions

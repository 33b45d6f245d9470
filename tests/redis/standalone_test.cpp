// idem::redis against one real redis-server: races between threads and processes,
// the one-round-trip path, key layout, databases, WAIT, outages and restarts.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <deque>
#include <map>
#include <thread>

#include "idem/consumer.hpp"
#include "test_util.hpp"

namespace idem::redis_test {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

class RedisStandalone : public WithRedisServer {
 protected:
  ClaimRequest claim(std::string_view id, std::string_view owner, TimePoint now) const {
    return ClaimRequest{id, owner, lease_, std::nullopt, now, std::nullopt};
  }
  CommitRequest commit(std::string_view id, std::string_view owner, TimePoint now) const {
    CommitRequest c;
    c.id = id;
    c.owner = owner;
    c.now = now;
    c.ttl = ttl_;
    return c;
  }

  const Duration lease_{10'000};
  const Duration ttl_{3'600'000};
  ManualClock clock_;
};

TEST_F(RedisStandalone, ManyThreadsRacingOnTheSameIdsHaveExactlyOneWinnerEach) {
  constexpr int kThreads = 8;
  constexpr int kIds = 400;
  const TimePoint t0 = clock_.now();
  std::vector<std::atomic<int>> winners(kIds);
  std::atomic<int> errors{0};
  std::barrier sync(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string owner = "thread-" + std::to_string(t);
      sync.arrive_and_wait();
      // Half the threads claim one by one, half in batches of 16: both paths race.
      for (int i = 0; i < kIds; i += 16) {
        std::vector<std::string> ids;
        for (int k = i; k < std::min(i + 16, kIds); ++k) ids.push_back("race-" + std::to_string(k));
        if (t % 2 == 0) {
          for (std::size_t k = 0; k < ids.size(); ++k) {
            auto c = store_->claim(claim(ids[k], owner, t0));
            if (!c.ok())
              errors.fetch_add(1);
            else if (c->status == ClaimStatus::kNew)
              winners[i + static_cast<int>(k)].fetch_add(1);
          }
        } else {
          std::vector<ClaimRequest> batch;
          for (const auto& id : ids) batch.push_back(claim(id, owner, t0));
          auto out = store_->claim_batch(batch);
          for (std::size_t k = 0; k < out.size(); ++k) {
            if (!out[k].ok())
              errors.fetch_add(1);
            else if (out[k]->status == ClaimStatus::kNew)
              winners[i + static_cast<int>(k)].fetch_add(1);
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  for (int i = 0; i < kIds; ++i) EXPECT_EQ(winners[i].load(), 1) << "id " << i;
}

// Each child process opens its own store (own connections) and claims every id; the
// ids it won are written to a pipe. Exactly one winner per id across processes.
TEST_F(RedisStandalone, SeparateProcessesRacingOnTheSameIdsHaveExactlyOneWinnerEach) {
  constexpr int kProcs = 3;
  constexpr int kIds = 1500;
  const TimePoint t0 = clock_.now();
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<std::pair<pid_t, int>> children;
  for (int p = 0; p < kProcs; ++p) {
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(out[0]);
      ::close(go[1]);
      auto s = redis::open(options_);  // connected and scripts loaded before the start
      if (!s.ok()) ::_exit(2);
      char b;
      if (::read(go[0], &b, 1) != 0) ::_exit(3);  // wait until the parent closes `go`
      const std::string owner = "process-" + std::to_string(p);
      int failures = 0;
      for (int j = 0; j < kIds; ++j) {
        const int i = (j + p * kIds / kProcs) % kIds;  // each starts elsewhere, then overlaps the others
        const std::string id = "proc-race-" + std::to_string(i);
        auto c = (*s)->claim({id, owner, lease_, std::nullopt, t0, std::nullopt});
        if (!c.ok()) {
          ++failures;
          continue;
        }
        if (c->status == ClaimStatus::kNew) {
          const std::int32_t won = i;
          if (::write(out[1], &won, sizeof won) != sizeof won) ::_exit(4);
        }
      }
      ::close(out[1]);
      ::_exit(failures == 0 ? 0 : 5);
    }
    ::close(out[1]);
    children.emplace_back(pid, out[0]);
  }
  ::close(go[0]);
  ::close(go[1]);  // start them all at once
  std::vector<int> winners(kIds, 0);
  std::vector<int> per_process(kProcs, 0);
  for (int p = 0; p < kProcs; ++p) {
    std::int32_t won;
    while (::read(children[p].second, &won, sizeof won) == sizeof won) {
      ASSERT_GE(won, 0);
      ASSERT_LT(won, kIds);
      ++winners[won];
      ++per_process[p];
    }
    ::close(children[p].second);
    int status = 0;
    ASSERT_EQ(::waitpid(children[p].first, &status, 0), children[p].first);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << p << " status " << status;
  }
  for (int i = 0; i < kIds; ++i) EXPECT_EQ(winners[i], 1) << "id " << i;
  std::cout << "[ redis    ] wins per process:";
  for (int n : per_process) std::cout << ' ' << n;
  std::cout << '\n';
}

TEST_F(RedisStandalone, CommitThenClaimAnswersLikeTheTwoCallsInOneRoundTrip) {
  const TimePoint t0 = clock_.now();
  ASSERT_EQ(store_->claim(claim("m1", "A", t0))->status, ClaimStatus::kNew);
  auto both = store_->commit_then_claim(commit("m1", "A", t0), claim("m2", "A", t0));
  ASSERT_TRUE(both.commit.ok()) << both.commit.to_string() << " / " << both.claim.status().to_string();
  ASSERT_TRUE(both.claim.ok()) << both.claim.status().to_string();
  EXPECT_EQ(both.claim->status, ClaimStatus::kNew);
  EXPECT_EQ(store_->claim(claim("m1", "B", t0))->status, ClaimStatus::kCompleted);

  // A rejected commit (B does not hold m2) does not stop the claim of the next id.
  auto rejected = store_->commit_then_claim(commit("m2", "B", t0), claim("m3", "B", t0));
  EXPECT_EQ(rejected.commit.code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(rejected.claim.ok());
  EXPECT_EQ(rejected.claim->status, ClaimStatus::kNew);
  // The next id already in progress elsewhere: the claim says so.
  auto held = store_->commit_then_claim(commit("m2", "A", t0), claim("m3", "A", t0));
  EXPECT_TRUE(held.commit.ok());
  ASSERT_TRUE(held.claim.ok());
  EXPECT_EQ(held.claim->status, ClaimStatus::kInProgress);
  EXPECT_EQ(held.claim->owner, "B");
  // Committing and claiming the same id: the claim sees the commit.
  ASSERT_EQ(store_->claim(claim("m4", "A", t0))->status, ClaimStatus::kNew);
  auto same = store_->commit_then_claim(commit("m4", "A", t0), claim("m4", "C", t0));
  EXPECT_TRUE(same.commit.ok());
  EXPECT_EQ(same.claim->status, ClaimStatus::kCompleted);
}

TEST_F(RedisStandalone, KeyLayoutIsPrefixTagAndServerExpiryIsASafetyNet) {
  const TimePoint t0 = clock_.now();
  EXPECT_EQ(key_of(*store_, "abc"), options_.prefix + "{abc}");
  ASSERT_EQ(store_->claim(claim("abc", "A", t0))->status, ClaimStatus::kNew);
  auto type = server_->command({"TYPE", key_of(*store_, "abc")});
  ASSERT_TRUE(type.ok());
  EXPECT_EQ(type->str, "string") << "one MessagePack value per id";
  auto pttl = server_->command({"PTTL", key_of(*store_, "abc")});
  ASSERT_TRUE(pttl.ok());
  EXPECT_GT(pttl->integer, options_.expiry_slack.count());
  EXPECT_LE(pttl->integer, lease_.count() + options_.expiry_slack.count());
  auto info = store_->inspect("abc", t0);
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->state, RecordState::kInProgress);

  // Liveness follows the caller's clock, not the server's: the key still exists on
  // the server, yet at now + lease the lease is over.
  auto late = store_->claim(claim("abc", "B", t0 + lease_ + 1ms));
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->status, ClaimStatus::kNew);

  // Commit: the server keeps the key for ttl + slack.
  ASSERT_TRUE(store_->commit(commit("abc", "B", t0 + lease_ + 1ms)).ok());
  pttl = server_->command({"PTTL", key_of(*store_, "abc")});
  EXPECT_GT(pttl->integer, ttl_.count());
  EXPECT_LE(pttl->integer, ttl_.count() + options_.expiry_slack.count());
  // Keys of other prefixes are separate stores.
  redis::Options other = options_;
  other.prefix = "other:";
  auto second = open_or_die(other);
  EXPECT_EQ(second->claim(claim("abc", "C", t0 + lease_ + 2ms))->status, ClaimStatus::kNew);
}

TEST_F(RedisStandalone, DatabasesAreSeparate) {
  const TimePoint t0 = clock_.now();
  redis::Options db1 = options_, db2 = options_;
  db1.db = 1;
  db2.db = 2;
  auto s1 = open_or_die(db1);
  auto s2 = open_or_die(db2);
  ASSERT_EQ(s1->claim(claim("x", "A", t0))->status, ClaimStatus::kNew);
  EXPECT_EQ(s2->claim(claim("x", "B", t0))->status, ClaimStatus::kNew);
  EXPECT_EQ(s1->claim(claim("x", "B", t0))->status, ClaimStatus::kInProgress);
  auto in_db1 = server_->command(
      {"EVAL", "redis.call('SELECT', '1') return redis.call('EXISTS', KEYS[1])", "1", key_of(*s1, "x")});
  ASSERT_TRUE(in_db1.ok());
  EXPECT_EQ(in_db1->integer, 1);
  auto in_db0 = server_->command({"EXISTS", key_of(*s1, "x")});
  EXPECT_EQ(in_db0->integer, 0);
}

TEST_F(RedisStandalone, WaitForReplicasIsOptIn) {
  const TimePoint t0 = clock_.now();
  ServerConfig rc;
  rc.extra = {"--replicaof", "127.0.0.1", std::to_string(server_->port())};
  auto replica = RedisServer::start(rc);
  ASSERT_TRUE(replica.ok()) << replica.status().to_string();
  // The replica syncs within a few ms; the deadline only stops a test that hangs.
  bool synced = false;
  for (const auto deadline = std::chrono::steady_clock::now() + 60s;
       !synced && std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(10ms)) {
    auto info = (*replica)->command({"INFO", "replication"});
    synced = info.ok() && info->str.find("master_link_status:up") != std::string::npos;
  }
  ASSERT_TRUE(synced) << "the replica did not sync";
  redis::Options one = options_;
  one.wait_replicas = 1;
  one.wait_timeout = Duration(2000);
  auto s = open_or_die(one);
  ASSERT_EQ(s->claim(claim("w", "A", t0))->status, ClaimStatus::kNew);
  EXPECT_TRUE(s->commit(commit("w", "A", t0)).ok());
  auto on_replica = (*replica)->command({"GET", key_of(*s, "w")});
  auto on_master = server_->command({"GET", key_of(*s, "w")});
  ASSERT_TRUE(on_replica.ok() && on_master.ok());
  EXPECT_EQ(on_replica->str, on_master->str) << "WAIT returned only after the replica had the commit";

  redis::Options two = options_;
  two.wait_replicas = 2;
  two.wait_timeout = Duration(50);
  auto s2 = open_or_die(two);
  ASSERT_EQ(s2->claim(claim("w2", "A", t0))->status, ClaimStatus::kNew);
  Status under = s2->commit(commit("w2", "A", t0));
  EXPECT_EQ(under.code(), StatusCode::kUnavailable) << under.to_string();
  EXPECT_NE(under.message().find("1 of 2 replicas"), std::string::npos) << under.to_string();
  EXPECT_EQ(s2->claim(claim("w2", "B", t0))->status, ClaimStatus::kCompleted) << "it landed on the master";
  std::vector<ClaimRequest> claims = {claim("w3", "A", t0), claim("w4", "A", t0)};
  ASSERT_TRUE(s->claim_batch(claims)[1].ok());
  std::vector<CommitRequest> commits = {commit("w3", "A", t0), commit("w4", "A", t0)};
  for (const Status& st : s->commit_batch(commits)) EXPECT_TRUE(st.ok()) << st.to_string();
}

TEST_F(RedisStandalone, ServerDownIsUnavailableFastAndTheStoreRecoversAfterARestart) {
  options_.reconnect_max = Duration(100);
  // "Fast" means without waiting for a timeout: with 30 s timeouts, one call that waited
  // would take 30 s, while fifteen refused calls take milliseconds even under sanitizers.
  options_.connect_timeout = Duration(30'000);
  options_.command_timeout = Duration(30'000);
  store_ = open_or_die(options_);
  const TimePoint t0 = clock_.now();
  ASSERT_EQ(store_->claim(claim("before", "A", t0))->status, ClaimStatus::kNew);
  server_->kill();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) {
    auto c = store_->claim(claim("during", "A", t0));
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kUnavailable) << c.status().to_string();
    EXPECT_EQ(store_->commit(commit("before", "A", t0)).code(), StatusCode::kUnavailable);
    auto b = store_->claim_batch(std::vector<ClaimRequest>{claim("x", "A", t0), claim("y", "A", t0)});
    EXPECT_EQ(b[1].status().code(), StatusCode::kUnavailable);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "a down server fails calls without a timeout";
  ASSERT_TRUE(server_->restart().ok());
  // Not persistent: the restarted server is empty. Within the reconnect backoff the
  // store connects again.
  StatusOr<ClaimResult> c = unavailable("not tried");
  for (const auto deadline = std::chrono::steady_clock::now() + 60s;
       !c.ok() && std::chrono::steady_clock::now() < deadline;) {
    c = store_->claim(claim("after", "A", t0));
    if (!c.ok()) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->status, ClaimStatus::kNew);
}

TEST_F(RedisStandalone, SlowServerIsUnavailableAfterTheCommandTimeout) {
  redis::Options fast = options_;
  fast.command_timeout = Duration(200);
  auto s = open_or_die(fast);
  const TimePoint t0 = clock_.now();
  // Claims until one is sent while the server sleeps: that one times out. (Had it
  // waited for the server instead, it would have succeeded once the server woke.)
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    (void)server_->command({"DEBUG", "SLEEP", "2"});
    woke = true;
  });
  StatusOr<ClaimResult> c = unavailable("not tried");
  std::string id;
  for (int i = 0; !woke; ++i) {
    id = "slow-" + std::to_string(i);
    c = s->claim(claim(id, "A", t0));
    if (!c.ok()) break;
  }
  sleeper.join();
  ASSERT_FALSE(c.ok()) << "no claim was sent while the server slept";
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable) << c.status().to_string();
  ASSERT_TRUE(server_->command({"PING"}).ok()) << "the server is awake again";
  // The broken connection was dropped; the next call uses a fresh one. The timed-out
  // claim may or may not have run: the id is either new or held by A.
  auto again = s->claim(claim(id, "A", t0));
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_TRUE(again->status == ClaimStatus::kNew || (again->status == ClaimStatus::kInProgress && again->owner == "A"));
}

struct Msg {
  std::string id;
};

// The consumer runs over a server that is killed (SIGKILL) mid-run and restarted
// from its AOF (appendfsync always). The driver redelivers whatever got `retry`.
TEST(RedisRestart, EveryMessageIsProcessedExactlyOnceAcrossAServerCrash) {
  ServerConfig cfg;
  cfg.persistence = true;
  auto server = RedisServer::start(cfg);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  redis::Options o = options_for((*server)->uri());
  o.reconnect_max = Duration(100);
  auto store = open_or_die(o);
  ASSERT_NE(store, nullptr);

  auto clock = std::make_shared<ManualClock>();
  ConsumerOptions co;
  co.store = store;
  co.clock = clock;
  co.owner = "consumer-1";
  std::map<std::string, int> runs;
  Extractors<Msg> x;
  x.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  auto consumer = Consumer<Msg>::create(co, x, [&](const Msg& m, HandlerContext&) {
    ++runs[m.id];
    return HandlerResult::ok();
  });
  ASSERT_TRUE(consumer.ok()) << consumer.status().to_string();

  constexpr int kIds = 300;
  std::deque<Msg> queue;
  for (int i = 0; i < kIds; ++i) {
    queue.push_back({"msg-" + std::to_string(i)});
    if (i % 10 == 0) queue.push_back({"msg-" + std::to_string(i / 2)});  // duplicates
  }
  int delivered = 0, during_outage = 0, outage_retries = 0, duplicates = 0;
  bool down = false, restarted = false;
  const auto deadline = std::chrono::steady_clock::now() + 300s;  // only stops a test that hangs
  while (!queue.empty() && std::chrono::steady_clock::now() < deadline) {
    if (delivered == 120 && !down && !restarted) {
      (*server)->kill();
      down = true;
    }
    if (down && during_outage == 40) {
      ASSERT_TRUE((*server)->restart().ok());
      down = false;
      restarted = true;
    }
    Msg m = queue.front();
    queue.pop_front();
    Decision d = consumer->process(m);
    ++delivered;
    if (down) {
      ++during_outage;
      EXPECT_EQ(d.action, Action::kRetry);
      EXPECT_EQ(d.reason, Reason::kStoreUnavailable) << reason_name(d.reason);
      outage_retries += d.action == Action::kRetry;
    }
    if (d.action == Action::kRetry) {
      queue.push_back(m);  // the broker redelivers
      if (!down) std::this_thread::sleep_for(5ms);
      continue;
    }
    ASSERT_EQ(d.action, Action::kAck) << reason_name(d.reason);
    if (d.reason == Reason::kDuplicate) ++duplicates;
  }
  EXPECT_TRUE(queue.empty()) << queue.size() << " deliveries left";
  EXPECT_TRUE(restarted);
  EXPECT_EQ(outage_retries, 40);
  ASSERT_EQ(runs.size(), static_cast<std::size_t>(kIds));
  for (const auto& [id, n] : runs) EXPECT_EQ(n, 1) << id;
  EXPECT_EQ(duplicates, 30) << "the re-sent ids were answered as duplicates, also after the crash";
}

}  // namespace
}  // namespace idem::redis_test

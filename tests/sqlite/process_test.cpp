// Several processes: a consumer killed mid-stream loses nothing it committed, and
// shared leases give exactly one winner per id across processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sqlite_test_util.hpp"

namespace idem::sqlite::testing {
namespace {

std::string read_some(int fd) {
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(SqliteCrash, CommittedIdsSurviveSigkill) {
  TempDir dir;
  const auto path = dir.file("idem.db");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    auto s = open(options_for(path));
    if (!s.ok()) ::_exit(1);
    for (int i = 0;; ++i) {
      const std::string id = "crash-" + std::to_string(i);
      auto c = (*s)->claim(claim_req(id, "child", t0()));
      if (!c.ok() || c->status != ClaimStatus::kNew) ::_exit(2);
      if (!(*s)->commit(commit_req(id, "child", t0(), "r" + std::to_string(i))).ok()) ::_exit(3);
      write_all(fds[1], id + "\n");  // reported only after the commit returned
    }
  }
  ::close(fds[1]);
  std::string reported;
  while (std::count(reported.begin(), reported.end(), '\n') < 500) {
    std::string more = read_some(fds[0]);
    ASSERT_FALSE(more.empty()) << "the child stopped early";
    reported += more;
  }
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  for (std::string more; !(more = read_some(fds[0])).empty();) reported += more;
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  std::vector<std::string> ids = lines(reported);
  if (!reported.empty() && reported.back() != '\n') ids.pop_back();  // a torn last line
  ASSERT_GE(ids.size(), 500u);
  EXPECT_EQ(raw_query(path, "PRAGMA integrity_check"), "ok");
  auto store = open_ok(options_for(path));
  ASSERT_NE(store, nullptr);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto c = store->claim(claim_req(ids[i], "parent", t0()));
    ASSERT_TRUE(c.ok());
    ASSERT_EQ(c->status, ClaimStatus::kCompleted) << ids[i];
    ASSERT_EQ(c->result, "r" + std::to_string(i));
  }
  // The store goes on working on the recovered file.
  EXPECT_EQ(store->claim(claim_req("after-crash", "parent", t0()))->status, ClaimStatus::kNew);
  EXPECT_TRUE(store->commit(commit_req("after-crash", "parent", t0())).ok());
}

// Two processes race on the same ids with shared leases.
TEST(SqliteShared, TwoProcessesGetExactlyOneWinnerPerId) {
  TempDir dir;
  const auto path = dir.file("shared.db");
  { ASSERT_NE(open_ok(options_for(path, LeaseMode::kShared)), nullptr); }
  constexpr int kIds = 300;
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  struct Child {
    pid_t pid;
    int out;
  };
  std::vector<Child> children;
  for (int k = 0; k < 2; ++k) {
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(go[1]);
      ::close(out[0]);
      Options o = options_for(path, LeaseMode::kShared);
      o.busy_timeout = Duration(10'000);
      auto s = open(o);
      if (!s.ok()) ::_exit(1);
      char c;
      (void)::read(go[0], &c, 1);  // both start together
      const std::string owner = "p" + std::to_string(k);
      std::string wins;
      for (int i = 0; i < kIds; ++i) {
        const std::string id = "race-" + std::to_string(i);
        auto r = (*s)->claim(claim_req(id, owner, t0()));
        if (!r.ok()) ::_exit(2);
        if (r->status != ClaimStatus::kNew) continue;
        Status st = (*s)->commit(commit_req(id, owner, t0(), owner));
        if (!st.ok()) ::_exit(3);
        wins += id + "\n";
      }
      write_all(out[1], wins);
      ::_exit(0);
    }
    ::close(out[1]);
    children.push_back({pid, out[0]});
  }
  ::close(go[0]);
  ::close(go[1]);  // EOF releases both children
  std::multiset<std::string> winners;
  for (auto& c : children) {
    std::string text;
    for (std::string more; !(more = read_some(c.out)).empty();) text += more;
    ::close(c.out);
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    for (auto& id : lines(text)) winners.insert(id);
  }
  ASSERT_EQ(winners.size(), static_cast<std::size_t>(kIds));
  for (int i = 0; i < kIds; ++i) EXPECT_EQ(winners.count("race-" + std::to_string(i)), 1u);
  EXPECT_EQ(raw_query(path, "PRAGMA integrity_check"), "ok");
  auto store = open_ok(options_for(path, LeaseMode::kShared));
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < kIds; ++i)
    EXPECT_EQ(store->claim(claim_req("race-" + std::to_string(i), "x", t0()))->status, ClaimStatus::kCompleted);
}

}  // namespace
}  // namespace idem::sqlite::testing

// Crash safety: a child process commits in a loop and is killed with SIGKILL at a
// random moment; the database then reopens with every acknowledged commit and no
// partial one (a commit is one WriteBatch: the record, the cleared retry count and
// the handler's own writes).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>

#include "idem/idem.hpp"
#include "idem/rocksdb_store.hpp"
#include "rocksdb/test_dir.hpp"

namespace idem {
namespace {

using std::chrono::milliseconds;
using testing::raw_read_all;
using testing::TempDir;

struct Msg {
  std::string id;
};

// The child: processes c-0, c-1, … through a transactional consumer whose handler
// writes state key s-N; reports N on `fd` after each commit returns.
[[noreturn]] void commit_forever(const std::string& path, int fd) {
  auto store = rocksdb::open({.path = path, .user_column_families = {"state"}});
  if (!store.ok()) ::_exit(3);
  ConsumerOptions opts;
  opts.store = *store;
  opts.transactional = true;
  Extractors<Msg> ex;
  ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  auto consumer = Consumer<Msg>::create(opts, ex, [](const Msg& m, HandlerContext& ctx) {
    rocksdb::Batch* b = rocksdb::batch(ctx);
    if (b == nullptr) return HandlerResult::fail("no batch");
    const std::string n = m.id.substr(2);
    if (!b->put("state", "s-" + n, std::string(100, 'v')).ok()) return HandlerResult::fail("put");
    if (!b->put("state", "t-" + n, n).ok()) return HandlerResult::fail("put");
    return HandlerResult::ok("r" + n);
  });
  if (!consumer.ok()) ::_exit(4);
  for (std::uint32_t n = 0;; ++n) {
    if (consumer->process({"c-" + std::to_string(n)}).reason != Reason::kProcessed) ::_exit(5);
    if (::write(fd, &n, sizeof n) != sizeof n) ::_exit(6);
  }
}

// The child: commits batches of 50 records "b-<batch>-<j>" with commit_batch.
[[noreturn]] void commit_batches_forever(const std::string& path, int fd) {
  auto store = rocksdb::open({.path = path});
  if (!store.ok()) ::_exit(3);
  const TimePoint t0 = from_unix_ms(1'700'000'000'000);
  std::vector<std::string> ids(50);
  for (std::uint32_t b = 0;; ++b) {
    std::vector<CommitRequest> batch;
    for (int j = 0; j < 50; ++j) {
      ids[j] = "b-" + std::to_string(b) + "-" + std::to_string(j);
      batch.push_back({ids[j], "A", std::nullopt, t0, Duration(3'600'000), std::string_view("r")});
    }
    for (const Status& s : (*store)->commit_batch(batch))
      if (!s.ok()) ::_exit(5);
    if (::write(fd, &b, sizeof b) != sizeof b) ::_exit(6);
  }
}

// Forks `child`, lets it acknowledge at least `min_acks` steps, kills it with
// SIGKILL after a further `extra`, and returns the last step it acknowledged.
template <class F>
std::int64_t run_and_kill(F child, std::uint32_t min_acks, milliseconds extra) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1]);
  }
  ::close(fds[1]);
  std::int64_t last = -1;
  std::uint32_t n = 0;
  while (last + 1 < static_cast<std::int64_t>(min_acks) && ::read(fds[0], &n, sizeof n) == sizeof n) last = n;
  std::this_thread::sleep_for(extra);  // the child keeps committing meanwhile
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child died on its own: " << status;
  while (::read(fds[0], &n, sizeof n) == sizeof n) last = n;  // acks written before the kill
  ::close(fds[0]);
  return last;
}

TEST(RocksdbCrash, SigkillDuringTransactionalCommitsLeavesNoPartialCommit) {
  TempDir dir;
  const std::string path = dir.sub("db");
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::int64_t acked =
        run_and_kill([&](int fd) { commit_forever(path, fd); }, 200u * (round + 1), milliseconds(30 + 40 * round));
    ASSERT_GE(acked, 0);
    const auto done = raw_read_all(path, "idem_done");
    const auto state = raw_read_all(path, "state");
    // Every commit is all or nothing: record ⇔ both state keys.
    std::int64_t max_done = -1;
    for (const auto& [id, v] : done) max_done = std::max<std::int64_t>(max_done, std::stoll(id.substr(2)));
    EXPECT_EQ(static_cast<std::int64_t>(done.size()), max_done + 1) << "commits land in order, without gaps";
    EXPECT_GE(max_done, acked) << "every acknowledged commit survives the kill";
    EXPECT_LE(max_done, acked + 1) << "at most the one commit in flight landed unacknowledged";
    EXPECT_EQ(state.size(), 2 * done.size());
    for (const auto& [id, v] : done) {
      const std::string n = id.substr(2);
      EXPECT_TRUE(state.contains("s-" + n) && state.contains("t-" + n)) << id;
    }
    // Reopened through idem: the next id is new, the last one a duplicate, and the
    // child's next round continues the sequence after the ids it finds.
    auto store = rocksdb::open({.path = path, .user_column_families = {"state"}});
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    const TimePoint now = std::chrono::system_clock::now();
    auto last = (*store)->claim({"c-" + std::to_string(max_done), "P", milliseconds(1000), std::nullopt, now});
    ASSERT_TRUE(last.ok());
    EXPECT_EQ(last->status, ClaimStatus::kCompleted);
    EXPECT_EQ(last->result, std::optional<std::string>("r" + std::to_string(max_done)));
    auto next = (*store)->claim({"c-" + std::to_string(max_done + 1), "P", milliseconds(1000), std::nullopt, now});
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(next->status, ClaimStatus::kNew);
    store = Status(StatusCode::kInternal, "closed");
    // The next round's child starts again at c-0: those are duplicates and it stops
    // with exit 5, so clear the database between rounds.
    std::filesystem::remove_all(path);
  }
}

TEST(RocksdbCrash, SigkillDuringBatchCommitsLeavesWholeBatchesOnly) {
  TempDir dir;
  const std::string path = dir.sub("db");
  const std::int64_t acked = run_and_kill([&](int fd) { commit_batches_forever(path, fd); }, 100u, milliseconds(50));
  ASSERT_GE(acked, 0);
  const auto done = raw_read_all(path, "idem_done");
  std::map<std::int64_t, int> per_batch;
  for (const auto& [id, v] : done) {
    const auto dash = id.find('-', 2);
    per_batch[std::stoll(id.substr(2, dash - 2))]++;
  }
  for (const auto& [b, n] : per_batch) EXPECT_EQ(n, 50) << "batch " << b << " landed partially";
  ASSERT_FALSE(per_batch.empty());
  EXPECT_GE(per_batch.rbegin()->first, acked);
  EXPECT_EQ(static_cast<std::int64_t>(per_batch.size()), per_batch.rbegin()->first + 1);
}

}  // namespace
}  // namespace idem

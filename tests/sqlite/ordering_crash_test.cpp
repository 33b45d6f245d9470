// Strict ordering across a real process crash (docs/design.md §5): a consumer process dies in the
// middle of a drain; a new process resumes it with tick(): nothing applied twice,
// nothing skipped.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "idem/consumer.hpp"
#include "idem/sqlite_store.hpp"
#include "support/entity_messages.hpp"
#include "support/temp_dir.hpp"

namespace idem::test {
namespace {

ConsumerOptions strict_options(const std::string& db, std::shared_ptr<ManualClock> clock) {
  ConsumerOptions o;
  sqlite::Options so;
  so.path = db;
  o.store = sqlite::open(so).value();
  o.clock = std::move(clock);
  o.ordering.mode = Ordering::kStrict;
  o.on_buffered = [](const BufferedOutcome&) {};
  o.owner = "consumer";  // one logical consumer that restarts
  o.lease = Duration(1000);
  return o;
}

// Appends "version\n" to the file: the handler's external effect, which survives the
// process.
void record_effect(const std::string& path, std::uint64_t version) {
  std::ofstream out(path, std::ios::app);
  out << version << '\n';
}

std::vector<std::uint64_t> effects(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::uint64_t> v;
  for (std::uint64_t x; in >> x;) v.push_back(x);
  return v;
}

TEST(SqliteOrderingCrash, ADrainCutByACrashResumesWithoutRepeatsOrGaps) {
  testing::TempDir dir("ordering-crash");
  const std::string db = dir.str() + "/idem.db";
  const std::string log = dir.str() + "/effects";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The first process: buffers 2..4, processes 1, drains 2, dies inside 3's handler.
    auto clock = std::make_shared<ManualClock>(from_unix_ms(1'000'000));
    auto c = Consumer<EntityMsg>::create(strict_options(db, clock), entity_extractors(),
                                         [&](const EntityMsg& m, HandlerContext&) {
                                           record_effect(log, *m.version);
                                           if (*m.version == 3) ::_exit(0);  // the crash
                                           return HandlerResult::ok();
                                         });
    if (!c.ok()) ::_exit(2);
    for (std::uint64_t v : {4, 2, 3})
      if (c->process(versioned("m" + std::to_string(v), "k", v)).reason != Reason::kBuffered) ::_exit(3);
    c->process(versioned("m1", "k", 1));
    ::_exit(4);  // not reached: the crash comes first
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "the first process did not reach the crash point";
  EXPECT_EQ(effects(log), (std::vector<std::uint64_t>{1, 2, 3}));

  // The second process, after the crashed lease expired.
  auto clock = std::make_shared<ManualClock>(from_unix_ms(1'000'000 + 2000));
  Journal journal;
  auto c = entity_consumer(strict_options(db, clock), journal);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->tick(), 2u);
  EXPECT_EQ(journal.versions(), (std::vector<std::uint64_t>{3, 4}));
  // Every version is now a duplicate (its id committed), a new id for an old version stale.
  for (std::uint64_t v : {1, 2, 3, 4})
    EXPECT_EQ(c->process(versioned("m" + std::to_string(v), "k", v)).reason, Reason::kDuplicate) << v;
  EXPECT_EQ(c->process(versioned("late3", "k", 3)).reason, Reason::kStale);
}

}  // namespace
}  // namespace idem::test

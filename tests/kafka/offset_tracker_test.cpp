// The offset tracker: only the contiguous prefix of decided offsets is committed.
#include "offset_tracker.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace idem::kafka::detail {
namespace {

TEST(OffsetTracker, NothingToCommitBeforeTheFirstOffset) {
  OffsetTracker t;
  EXPECT_EQ(t.to_commit(), std::nullopt);
  EXPECT_FALSE(t.done(0));
  EXPECT_EQ(t.undecided(), 0u);
}

TEST(OffsetTracker, CommitsTheLowestUndecidedOffset) {
  OffsetTracker t;
  for (std::int64_t o = 10; o < 15; ++o) ASSERT_TRUE(t.add(o));
  EXPECT_EQ(t.to_commit(), 10);  // nothing decided: the group stays at 10
  EXPECT_TRUE(t.done(10));
  EXPECT_EQ(t.to_commit(), 11);
  EXPECT_EQ(t.undecided(), 4u);
}

TEST(OffsetTracker, OutOfOrderDecisionsWaitForTheGapBelowThem) {
  OffsetTracker t;
  for (std::int64_t o = 0; o < 5; ++o) t.add(o);
  EXPECT_TRUE(t.done(3));
  EXPECT_TRUE(t.done(4));
  EXPECT_TRUE(t.done(1));
  EXPECT_EQ(t.to_commit(), 0);  // 0 undecided: nothing above it may be committed
  EXPECT_TRUE(t.done(0));
  EXPECT_EQ(t.to_commit(), 2);  // 0 and 1 done, 2 not
  EXPECT_TRUE(t.done(2));
  EXPECT_EQ(t.to_commit(), 5);  // all done: one past the highest
  EXPECT_EQ(t.undecided(), 0u);
}

TEST(OffsetTracker, ReportsAnOffsetOnlyOnceItMoved) {
  OffsetTracker t;
  t.add(0);
  t.add(1);
  ASSERT_EQ(t.to_commit(), 0);
  t.committed(0);
  EXPECT_EQ(t.to_commit(), std::nullopt);
  t.done(1);
  EXPECT_EQ(t.to_commit(), std::nullopt);  // still 0: 0 is undecided
  t.done(0);
  ASSERT_EQ(t.to_commit(), 2);
  t.committed(2);
  EXPECT_EQ(t.to_commit(), std::nullopt);
  t.add(2);
  EXPECT_EQ(t.to_commit(), std::nullopt);  // 2 undecided: the committed 2 stands
  t.done(2);
  EXPECT_EQ(t.to_commit(), 3);
}

// An asynchronous commit may fail unseen: it is not sent again asynchronously, but
// the next synchronous commit makes it.
TEST(OffsetTracker, ASentOffsetIsCommittedAgainSynchronously) {
  OffsetTracker t;
  t.add(0);
  t.done(0);
  ASSERT_EQ(t.to_commit(false), 1);
  t.sent(1);
  EXPECT_EQ(t.to_commit(false), std::nullopt);
  ASSERT_EQ(t.to_commit(true), 1);
  t.committed(1);
  EXPECT_EQ(t.to_commit(true), std::nullopt);
  EXPECT_EQ(t.to_commit(false), std::nullopt);
}

TEST(OffsetTracker, OffsetsWithGapsAreContiguousInWhatWasFetched) {
  OffsetTracker t;  // a compacted topic, transaction markers: offsets skip
  for (std::int64_t o : {3, 7, 8, 20}) t.add(o);
  t.done(3);
  EXPECT_EQ(t.to_commit(), 7);
  t.done(8);
  t.done(7);
  EXPECT_EQ(t.to_commit(), 20);
  t.done(20);
  EXPECT_EQ(t.to_commit(), 21);
}

TEST(OffsetTracker, RefusesRepeatedUnknownAndBackwardOffsets) {
  OffsetTracker t;
  EXPECT_FALSE(t.add(-1));
  EXPECT_TRUE(t.add(5));
  EXPECT_FALSE(t.add(5));  // seen already
  EXPECT_FALSE(t.add(4));  // below the highest
  EXPECT_TRUE(t.add(6));
  EXPECT_FALSE(t.done(4));  // never added
  EXPECT_FALSE(t.done(7));
  EXPECT_TRUE(t.done(6));
  EXPECT_FALSE(t.done(6));  // decided already
  EXPECT_TRUE(t.done(5));
  EXPECT_FALSE(t.done(5));  // below the prefix now
  EXPECT_EQ(t.undecided(), 0u);
  EXPECT_EQ(t.to_commit(), 7);
}

TEST(OffsetTracker, AHeldOffsetStopsThePrefixForGood) {
  OffsetTracker t;
  for (std::int64_t o = 0; o < 1000; ++o) t.add(o);
  for (std::int64_t o = 0; o < 1000; ++o)
    if (o != 400) t.done(o);  // 400 held: never decided
  EXPECT_EQ(t.to_commit(), 400);
  EXPECT_EQ(t.undecided(), 1u);
}

// Against a model: random interleavings of fetches and out-of-order decisions; the
// committed offset never passes an undecided one and never goes back.
TEST(OffsetTracker, MatchesAModelUnderRandomOrder) {
  std::mt19937 rng(15);
  for (int round = 0; round < 200; ++round) {
    OffsetTracker t;
    std::vector<std::int64_t> fetched, open;
    std::int64_t next = rng() % 100, last_commit = -1;
    for (int step = 0; step < 300; ++step) {
      if (rng() % 2 == 0) {
        next += 1 + (rng() % 4 == 0 ? rng() % 5 : 0);
        ASSERT_TRUE(t.add(next));
        fetched.push_back(next);
        open.push_back(next);
      } else if (!open.empty()) {
        const std::size_t i = rng() % open.size();
        ASSERT_TRUE(t.done(open[i]));
        open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
      }
      if (auto c = t.to_commit()) {
        const std::int64_t want = open.empty() ? fetched.back() + 1 : *std::min_element(open.begin(), open.end());
        ASSERT_EQ(*c, want);
        ASSERT_GT(*c, last_commit);
        if (rng() % 3 == 0) {
          t.committed(*c);
          last_commit = *c;
        }
      }
      ASSERT_EQ(t.undecided(), open.size());
    }
  }
}

}  // namespace
}  // namespace idem::kafka::detail

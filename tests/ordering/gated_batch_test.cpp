// process_batch behind the ordering gates: messages that apply in order share one batch
// claim and one batch commit (their entity writes chained per key), everything else
// takes the single-message path, and the decisions are those of process() one message
// at a time. On every store of this build.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "idem/consumer.hpp"
#include "idem/open_store.hpp"
#include "ordering/hooked_store.hpp"
#include "ordering/one_key.hpp"
#include "support/entity_messages.hpp"
#include "support/store_uri.hpp"
#include "support/temp_dir.hpp"

namespace idem {
inline void PrintTo(const Decision& d, std::ostream* os) {
  *os << action_name(d.action) << "/" << reason_name(d.reason);
  if (!d.detail.empty()) *os << " (" << d.detail << ")";
}
}  // namespace idem

namespace idem::test {
namespace {

using ordering_test::HookedStore;

class GatedBatch : public ::testing::TestWithParam<const char*> {
 protected:
  std::shared_ptr<Store> open(const std::string& name) {
    const std::string scheme = GetParam();
    auto s = open_store(test_support::store_uri(scheme, dir_.sub(name)));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return std::move(s).value();
  }
  Consumer<EntityMsg> make(std::shared_ptr<Store> store, Journal& j, Ordering mode = Ordering::kStrict,
                           BufferLimits limits = {}) {
    ConsumerOptions o;
    o.store = std::move(store);
    o.clock = clock_;
    o.ordering.mode = mode;
    o.ordering.limits = limits;
    auto c = entity_consumer(std::move(o), j);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return std::move(c).value();
  }
  // The versions the handler ran, per key, in the order it ran them.
  static std::map<std::string, std::vector<std::uint64_t>> per_key(const Journal& j) {
    std::map<std::string, std::vector<std::uint64_t>> out;
    for (const auto& r : j.runs()) out[r.key].push_back(r.version);
    return out;
  }
  static std::vector<std::uint64_t> one_to(std::uint64_t n) {
    std::vector<std::uint64_t> v;
    for (std::uint64_t i = 1; i <= n; ++i) v.push_back(i);
    return v;
  }

  testing::TempDir dir_{"gated-batch"};
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(from_unix_ms(1'000'000));
};

std::vector<EntityMsg> interleaved(int keys, std::uint64_t versions) {
  std::vector<EntityMsg> out;
  for (std::uint64_t v = 1; v <= versions; ++v)
    for (int k = 0; k < keys; ++k) {
      const std::string key = "k" + std::to_string(k);
      out.push_back(versioned(key + "-v" + std::to_string(v), key, v));
    }
  return out;
}

TEST_P(GatedBatch, InOrderBatchIsOneBatchClaimAndOneBatchCommit) {
  auto hooked = std::make_shared<HookedStore>(open("store"));
  Journal j;
  auto c = make(hooked, j);
  const auto msgs = interleaved(3, 4);
  const auto ds = c.process_batch(msgs);
  ASSERT_EQ(ds.size(), msgs.size());
  for (const Decision& d : ds) EXPECT_EQ(d.reason, Reason::kProcessed) << ::testing::PrintToString(d);
  EXPECT_EQ(hooked->counts.claim_batch, 1);
  EXPECT_EQ(hooked->counts.commit_batch, 1);
  EXPECT_EQ(hooked->counts.claim, 0);
  EXPECT_EQ(hooked->counts.commit, 0);
  for (const auto& [key, versions] : per_key(j)) EXPECT_EQ(versions, one_to(4)) << key;
  for (int k = 0; k < 3; ++k) {
    auto e = hooked->entities()->read_entity("k" + std::to_string(k));
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->version, 4u);
    EXPECT_EQ(e->revision, 4u);
  }
}

// Random permutations of each key's versions, no duplicates: the batch path gives every
// message the decision process() gives it, except that a version whose predecessor
// comes later in the same batch is processed there rather than buffered; the handler
// sees each key in order.
TEST_P(GatedBatch, SameDecisionsAsOneAtATime) {
  std::mt19937_64 rng(20261130);
  std::vector<std::vector<std::uint64_t>> perms(6);
  std::vector<int> slots;
  for (int k = 0; k < 6; ++k) {
    for (std::uint64_t v = 1; v <= 9; ++v) {
      perms[k].push_back(v);
      slots.push_back(k);
    }
    // Nearly in order: swap a few neighbours, so that batches mix both paths.
    for (int s = 0; s < 3; ++s) {
      const auto i = std::uniform_int_distribution<std::size_t>(0, 7)(rng);
      std::swap(perms[k][i], perms[k][i + 1]);
    }
    std::reverse(perms[k].begin(), perms[k].end());
  }
  std::shuffle(slots.begin(), slots.end(), rng);
  std::vector<EntityMsg> stream;
  for (int k : slots) {
    const std::string key = "k" + std::to_string(k);
    const std::uint64_t v = perms[k].back();
    perms[k].pop_back();
    stream.push_back(versioned(key + "-v" + std::to_string(v), key, v));
  }

  Journal one_j, batch_j;
  auto one = make(open("one"), one_j);
  auto hooked = std::make_shared<HookedStore>(open("batch"));
  auto batched = make(hooked, batch_j);
  std::vector<Decision> want, got;
  for (const auto& m : stream) want.push_back(one.process(m));
  for (std::size_t at = 0; at < stream.size(); at += 16) {
    const std::size_t n = std::min<std::size_t>(16, stream.size() - at);
    auto ds = batched.process_batch(std::span<const EntityMsg>(stream).subspan(at, n));
    got.insert(got.end(), ds.begin(), ds.end());
  }
  ASSERT_EQ(got.size(), want.size());
  int buffered = 0, reordered = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    buffered += want[i].reason == Reason::kBuffered;
    if (want[i].reason == Reason::kBuffered && got[i].reason == Reason::kProcessed) {
      ++reordered;
      continue;
    }
    EXPECT_EQ(got[i].action, want[i].action) << stream[i].id << ": " << ::testing::PrintToString(got[i]);
    EXPECT_EQ(got[i].reason, want[i].reason) << stream[i].id << ": " << ::testing::PrintToString(got[i]);
  }
  EXPECT_GT(buffered, reordered) << "the stream should buffer some versions across batches";
  EXPECT_GT(reordered, 0) << "the stream should have early versions within a batch";
  EXPECT_EQ(per_key(batch_j), per_key(one_j));
  for (const auto& [key, versions] : per_key(batch_j)) EXPECT_EQ(versions, one_to(9)) << key;
  EXPECT_EQ(batch_j.outcomes().size() + reordered, one_j.outcomes().size());
  EXPECT_LT(hooked->counts.commit, static_cast<int>(stream.size()) / 2) << "most commits should be batched";
}

// Versions of one key that arrive out of order within one batch run in order at once;
// only the one whose predecessor is not in the batch waits in the reorder buffer.
TEST_P(GatedBatch, EarlyVersionsWithinABatchRunInOrderWithoutTheBuffer) {
  auto store = open("store");
  Journal j;
  auto c = make(store, j);
  const auto ds =
      c.process_batch(std::vector<EntityMsg>{versioned("a3", "a", 3), versioned("b2", "b", 2), versioned("a1", "a", 1),
                                             versioned("a2", "a", 2), versioned("a5", "a", 5)});
  EXPECT_EQ(ds[0].reason, Reason::kProcessed) << ::testing::PrintToString(ds[0]);
  EXPECT_EQ(ds[1].reason, Reason::kBuffered) << ::testing::PrintToString(ds[1]);
  EXPECT_EQ(ds[2].reason, Reason::kProcessed) << ::testing::PrintToString(ds[2]);
  EXPECT_EQ(ds[3].reason, Reason::kProcessed) << ::testing::PrintToString(ds[3]);
  EXPECT_EQ(ds[4].reason, Reason::kBuffered) << ::testing::PrintToString(ds[4]);
  EXPECT_EQ(per_key(j)["a"], one_to(3));
  auto summary = store->entities()->buffer_summary(10);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->count, 2u) << "b2 and a5 wait; a3 never entered the buffer";
  EXPECT_TRUE(j.outcomes().empty());
}

// An early version behind a key's pending writes waits in the buffer without landing
// them first; but when the buffer already holds the version those writes lead to, they
// land and the buffer drains before the early one is decided, as one at a time.
TEST_P(GatedBatch, EarlyVersionsBehindPendingWrites) {
  auto hooked = std::make_shared<HookedStore>(open("store"));
  Journal j;
  auto c = make(hooked, j);
  auto ds = c.process_batch(
      std::vector<EntityMsg>{versioned("a1", "a", 1), versioned("a2", "a", 2), versioned("a5", "a", 5)});
  EXPECT_EQ(ds[0].reason, Reason::kProcessed) << ::testing::PrintToString(ds[0]);
  EXPECT_EQ(ds[1].reason, Reason::kProcessed) << ::testing::PrintToString(ds[1]);
  EXPECT_EQ(ds[2].reason, Reason::kBuffered) << ::testing::PrintToString(ds[2]);
  EXPECT_EQ(hooked->counts.commit_batch, 1) << "a5 did not split the batch commit";
  EXPECT_EQ(hooked->counts.commit, 0);

  // a4 now buffered alone; then a batch with a3 and a6: a3 applies and drains a4, a5,
  // and a6 runs after them.
  ds = c.process_batch(std::vector<EntityMsg>{versioned("a4", "a", 4)});
  EXPECT_EQ(ds[0].reason, Reason::kBuffered) << ::testing::PrintToString(ds[0]);
  ds = c.process_batch(std::vector<EntityMsg>{versioned("a3", "a", 3), versioned("a6", "a", 6)});
  EXPECT_EQ(ds[0].reason, Reason::kProcessed) << ::testing::PrintToString(ds[0]);
  EXPECT_EQ(ds[1].reason, Reason::kProcessed) << ::testing::PrintToString(ds[1]);
  EXPECT_EQ(j.versions(), one_to(6));
  ASSERT_EQ(j.outcomes().size(), 2u);
  EXPECT_EQ(hooked->entities()->read_entity("a").value().version, 6u);
}

// A batch's early versions go into the buffer with one buffer_put_batch; each gets the
// decision a put of its own would give it (a limit that the earlier puts of the same
// batch reached: retry / buffer_full). The next batch runs the buffered ones in order.
TEST_P(GatedBatch, EarlyVersionsArePutTogether) {
  auto hooked = std::make_shared<HookedStore>(open("store"));
  Journal j;
  auto c = make(hooked, j, Ordering::kStrict, BufferLimits{.per_key = 2, .total = 100, .total_bytes = 1 << 20});
  auto ds =
      c.process_batch(std::vector<EntityMsg>{versioned("a1", "a", 1), versioned("a3", "a", 3), versioned("b2", "b", 2),
                                             versioned("a5", "a", 5), versioned("a6", "a", 6)});
  EXPECT_EQ(ds[0].reason, Reason::kProcessed) << ::testing::PrintToString(ds[0]);
  EXPECT_EQ(ds[1].reason, Reason::kBuffered) << ::testing::PrintToString(ds[1]);
  EXPECT_EQ(ds[2].reason, Reason::kBuffered) << ::testing::PrintToString(ds[2]);
  EXPECT_EQ(ds[3].reason, Reason::kBuffered) << ::testing::PrintToString(ds[3]);
  EXPECT_EQ(ds[4].action, Action::kRetry) << ::testing::PrintToString(ds[4]);
  EXPECT_EQ(ds[4].reason, Reason::kBufferFull) << ::testing::PrintToString(ds[4]);
  EXPECT_EQ(hooked->counts.buffer_put_batch, 1);
  EXPECT_EQ(hooked->counts.commit_batch, 1);
  EXPECT_EQ(hooked->counts.commit, 0);
  EXPECT_EQ(hooked->entities()->buffer_summary(10).value().count, 3u) << "a3, a5, b2";

  hooked->counts = {};
  ds = c.process_batch(
      std::vector<EntityMsg>{versioned("a6", "a", 6), versioned("a4", "a", 4), versioned("a2", "a", 2)});
  for (const Decision& d : ds) EXPECT_EQ(d.reason, Reason::kProcessed) << ::testing::PrintToString(d);
  EXPECT_EQ(per_key(j)["a"], one_to(6));
  EXPECT_EQ(hooked->counts.commit_batch, 1) << "a2, a3, a4, a5, a6 in one batch commit";
  EXPECT_EQ(hooked->counts.commit, 0);
  ASSERT_EQ(j.outcomes().size(), 2u);
  for (const BufferedOutcome& o : j.outcomes()) EXPECT_EQ(o.decision.reason, Reason::kProcessed) << o.id;
  EXPECT_EQ(hooked->entities()->buffer_summary(10).value().count, 1u) << "b2 waits for b1";
}

// Buffered successors that a batch's writes make next run inside that batch: their
// commits (each removing its entry) join the batch commit, chained on the key's
// writes, and a later version of the key in the batch runs after them.
TEST_P(GatedBatch, BufferedSuccessorsRunInsideTheBatch) {
  auto hooked = std::make_shared<HookedStore>(open("store"));
  Journal j;
  auto c = make(hooked, j);
  auto ds = c.process_batch(
      std::vector<EntityMsg>{versioned("a1", "a", 1), versioned("a3", "a", 3), versioned("a4", "a", 4)});
  EXPECT_EQ(ds[1].reason, Reason::kBuffered) << ::testing::PrintToString(ds[1]);
  EXPECT_EQ(ds[2].reason, Reason::kBuffered) << ::testing::PrintToString(ds[2]);
  hooked->counts = {};
  ds = c.process_batch(std::vector<EntityMsg>{versioned("a5", "a", 5), versioned("a2", "a", 2)});
  EXPECT_EQ(ds[0].reason, Reason::kProcessed) << ::testing::PrintToString(ds[0]);
  EXPECT_EQ(ds[1].reason, Reason::kProcessed) << ::testing::PrintToString(ds[1]);
  EXPECT_EQ(j.versions(), one_to(5));
  EXPECT_EQ(hooked->counts.commit_batch, 1) << "a2, a3, a4, a5 in one batch commit";
  EXPECT_EQ(hooked->counts.commit, 0);
  EXPECT_EQ(hooked->counts.claim, 0);
  ASSERT_EQ(j.outcomes().size(), 2u);
  for (const BufferedOutcome& o : j.outcomes()) EXPECT_EQ(o.decision.reason, Reason::kProcessed) << o.id;
  auto e = hooked->entities()->read_entity("a");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->version, 5u);
  EXPECT_EQ(e->revision, 5u);
  EXPECT_EQ(hooked->entities()->buffer_summary(10).value().count, 0u);
}

// A buffered version delivered again ahead of its predecessor in a batch: answered as
// process() would answer it, a duplicate of the buffered copy; the predecessor's run
// then drains the buffered copy under the batch's claim, in the same batch commit.
TEST_P(GatedBatch, ARedeliveredBufferedVersionIsAnsweredAsItsBufferedCopy) {
  auto hooked = std::make_shared<HookedStore>(open("store"));
  Journal j;
  auto c = make(hooked, j);
  auto ds = c.process_batch(std::vector<EntityMsg>{versioned("a1", "a", 1), versioned("a3", "a", 3)});
  EXPECT_EQ(ds[1].reason, Reason::kBuffered) << ::testing::PrintToString(ds[1]);
  hooked->counts = {};
  ds = c.process_batch(std::vector<EntityMsg>{versioned("a3", "a", 3), versioned("a2", "a", 2)});
  EXPECT_EQ(ds[0].reason, Reason::kDuplicate) << ::testing::PrintToString(ds[0]);
  EXPECT_EQ(ds[1].reason, Reason::kProcessed) << ::testing::PrintToString(ds[1]);
  EXPECT_EQ(j.versions(), one_to(3));
  EXPECT_EQ(hooked->counts.commit_batch, 1);
  ASSERT_EQ(j.outcomes().size(), 1u);
  EXPECT_EQ(j.outcomes()[0].id, "a3");
  EXPECT_EQ(j.outcomes()[0].decision.reason, Reason::kProcessed);
  EXPECT_EQ(hooked->entities()->buffer_summary(10).value().count, 0u);
  EXPECT_EQ(hooked->entities()->read_entity("a").value().version, 3u);
}

// Another consumer moves k0's entity between the batch's claim and its commit: k0's
// chain stops at its first write (retry / concurrent_update for both of its messages,
// nothing of them committed), the other key lands.
TEST_P(GatedBatch, AChainStopsAtAConcurrentWrite) {
  auto store = open("store");
  auto hooked = std::make_shared<HookedStore>(store);
  Journal j;
  auto c = make(hooked, j, Ordering::kMonotonic);
  bool fired = false;
  hooked->before_commit_batch = [&](std::span<const CommitRequest>) {
    if (fired) return;
    fired = true;
    EXPECT_TRUE(store->entities()->write_entity({"k0", 0, 5, std::nullopt, std::nullopt}).ok());
  };
  const std::vector<EntityMsg> msgs = {versioned("a", "k0", 6), versioned("b", "k1", 1), versioned("c", "k0", 7)};
  const auto ds = c.process_batch(msgs);
  ASSERT_TRUE(fired);
  EXPECT_EQ(ds[0].reason, Reason::kConcurrentUpdate) << ::testing::PrintToString(ds[0]);
  EXPECT_EQ(ds[0].action, Action::kRetry);
  EXPECT_EQ(ds[1].reason, Reason::kProcessed) << ::testing::PrintToString(ds[1]);
  EXPECT_EQ(ds[2].reason, Reason::kConcurrentUpdate) << ::testing::PrintToString(ds[2]);
  auto e = store->entities()->read_entity("k0");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->version, 5u);
  EXPECT_EQ(e->revision, 1u);
  // Redelivered, both run against what the other consumer left.
  const auto again = c.process_batch(std::vector<EntityMsg>{msgs[0], msgs[2]});
  EXPECT_EQ(again[0].reason, Reason::kProcessed) << ::testing::PrintToString(again[0]);
  EXPECT_EQ(again[1].reason, Reason::kProcessed) << ::testing::PrintToString(again[1]);
  EXPECT_EQ(store->entities()->read_entity("k0").value().version, 7u);
}

// A handler failure in the middle of a key's chain: the versions before it land, the
// failed one is retried, its successor waits in the buffer and drains behind it.
TEST_P(GatedBatch, AFailureInTheMiddleOfAChain) {
  Journal j;
  auto c = make(open("store"), j);
  j.fail("k0-v2", true);
  const auto msgs = interleaved(1, 3);
  const auto ds = c.process_batch(msgs);
  EXPECT_EQ(ds[0].reason, Reason::kProcessed) << ::testing::PrintToString(ds[0]);
  EXPECT_EQ(ds[1].action, Action::kRetry) << ::testing::PrintToString(ds[1]);
  EXPECT_EQ(ds[1].reason, Reason::kHandlerFailed);
  EXPECT_EQ(ds[2].reason, Reason::kBuffered) << ::testing::PrintToString(ds[2]);
  j.fail("k0-v2", false);
  clock_->advance(ds[1].delay);
  const auto again = c.process_batch(std::vector<EntityMsg>{msgs[1]});
  EXPECT_EQ(again[0].reason, Reason::kProcessed) << ::testing::PrintToString(again[0]);
  EXPECT_EQ(j.versions(), one_to(3));
  ASSERT_EQ(j.outcomes().size(), 1u);
  EXPECT_EQ(j.outcomes()[0].decision.reason, Reason::kProcessed);
}

// Handlers that take more than a tenth of the lease: each later message of the batch
// renews its lease before its handler runs, and the order still holds.
TEST_P(GatedBatch, SlowHandlersRenewTheLease) {
  ConsumerOptions o;
  o.store = open("store");
  o.clock = clock_;
  o.ordering.mode = Ordering::kStrict;
  o.lease = Duration(10'000);
  o.on_buffered = [](const BufferedOutcome&) {};
  std::vector<std::uint64_t> seen;
  std::vector<TimePoint> lease_until;
  auto c = Consumer<EntityMsg>::create(std::move(o), entity_extractors(), [&](const EntityMsg& m, HandlerContext& ctx) {
    seen.push_back(*m.version);
    lease_until.push_back(ctx.lease_expires_at());
    clock_->advance(Duration(2'000));
    return HandlerResult::ok();
  });
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const TimePoint t0 = clock_->now();
  const auto ds = c->process_batch(interleaved(1, 4));
  for (const Decision& d : ds) EXPECT_EQ(d.reason, Reason::kProcessed) << ::testing::PrintToString(d);
  EXPECT_EQ(seen, one_to(4));
  ASSERT_EQ(lease_until.size(), 4u);
  EXPECT_EQ(lease_until[0], t0 + Duration(10'000));
  for (std::size_t i = 1; i < 4; ++i)
    EXPECT_EQ(lease_until[i], t0 + Duration(2'000 * static_cast<std::int64_t>(i)) + Duration(10'000)) << i;
}

INSTANTIATE_TEST_SUITE_P(Stores, GatedBatch, ::testing::ValuesIn(ordering_test::kStores),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace idem::test

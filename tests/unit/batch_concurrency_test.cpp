// process_batch decides as sequential process() does; many threads through one
// consumer run each id's handler exactly once.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "unit/consumer_test_support.hpp"

namespace idem::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A handler whose behaviour depends only on the message id's number and the attempt:
// some ids fail a few times, some ask for a later retry, some return results.
HandlerResult scripted(const Msg& m, HandlerContext& ctx) {
  const int n = std::stoi(m.id->substr(3));
  if (n % 5 == 0 && ctx.attempt() <= static_cast<std::uint32_t>(n % 3 + 1)) return HandlerResult::fail("fail-" + *m.id);
  if (n % 7 == 0 && ctx.attempt() == 1) return HandlerResult::retry_after(seconds(3), "later");
  if (n % 11 == 0) throw std::runtime_error("always throws");
  if (n % 2 == 0) return HandlerResult::ok("result-" + *m.id);
  return HandlerResult::ok();
}

std::vector<Msg> random_mix(unsigned seed, int count) {
  std::mt19937 rng(seed);
  std::vector<Msg> out;
  for (int i = 0; i < count; ++i) {
    const int kind = static_cast<int>(rng() % 20);
    if (kind == 0) {
      out.push_back(Msg{});  // no id
      continue;
    }
    if (kind == 1) {
      out.push_back(msg(""));
      continue;
    }
    Msg m = msg("id-" + std::to_string(rng() % 40));
    if (kind < 15)
      m.payload = "p";  // the usual payload
    else if (kind < 17)
      m.payload = "conflicting";  // same id, different payload
    // else: no payload
    out.push_back(std::move(m));
  }
  return out;
}

std::string describe(const Decision& d) { return ::testing::PrintToString(d); }

class BatchTest : public ConsumerTest, public ::testing::WithParamInterface<unsigned> {};

TEST_P(BatchTest, BatchDecidesAsSequentialProcess) {
  const std::vector<Msg> mix = random_mix(GetParam(), 400);

  // Two consumers, two stores, two clocks moving in step.
  auto seq_clock = std::make_shared<ManualClock>(clock_->now());
  auto seq_store = memory::open().value();
  ConsumerOptions so = options();
  so.clock = seq_clock;
  so.store = seq_store;
  so.max_retries = 3;
  ConsumerOptions bo = options();
  bo.max_retries = 3;
  std::map<std::string, int> seq_calls, batch_calls;
  auto seq = make(so, [&](const Msg& m, HandlerContext& ctx) {
    ++seq_calls[*m.id];
    return scripted(m, ctx);
  });
  auto batch = make(bo, [&](const Msg& m, HandlerContext& ctx) {
    ++batch_calls[*m.id];
    return scripted(m, ctx);
  });

  std::size_t pos = 0;
  std::mt19937 rng(GetParam() + 1);
  while (pos < mix.size()) {
    const std::size_t n = std::min<std::size_t>(1 + rng() % 30, mix.size() - pos);
    const std::span<const Msg> chunk(mix.data() + pos, n);
    std::vector<Decision> got = batch.process_batch(chunk);
    ASSERT_EQ(got.size(), n);
    for (std::size_t k = 0; k < n; ++k) {
      const Decision want = seq.process(chunk[k]);
      SCOPED_TRACE("message " + std::to_string(pos + k) + " id " + chunk[k].id.value_or("<none>"));
      EXPECT_EQ(got[k].action, want.action) << describe(got[k]) << " vs sequential " << describe(want);
      EXPECT_EQ(got[k].reason, want.reason) << describe(got[k]) << " vs sequential " << describe(want);
      EXPECT_EQ(got[k].delay, want.delay) << describe(got[k]) << " vs sequential " << describe(want);
      EXPECT_EQ(got[k].result, want.result) << describe(got[k]) << " vs sequential " << describe(want);
    }
    pos += n;
    clock_->advance(seconds(2));
    seq_clock->advance(seconds(2));
  }
  EXPECT_EQ(batch_calls, seq_calls);
  EXPECT_EQ(batch.metrics().snapshot().decisions, seq.metrics().snapshot().decisions);
}

INSTANTIATE_TEST_SUITE_P(Seeds, BatchTest, ::testing::Values(1u, 2u, 3u, 42u, 1234u));

TEST_F(ConsumerTest, BatchRepeatOfAFailedFirstCopyRunsAgainLikeSequential) {
  int calls = 0;
  auto c = make(options(), [&](const Msg&, HandlerContext&) {
    ++calls;
    return calls == 1 ? HandlerResult::fail("first time") : HandlerResult::ok("second time");
  });
  const std::vector<Msg> ms = {msg("m1"), msg("m1"), msg("m1")};
  std::vector<Decision> d = c.process_batch(ms);
  EXPECT_DECISION(d[0], Action::kRetry, Reason::kHandlerFailed);
  EXPECT_EQ(d[0].delay, seconds(1));
  EXPECT_DECISION(d[1], Action::kAck, Reason::kProcessed);
  EXPECT_EQ(d[1].result, std::optional<std::string>("second time"));
  EXPECT_DECISION(d[2], Action::kAck, Reason::kDuplicate);
  EXPECT_EQ(d[2].result, std::optional<std::string>("second time"));
  EXPECT_EQ(calls, 2);
}

TEST_F(ConsumerTest, BatchLeaseStartsWhenEachHandlerStarts) {
  ConsumerOptions o = options();
  o.lease = seconds(30);
  Consumer<Msg>* self = nullptr;
  std::map<std::string, int> calls;
  std::map<std::string, TimePoint> lease_end;
  std::optional<Decision> inner;
  auto c = make(o, [&](const Msg& m, HandlerContext& ctx) {
    ++calls[*m.id];
    lease_end[*m.id] = ctx.lease_expires_at();
    clock_->advance(seconds(20));                // each handler takes 20 s
    if (*m.id == "b") inner = self->process(m);  // a redelivery while b runs
    return HandlerResult::ok();
  });
  self = &c;
  const TimePoint t0 = clock_->now();
  const std::vector<Msg> ms = {msg("a"), msg("b"), msg("c")};
  std::vector<Decision> d = c.process_batch(ms);
  for (const Decision& x : d) EXPECT_DECISION(x, Action::kAck, Reason::kProcessed);
  EXPECT_EQ(calls, (std::map<std::string, int>{{"a", 1}, {"b", 1}, {"c", 1}}));
  EXPECT_EQ(lease_end["a"], t0 + seconds(30));
  EXPECT_EQ(lease_end["b"], t0 + seconds(50)) << "b's handler started at +20 s";
  EXPECT_EQ(lease_end["c"], t0 + seconds(70)) << "c's handler started at +40 s";
  ASSERT_TRUE(inner.has_value());
  EXPECT_DECISION(*inner, Action::kRetry, Reason::kInProgress);
  EXPECT_EQ(inner->delay, seconds(10));
}

TEST_F(ConsumerTest, BatchUnderEveryGuaranteeKeepsInputOrderAndDedups) {
  for (Guarantee g : {Guarantee::kAtMostOnce, Guarantee::kManual, Guarantee::kAtLeastOnce}) {
    std::vector<std::string> order;
    store_ = memory::open().value();
    auto c = make(options(g), [&](const Msg& m, HandlerContext& ctx) {
      order.push_back(*m.id);
      ctx.ack();
      return HandlerResult::ok();
    });
    const std::vector<Msg> ms = {msg("a"), msg("b"), msg("a"), msg("c")};
    std::vector<Decision> d = c.process_batch(ms);
    ASSERT_EQ(d.size(), 4u);
    EXPECT_DECISION(d[0], Action::kAck, Reason::kProcessed);
    EXPECT_DECISION(d[1], Action::kAck, Reason::kProcessed);
    EXPECT_DECISION(d[2], Action::kAck, g == Guarantee::kAtLeastOnce ? Reason::kProcessed : Reason::kDuplicate);
    EXPECT_DECISION(d[3], Action::kAck, Reason::kProcessed);
    EXPECT_EQ(order.front(), "a");
    EXPECT_EQ(order.back(), "c");
  }
}

TEST_F(ConsumerTest, ConcurrentDuplicatesRunEachHandlerExactlyOnce) {
  constexpr int kThreads = 4;
  constexpr int kIds = 500;
  constexpr int kCopies = 3;  // per thread
  std::vector<std::atomic<int>> runs(kIds);
  auto c = make(options(), [&](const Msg& m, HandlerContext&) {
    runs[std::stoi(*m.id)].fetch_add(1);
    return HandlerResult::ok(*m.id);
  });
  std::atomic<int> processed{0}, duplicates{0}, in_progress{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<Msg> mine;
      for (int i = 0; i < kIds; ++i)
        for (int k = 0; k < kCopies; ++k) mine.push_back(msg(std::to_string(i)));
      std::shuffle(mine.begin(), mine.end(), std::mt19937(t));
      for (std::size_t j = 0; j < mine.size(); ++j) {
        Decision d;
        if (j % 4 == 0 && j + 3 < mine.size()) {
          for (const Decision& x : c.process_batch(std::span<const Msg>(mine.data() + j, 3))) {
            if (x.reason == Reason::kProcessed)
              ++processed;
            else if (x.reason == Reason::kDuplicate)
              ++duplicates;
            else if (x.reason == Reason::kInProgress)
              ++in_progress;
            else
              ++other;
          }
          j += 2;
          continue;
        }
        d = c.process(mine[j]);
        if (d.reason == Reason::kProcessed)
          ++processed;
        else if (d.reason == Reason::kDuplicate)
          ++duplicates;
        else if (d.reason == Reason::kInProgress)
          ++in_progress;
        else
          ++other;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < kIds; ++i) EXPECT_EQ(runs[i].load(), 1) << "id " << i;
  EXPECT_EQ(processed.load(), kIds);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(processed + duplicates + in_progress, kThreads * kIds * kCopies);
}

}  // namespace
}  // namespace idem::test

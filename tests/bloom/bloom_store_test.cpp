// The standalone Bloom store: windowed generations, fixed memory, exact leases and
// retry counts, the consumer's opt-in, and the measured false-positive rate.
#include "idem/bloom_store.hpp"
#include "stats_of.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "idem/backend/store_wrapper.hpp"
#include "idem/idem.hpp"
#include "idem/open_store.hpp"

namespace idem {
namespace {

using std::chrono::milliseconds;

const TimePoint kT0 = from_unix_ms(1'700'000'000'000);
constexpr Duration kLease{10'000};
constexpr Duration kTtl{3'600'000};

std::shared_ptr<Store> open_ok(const bloom::Options& o) {
  auto s = bloom::open(o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : nullptr;
}

ClaimStatus claim_status(Store& s, std::string_view id, TimePoint now, std::string_view owner = "A") {
  auto c = s.claim({id, owner, kLease, std::nullopt, now});
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? c->status : ClaimStatus::kConflict;
}

Status commit(Store& s, std::string_view id, TimePoint now, std::string_view owner = "A") {
  return s.commit({id, owner, std::nullopt, now, kTtl, std::nullopt});
}

TEST(BloomStore, RemembersMembershipWithExactLeasesAndRetries) {
  auto store = open_ok({.capacity = 10'000, .fp = 0.001, .window = milliseconds(60'000)});
  ASSERT_NE(store, nullptr);
  const StoreCapabilities caps = store->capabilities();
  EXPECT_TRUE(caps.probabilistic);
  EXPECT_EQ(caps.false_positive_rate, 0.001) << "the risk is stated in the capabilities";
  EXPECT_FALSE(caps.durable);
  EXPECT_FALSE(caps.transactional);
  EXPECT_TRUE(caps.native_ttl);

  EXPECT_EQ(claim_status(*store, "m", kT0), ClaimStatus::kNew);
  auto other = store->claim({"m", "B", kLease, 7, kT0 + milliseconds(1)});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, ClaimStatus::kInProgress);
  EXPECT_EQ(other->owner, "A");
  EXPECT_EQ(store->commit({"m", "B", std::nullopt, kT0, kTtl, std::nullopt}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->release({"m", "A", true, kT0, kTtl}).value(), 1u);
  auto again = store->claim({"m", "B", kLease, std::nullopt, kT0 + milliseconds(2)});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, ClaimStatus::kNew);
  EXPECT_EQ(again->retries, 1u) << "retry counts are exact";
  ASSERT_TRUE(commit(*store, "m", kT0 + milliseconds(3), "B").ok());
  auto dup = store->claim({"m", "C", kLease, std::nullopt, kT0 + milliseconds(4)});
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(dup->status, ClaimStatus::kCompleted);
  EXPECT_FALSE(dup->result.has_value()) << "membership only: no stored result";
  EXPECT_EQ(commit(*store, "m", kT0 + milliseconds(5)).code(), StatusCode::kFailedPrecondition);
  auto info = store->inspect("m", kT0 + milliseconds(5));
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->state, RecordState::kCompleted);
  EXPECT_EQ((*info)->retries, 0u);
}

TEST(BloomStore, RemembersForTheWindowThenForgetsWholeGenerations) {
  // window 4 s in 4 generations: slices of 1 s.
  auto store = open_ok({.capacity = 10'000, .fp = 0.001, .window = milliseconds(4000), .generations = 4});
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(commit(*store, "a", kT0).ok());
  ASSERT_TRUE(commit(*store, "b", kT0 + milliseconds(900)).ok());   // same slice as a
  ASSERT_TRUE(commit(*store, "c", kT0 + milliseconds(1000)).ok());  // next slice
  EXPECT_EQ(claim_status(*store, "a", kT0 + milliseconds(3999)), ClaimStatus::kCompleted);
  // The slice's newest id (b) is younger than the window: a is still remembered.
  EXPECT_EQ(claim_status(*store, "a", kT0 + milliseconds(4800)), ClaimStatus::kCompleted);
  EXPECT_EQ(claim_status(*store, "a", kT0 + milliseconds(4901)), ClaimStatus::kNew);
  EXPECT_EQ(claim_status(*store, "b", kT0 + milliseconds(4901)), ClaimStatus::kNew);
  EXPECT_EQ(claim_status(*store, "c", kT0 + milliseconds(4901)), ClaimStatus::kCompleted);
  EXPECT_EQ(claim_status(*store, "c", kT0 + milliseconds(5001), "B"), ClaimStatus::kNew);
}

TEST(BloomStore, MemoryIsFixedAndTheLatestCapacityIdsAreRemembered) {
  const bloom::Options o{.capacity = 20'000, .fp = 0.01, .window = milliseconds(3'600'000), .generations = 4};
  auto store = open_ok(o);
  ASSERT_NE(store, nullptr);
  std::size_t max_bytes = 0;
  std::vector<std::string> committed;
  // Three windows' worth of ids in one instant, claimed then committed as the
  // middleware does: filters close when full.
  for (int i = 0; i < 60'000; ++i) {
    const std::string id = "id-" + std::to_string(i);
    if (claim_status(*store, id, kT0) != ClaimStatus::kNew) continue;  // a false positive
    ASSERT_TRUE(commit(*store, id, kT0).ok());
    committed.push_back(id);
    if (i % 1000 == 0) max_bytes = std::max(max_bytes, bloom_test::stats_of(*store)->filter_bytes);
  }
  auto st = bloom_test::stats_of(*store);
  ASSERT_TRUE(st.ok());
  EXPECT_LE(st->filters, o.generations + 1u);
  EXPECT_GT(st->early_drops, 0u) << "overload shortens the window";
  // Bits per id at capacity, as libbloom sizes them: (N+1)/N filters of -ln(fp/(N+1))/ln2^2.
  EXPECT_NEAR(st->bits_per_id, 5.0 / 4.0 * 12.9, 0.5);
  EXPECT_LE(max_bytes, static_cast<std::size_t>(st->bits_per_id * o.capacity / 8 * 1.05));
  EXPECT_GT(committed.size(), 60'000 * 0.98) << "claims answered as (false-positive) duplicates";
  // No false negatives for the most recent `capacity` committed ids.
  int forgotten = 0;
  for (std::size_t i = committed.size() - 20'000; i < committed.size(); ++i)
    forgotten += claim_status(*store, committed[i], kT0) != ClaimStatus::kCompleted;
  EXPECT_EQ(forgotten, 0);
}

// The measured false-positive rate at the configured capacity, on 1M unseen ids,
// stays within 1.5x of the configured rate: at 1% with the ids in one burst, at 0.1%
// with the ids spread over the window.
TEST(BloomStore, FalsePositiveRateAtCapacityWithinOneAndAHalfTimesConfigured) {
  constexpr int kCapacity = 1'000'000;
  constexpr int kUnseen = 1'000'000;
  const std::pair<double, bool> cases[] = {{0.01, false}, {0.001, true}};  // (fp, spread)
  for (auto [fp, spread] : cases) {
    {
      const bloom::Options o{.capacity = kCapacity, .fp = fp, .window = milliseconds(3'600'000), .generations = 4};
      auto store = open_ok(o);
      ASSERT_NE(store, nullptr);
      const std::int64_t step_us = spread ? 3600 : 0;  // 1M ids over one hour, or all at once
      TimePoint now = kT0;
      for (int i = 0; i < kCapacity; ++i) {
        now = kT0 + std::chrono::microseconds(step_us * i);
        (void)commit(*store, "seen-" + std::to_string(i), now);
      }
      // inspect() answers from the same filters as claim() without taking leases.
      int false_positives = 0;
      for (int i = 0; i < kUnseen; ++i) {
        auto r = store->inspect("unseen-" + std::to_string(i), now);
        ASSERT_TRUE(r.ok());
        false_positives += r->has_value();
      }
      const double rate = static_cast<double>(false_positives) / kUnseen;
      std::printf("bloom fp: configured %.4f, %s, measured %.5f (%d of %d), %.1f bits per id\n", fp,
                  spread ? "spread over the window" : "one burst", rate, false_positives, kUnseen,
                  bloom_test::stats_of(*store)->bits_per_id);
      EXPECT_LE(rate, 1.5 * fp) << "fp=" << fp << " spread=" << spread;
      EXPECT_GT(rate, 0.0) << "a Bloom filter at capacity has some false positives";
    }
  }
}

TEST(BloomStore, ConsumerRefusesItUnderEffectivelyOnceWithoutOptIn) {
  auto store = open_ok({.capacity = 1000});
  ASSERT_NE(store, nullptr);
  struct Msg {
    std::string id;
  };
  Extractors<Msg> ex;
  ex.id = [](const Msg& m) { return std::optional<std::string_view>(m.id); };
  auto handler = [](const Msg&, HandlerContext&) { return HandlerResult::ok(); };
  ConsumerOptions opts;
  opts.store = store;
  auto refused = Consumer<Msg>::create(opts, ex, handler);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("allow_probabilistic_store"), std::string::npos)
      << refused.status().to_string();
  opts.allow_probabilistic_store = true;
  auto accepted = Consumer<Msg>::create(opts, ex, handler);
  ASSERT_TRUE(accepted.ok()) << accepted.status().to_string();
  EXPECT_EQ(accepted->process({"x"}).reason, Reason::kProcessed);
  EXPECT_EQ(accepted->process({"x"}).reason, Reason::kDuplicate);
}

TEST(BloomStore, ConcurrentClaimsHaveExactlyOneWinner) {
  auto store = open_ok({.capacity = 100'000});
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 6, kIds = 3000;
  std::vector<std::atomic<int>> winners(kIds);
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kIds; ++i) {
        const std::string id = "race-" + std::to_string((i + t * 500) % kIds);
        auto c = store->claim({id, "owner-" + std::to_string(t), kLease, std::nullopt, kT0});
        if (c.ok() && c->status == ClaimStatus::kNew) {
          winners[(i + t * 500) % kIds].fetch_add(1);
          (void)store->commit({id, "owner-" + std::to_string(t), std::nullopt, kT0, kTtl, std::nullopt});
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < kIds; ++i) EXPECT_LE(winners[i].load(), 1) << i;
  int total = 0;
  for (auto& w : winners) total += w.load();
  EXPECT_GE(total, kIds - 10) << "only false positives may leave an id without a winner";
}

TEST(BloomStore, UriParameters) {
  auto s = open_store("bloom:?capacity=5000&fp=0.01&window=90m&generations=3");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_TRUE((*s)->capabilities().probabilistic);
  auto st = bloom_test::stats_of(**s);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->filters, 0u);
  ASSERT_TRUE(commit(**s, "x", kT0).ok());
  EXPECT_EQ(bloom_test::stats_of(**s)->filters, 1u);
  // window=90m: remembered at 90 min - 1 ms, forgotten after 90 min.
  EXPECT_EQ(claim_status(**s, "x", kT0 + milliseconds(90 * 60'000 - 1)), ClaimStatus::kCompleted);
  EXPECT_EQ(claim_status(**s, "x", kT0 + milliseconds(90 * 60'000 + 1)), ClaimStatus::kNew);
}

// A memory store that declares the combined commit_then_claim and counts the calls
// that reach it.
class CombinedCounting final : public StoreWrapper {
 public:
  using StoreWrapper::StoreWrapper;
  StoreCapabilities capabilities() const override {
    StoreCapabilities c = StoreWrapper::capabilities();
    c.combined_commit_claim = true;
    return c;
  }
  StatusOr<ClaimResult> claim(const ClaimRequest& q) override {
    ++claims;
    return StoreWrapper::claim(q);
  }
  Status commit(const CommitRequest& q) override {
    ++commits;
    return StoreWrapper::commit(q);
  }
  CommitThenClaimResult commit_then_claim(const CommitRequest& c, const ClaimRequest& q) override {
    ++combined;
    return StoreWrapper::commit_then_claim(c, q);
  }
  int claims = 0, commits = 0, combined = 0;
};

// A front over a store with the combined call forwards commit_then_claim as one call,
// after the filter has learnt the committed id; over any other store it makes the two
// calls through the filter (the claim of a certainly absent id skips the durable read).
TEST(BloomFront, ForwardsCommitThenClaimToACombinedStoreAndLearnsTheId) {
  for (const bool combined : {true, false}) {
    SCOPED_TRACE(combined ? "combined" : "two calls");
    auto memory = open_store("memory:");
    ASSERT_TRUE(memory.ok());
    Store* raw = memory->get();
    std::shared_ptr<Store> durable = *memory;
    CombinedCounting* counting = nullptr;
    if (combined) {
      auto c = std::make_shared<CombinedCounting>(*memory);
      counting = c.get();
      durable = c;
    }
    bloom::DurableHooks hooks;
    hooks.claim_absent = [raw](const ClaimRequest& q) { return raw->claim(q); };
    hooks.for_each_record = [](const std::function<void(std::string_view, TimePoint)>&) { return ok_status(); };
    auto front = bloom::open_front(durable, {.capacity = 10'000, .fp = 0.01}, std::move(hooks));
    ASSERT_TRUE(front.ok()) << front.status().to_string();
    Store& f = **front;
    ASSERT_EQ(claim_status(f, "a", kT0), ClaimStatus::kNew);
    const auto before = *bloom_test::stats_of(f);

    auto both = f.commit_then_claim({"a", "A", std::nullopt, kT0, kTtl, std::nullopt},
                                    {"b", "A", kLease, std::nullopt, kT0, std::nullopt});
    EXPECT_TRUE(both.commit.ok()) << both.commit.to_string();
    ASSERT_TRUE(both.claim.ok());
    EXPECT_EQ(both.claim->status, ClaimStatus::kNew);
    const auto after = *bloom_test::stats_of(f);
    if (combined) {
      EXPECT_EQ(counting->combined, 1) << "one call to the durable store";
      EXPECT_EQ(counting->commits, 0);
      EXPECT_EQ(after.durable_claims, before.durable_claims) << "the claim went with the commit";
    } else {
      EXPECT_EQ(after.skipped_reads, before.skipped_reads + 1) << "b was certainly absent: no durable read";
    }
    // The filter learnt "a": its claim goes to the durable store, which has it done.
    EXPECT_EQ(claim_status(f, "a", kT0, "B"), ClaimStatus::kCompleted);
    EXPECT_EQ(bloom_test::stats_of(f)->durable_claims, after.durable_claims + 1);
  }
}

}  // namespace
}  // namespace idem

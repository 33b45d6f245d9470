// StoreClock and its Timeline: the store's time estimated from readings and the
// process's monotonic clock; its rate measured, steps of the store's clock followed,
// failed readings survived. The Timeline is fed made-up readings; the StoreClock runs
// over a store whose server_time() the test sets.
#include "idem/store_clock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "idem/backend/store_wrapper.hpp"
#include "idem/memory_store.hpp"
#include "timeline.hpp"

namespace idem {
namespace {

using namespace std::chrono_literals;
using detail::Timeline;

constexpr std::int64_t kSec = 1'000'000'000;
constexpr std::int64_t kMs = 1'000'000;

TEST(Timeline, OneReadingAdvancesAtTheLocalRate) {
  Timeline t;
  t.add({100 * kSec, 5000 * kSec});
  EXPECT_EQ(t.at(100 * kSec), 5000 * kSec);
  EXPECT_EQ(t.at(103 * kSec), 5003 * kSec);
  EXPECT_EQ(t.rate(), 1.0);
}

// A host whose monotonic clock runs 1.5 times as fast as the store's (libfaketime's
// x1.5): from the second reading on, the estimate runs at the store's rate.
TEST(Timeline, MeasuresTheRateOfALocalClockThatRunsFast) {
  Timeline t;
  t.add({0, 1000 * kSec});
  t.add({3 * kSec, 1002 * kSec});  // 3 local seconds, 2 of the store's
  EXPECT_NEAR(t.rate(), 2.0 / 3.0, 1e-9);
  // 30 local seconds later the store says 20 s passed; the estimate agrees.
  EXPECT_NEAR(double(t.at(33 * kSec)), double(1022 * kSec), double(kMs));
  t.add({33 * kSec, 1022 * kSec});
  EXPECT_NEAR(t.rate(), 2.0 / 3.0, 1e-9);
}

TEST(Timeline, ReadingsWithJitterKeepTheRateNearOne) {
  Timeline t;
  const std::int64_t jitter[] = {0, 300'000, -200'000, 100'000, -300'000, 200'000};  // ±0.3 ms
  for (int i = 0; i < 6; ++i) t.add({i * 5 * kSec, 7000 * kSec + i * 5 * kSec + jitter[i]});
  EXPECT_NEAR(t.rate(), 1.0, 1e-4);
}

// The store's clock set forward by 10 minutes: followed at once, and the rate stays
// what it was (the step is not a rate).
TEST(Timeline, FollowsAStepOfTheStoresClockWithoutTakingItForARate) {
  Timeline t;
  t.add({0, 1000 * kSec});
  t.add({5 * kSec, 1005 * kSec});
  t.add({10 * kSec, 1610 * kSec});  // + 600 s
  EXPECT_EQ(t.at(10 * kSec), 1610 * kSec);
  EXPECT_EQ(t.rate(), 1.0);
  t.add({15 * kSec, 1615 * kSec});  // the rate's baseline starts at the step
  EXPECT_EQ(t.rate(), 1.0);
  t.add({20 * kSec, 1020 * kSec});  // and back by 10 minutes
  EXPECT_EQ(t.at(21 * kSec), 1021 * kSec);
  EXPECT_EQ(t.rate(), 1.0);
}

// Readings that each stay close to the estimate but together creep to a rate above 2.
TEST(Timeline, KeepsTheRateWithinItsBounds) {
  Timeline t;
  t.add({0, 0});
  t.add({1 * kSec, 1500 * kMs});
  t.add({2 * kSec, 3500 * kMs});
  t.add({3 * kSec, 5750 * kMs});
  EXPECT_NEAR(t.rate(), 5.75 / 3, 1e-9);
  t.add({4 * kSec, 8100 * kMs});  // 8.1 / 4 = 2.025
  EXPECT_EQ(t.rate(), Timeline::kMaxRate);
}

TEST(Timeline, TakesNoRateFromReadingsCloserThanItsBaseline) {
  Timeline t;
  t.add({0, 0});
  t.add({50 * kMs, 80 * kMs});  // 50 ms apart: a round trip's noise, not a rate
  EXPECT_EQ(t.rate(), 1.0);
  EXPECT_EQ(t.at(60 * kMs), 90 * kMs);
}

// A store whose time the test sets: the host's clock plus an offset, or a failure.
class TimedStore final : public StoreWrapper {
 public:
  TimedStore() : StoreWrapper(memory::open().value()) {}
  StatusOr<TimePoint> server_time() override {
    reads.fetch_add(1);
    if (down.load()) return unavailable("the store is down");
    return TimePoint(std::chrono::system_clock::now()) + std::chrono::nanoseconds(offset_ns.load());
  }
  std::atomic<std::int64_t> offset_ns{0};
  std::atomic<bool> down{false};
  std::atomic<int> reads{0};
};

std::int64_t ms_between(TimePoint a, TimePoint b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(a - b).count();
}

TEST(StoreClock, ReadsTheStoresTimeNotTheHosts) {
  auto store = std::make_shared<TimedStore>();
  store->offset_ns = 30 * kSec;  // the store's host is 30 s ahead of this one
  auto clock = StoreClock::start(store);
  ASSERT_TRUE(clock.ok()) << clock.status().to_string();
  EXPECT_EQ(store->reads.load(), 3) << "one reading of three requests before start() returns";
  const std::int64_t ahead = ms_between((*clock)->now(), TimePoint(std::chrono::system_clock::now()));
  EXPECT_NEAR(double(ahead), 30'000.0, 50.0);
  EXPECT_LT((*clock)->uncertainty(), 50ms);
}

// The store's clock steps by an hour: the clock follows within its first resample
// (100 ms after start), and goes on reading through a store that is down.
TEST(StoreClock, FollowsAStepAndSurvivesFailedReadings) {
  auto store = std::make_shared<TimedStore>();
  auto clock = StoreClock::start(store, {.resample = Duration(200)});
  ASSERT_TRUE(clock.ok()) << clock.status().to_string();
  store->offset_ns = 3600 * kSec;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::int64_t ahead = 0;
  while (std::chrono::steady_clock::now() < deadline && ahead < 3'500'000) {
    std::this_thread::sleep_for(20ms);
    ahead = ms_between((*clock)->now(), TimePoint(std::chrono::system_clock::now()));
  }
  EXPECT_NEAR(double(ahead), 3'600'000.0, 50.0) << "the step was followed";
  store->down = true;
  const int reads = store->reads.load();
  while (std::chrono::steady_clock::now() < deadline && (*clock)->failed_readings() == 0)
    std::this_thread::sleep_for(20ms);
  EXPECT_GE((*clock)->failed_readings(), 1u);
  EXPECT_GT(store->reads.load(), reads);
  ahead = ms_between((*clock)->now(), TimePoint(std::chrono::system_clock::now()));
  EXPECT_NEAR(double(ahead), 3'600'000.0, 50.0) << "the estimate goes on while the store is down";
}

TEST(StoreClock, AStoreWithoutATimeKeepsTheHostsClock) {
  std::shared_ptr<Store> store = memory::open().value();
  EXPECT_EQ(StoreClock::start(store).status().code(), StatusCode::kUnimplemented);
  auto clock = clock_for(store);
  ASSERT_TRUE(clock.ok());
  EXPECT_EQ(clock->get(), system_clock().get());
}

TEST(StoreClock, AStoreThatCannotBeReadAtStartIsAnError) {
  auto store = std::make_shared<TimedStore>();
  store->down = true;
  EXPECT_EQ(clock_for(store).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(StoreClock::start(store, {.resample = Duration(0)}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem

// KeyedQueue: one item per key ready at a time, in arrival order; removal keeps order.
#include "runtime/keyed_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace idem::detail {
namespace {

std::unique_ptr<WorkItem> item(const std::string& key, const std::string& id) {
  auto w = std::make_unique<WorkItem>();
  w->key = queue_key(key);
  w->keyed = !key.empty();
  w->delivery.broker_id = id;
  return w;
}

std::vector<std::string> ids(const std::vector<WorkItem*>& ws) {
  std::vector<std::string> out;
  for (const WorkItem* w : ws) out.push_back(w->delivery.broker_id);
  return out;
}

TEST(KeyedQueue, OneItemPerKeyIsReadyAndFinishingPromotesTheNext) {
  auto a1 = item("a", "a1"), a2 = item("a", "a2"), b1 = item("b", "b1"), f1 = item("", "f1"), f2 = item("", "f2");
  KeyedQueue q;
  for (WorkItem* w : {a1.get(), a2.get(), b1.get(), f1.get(), f2.get()}) q.push(w);
  EXPECT_EQ(q.queued(), 5u);
  std::vector<WorkItem*> taken;
  q.take(10, taken);
  EXPECT_EQ(ids(taken), (std::vector<std::string>{"a1", "b1", "f1", "f2"}));
  EXPECT_EQ(q.ready(), 0u);
  EXPECT_TRUE(q.finish(a1.get()));
  EXPECT_FALSE(q.finish(b1.get()));
  taken.clear();
  q.take(10, taken);
  EXPECT_EQ(ids(taken), (std::vector<std::string>{"a2"}));
  EXPECT_FALSE(q.finish(a2.get()));
  EXPECT_EQ(q.queued(), 0u);
}

TEST(KeyedQueue, RemovingAnItemRemovesTheRestOfItsKey) {
  auto a1 = item("a", "a1"), a2 = item("a", "a2"), a3 = item("a", "a3"), b1 = item("b", "b1"), b2 = item("b", "b2");
  KeyedQueue q;
  for (WorkItem* w : {a1.get(), a2.get(), a3.get(), b1.get(), b2.get()}) q.push(w);
  std::vector<WorkItem*> taken;
  q.take(1, taken);  // a1 runs
  std::vector<WorkItem*> removed;
  q.remove_waiting([](const WorkItem& w) { return w.delivery.broker_id == "a2" || w.delivery.broker_id == "b1"; },
                   removed);
  // b1 was ready: b2 goes with it; a2 waits behind a1: a3 goes with it.
  EXPECT_EQ(ids(removed), (std::vector<std::string>{"b1", "b2", "a2", "a3"}));
  EXPECT_EQ(q.queued(), 0u);
  EXPECT_FALSE(q.finish(a1.get()));
}

TEST(KeyedQueue, AChainCutInTheMiddleKeepsItsHeadAndTakesNewItemsBehindIt) {
  auto a1 = item("a", "a1"), a2 = item("a", "a2"), a3 = item("a", "a3"), a4 = item("a", "a4"), a5 = item("a", "a5");
  KeyedQueue q;
  for (WorkItem* w : {a1.get(), a2.get(), a3.get(), a4.get()}) q.push(w);
  std::vector<WorkItem*> taken;
  q.take(1, taken);  // a1 runs; a2, a3, a4 wait
  std::vector<WorkItem*> removed;
  q.remove_waiting([](const WorkItem& w) { return w.delivery.broker_id == "a3"; }, removed);
  EXPECT_EQ(ids(removed), (std::vector<std::string>{"a3", "a4"}));
  EXPECT_EQ(q.queued(), 1u);
  q.push(a5.get());  // queued behind a2, the chain's new tail
  EXPECT_TRUE(q.finish(a1.get()));
  taken.clear();
  q.take(10, taken);
  EXPECT_EQ(ids(taken), (std::vector<std::string>{"a2"}));
  EXPECT_TRUE(q.finish(a2.get()));
  taken.clear();
  q.take(10, taken);
  EXPECT_EQ(ids(taken), (std::vector<std::string>{"a5"}));
  EXPECT_FALSE(q.finish(a5.get()));
  EXPECT_EQ(q.queued(), 0u);
}

// Keys that share their home slots (multiples of 64 apart, some at the table's end)
// make long probe runs that wrap around; items of each key must still come out one
// at a time, in push order, and every item exactly once.
TEST(KeyedQueue, KeysThatCollideKeepTheirOrderThroughRandomFinishes) {
  std::mt19937 rng(11);
  std::vector<std::unique_ptr<WorkItem>> items;
  std::map<std::uint64_t, std::vector<int>> pushed;
  KeyedQueue q;
  for (int i = 0; i < 5000; ++i) {
    auto w = std::make_unique<WorkItem>();
    w->key = (rng() % 2 == 0 ? 63 : 1) + 64 * static_cast<std::uint64_t>(rng() % 40);
    w->keyed = true;
    w->delivery.broker_id = std::to_string(i);
    pushed[w->key].push_back(i);
    q.push(w.get());
    items.push_back(std::move(w));
  }
  std::map<std::uint64_t, std::vector<int>> ran;
  std::vector<WorkItem*> running;
  while (q.queued() > 0 || !running.empty()) {
    q.take(1 + rng() % 8, running);
    std::shuffle(running.begin(), running.end(), rng);
    const std::size_t done = 1 + rng() % running.size();
    for (std::size_t i = 0; i < done; ++i) {
      ran[running.back()->key].push_back(std::stoi(running.back()->delivery.broker_id));
      q.finish(running.back());
      running.pop_back();
    }
  }
  EXPECT_EQ(ran, pushed);
}

}  // namespace
}  // namespace idem::detail

// Behaviour of the RocksDB store beyond the shared contract: transactional mode,
// expiry by compaction, batch paths under concurrency, the front-filter hooks.
#include "idem/rocksdb_store.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"
#include "idem/open_store.hpp"
#include "rocksdb/test_dir.hpp"

namespace idem {
namespace {

using std::chrono::milliseconds;
using testing::raw_read_all;
using testing::TempDir;

constexpr Duration kLease{10'000};
constexpr Duration kTtl{3'600'000};

struct Order {
  std::string id;
  std::string item;
  bool fail = false;
};

std::shared_ptr<rocksdb::RocksDbStore> open_ok(const rocksdb::Options& o) {
  auto s = rocksdb::open(o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : nullptr;
}

Extractors<Order> order_extractors() {
  Extractors<Order> ex;
  ex.id = [](const Order& o) { return std::optional<std::string_view>(o.id); };
  return ex;
}

TEST(RocksdbTransactional, HandlerWritesLandWithTheRecordOrNotAtAll) {
  TempDir dir;
  const std::string path = dir.sub("db");
  rocksdb::Options o;
  o.path = path;
  o.user_column_families = {"orders"};
  bool fail_next_commit = false;
  o.fault_hook = [&](std::string_view point) -> Status {
    if (fail_next_commit && point == "rocksdb.commit.write") return unavailable("injected");
    return ok_status();
  };
  {
    auto store = open_ok(o);
    ASSERT_NE(store, nullptr);
    EXPECT_TRUE(store->capabilities().transactional);
    ManualClock clock;
    ConsumerOptions opts;
    opts.store = store;
    opts.transactional = true;
    opts.clock = std::shared_ptr<Clock>(&clock, [](Clock*) {});
    std::vector<Status> handler_errors;
    auto consumer = Consumer<Order>::create(opts, order_extractors(), [&](const Order& m, HandlerContext& ctx) {
      rocksdb::Batch* b = rocksdb::batch(ctx);
      if (b == nullptr) return HandlerResult::fail("no batch");
      handler_errors.push_back(b->put("idem_done", m.id, "x"));
      handler_errors.push_back(b->put("nope", m.id, "x"));
      if (Status s = b->put("orders", m.id, m.item); !s.ok()) return HandlerResult::fail(s.to_string());
      if (Status s = b->put("default", "last", m.id); !s.ok()) return HandlerResult::fail(s.to_string());
      EXPECT_EQ(b->size(), 2u);
      auto own = b->get("orders", m.id);
      EXPECT_TRUE(own.ok());
      EXPECT_FALSE(own.ok() && own->has_value()) << "the batch's own writes are not visible before commit";
      if (m.fail) return HandlerResult::fail("business failure");
      return HandlerResult::ok("done:" + m.id);
    });
    ASSERT_TRUE(consumer.ok()) << consumer.status().to_string();

    Decision ok = consumer->process({"o-1", "book"});
    EXPECT_EQ(ok.reason, Reason::kProcessed);
    Decision failed = consumer->process({"o-2", "lamp", true});
    EXPECT_EQ(failed.action, Action::kRetry);
    EXPECT_EQ(failed.reason, Reason::kHandlerFailed);
    fail_next_commit = true;
    Decision lost = consumer->process({"o-3", "desk"});
    fail_next_commit = false;
    EXPECT_EQ(lost.action, Action::kRetry);
    EXPECT_EQ(lost.reason, Reason::kStoreUnavailable);
    Decision dup = consumer->process({"o-1", "book"});
    EXPECT_EQ(dup.reason, Reason::kDuplicate);
    EXPECT_EQ(dup.result, std::optional<std::string>("done:o-1"));
    for (std::size_t i = 0; i < handler_errors.size(); ++i)
      EXPECT_EQ(handler_errors[i].code(), StatusCode::kInvalidArgument) << i << ": " << handler_errors[i].to_string();
    // The retried message now lands, writes and record together.
    Decision again = consumer->process({"o-3", "desk"});
    EXPECT_EQ(again.reason, Reason::kProcessed);
  }
  const auto orders = raw_read_all(path, "orders");
  EXPECT_EQ(orders, (std::map<std::string, std::string>{{"o-1", "book"}, {"o-3", "desk"}}));
  EXPECT_EQ(raw_read_all(path, "default").at("last"), "o-3");
  const auto done = raw_read_all(path, "idem_done");
  EXPECT_EQ(done.size(), 2u);
  EXPECT_TRUE(done.contains("o-1"));
  EXPECT_TRUE(done.contains("o-3"));
  EXPECT_FALSE(done.contains("o-2"));
}

TEST(RocksdbTransactional, BatchIsNullOutsideARocksdbTransaction) {
  HandlerContext bare;
  EXPECT_EQ(rocksdb::batch(bare), nullptr);
  TempDir dir;
  auto store = open_ok({.path = dir.sub("db")});
  ASSERT_NE(store, nullptr);
  auto txn = store->begin(from_unix_ms(1000));
  ASSERT_TRUE(txn.ok());
  (*txn)->rollback();
  EXPECT_EQ(store->inspect("x", from_unix_ms(1000))->has_value(), false);
}

TEST(RocksdbExpiry, CompactionDropsExpiredRecordsAndReadsIgnoreThemBefore) {
  TempDir dir;
  const std::string path = dir.sub("db");
  const TimePoint t0 = from_unix_ms(1'700'000'000'000);
  {
    auto store = open_ok({.path = path});
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 1000; ++i) {
      for (const char* kind : {"short-", "long-"}) {
        const std::string id = kind + std::to_string(i);
        ASSERT_EQ(store->claim({id, "A", kLease, std::nullopt, t0})->status, ClaimStatus::kNew);
        CommitRequest c{id, "A", std::nullopt, t0, kind[0] == 's' ? milliseconds(1000) : kTtl, std::nullopt};
        ASSERT_TRUE(store->commit(c).ok());
      }
    }
    const TimePoint t1 = t0 + milliseconds(2000);
    // Before any compaction, expired records already count as absent.
    EXPECT_EQ(store->claim({"short-7", "B", kLease, std::nullopt, t1})->status, ClaimStatus::kNew);
    EXPECT_EQ(store->release({"short-7", "B", false, t1, kTtl}).value(), 0u);
    auto report = store->compact(t1);
    ASSERT_TRUE(report.ok()) << report.status().to_string();
    EXPECT_EQ(report->dropped, 1000u);
    EXPECT_EQ(store->claim({"long-7", "B", kLease, std::nullopt, t1})->status, ClaimStatus::kCompleted);
    EXPECT_EQ(store->purge_expired(t1, 100).value(), 0u) << "native TTL: purge has nothing to do";
  }
  const auto done = raw_read_all(path, "idem_done");
  EXPECT_EQ(done.size(), 1000u);
  for (const auto& [id, v] : done) EXPECT_EQ(id.rfind("long-", 0), 0u) << id;
}

TEST(RocksdbExpiry, CompactionUsesTheStoresTimeNotTheWallClock) {
  TempDir dir;
  auto store = open_ok({.path = dir.sub("db")});
  ASSERT_NE(store, nullptr);
  // A record that expired long ago by the wall clock but not by the store's time.
  const TimePoint past = from_unix_ms(1'000'000);
  ASSERT_TRUE(store->commit({"old", "A", std::nullopt, past, milliseconds(1000), std::nullopt}).ok());
  auto report = store->compact(past + milliseconds(500));
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->dropped, 0u);
  EXPECT_EQ(store->claim({"old", "B", kLease, std::nullopt, past + milliseconds(500)})->status,
            ClaimStatus::kCompleted);
}

// Every thread claims the same ids, half through claim_batch (in its own shuffled
// order) and half one by one: each id has exactly one winner.
TEST(RocksdbConcurrency, MixedSingleAndBatchClaimsHaveExactlyOneWinner) {
  TempDir dir;
  rocksdb::Options o{.path = dir.sub("db")};
  o.lease_stripes = 4;  // few stripes: batches and singles contend
  auto store = open_ok(o);
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 6;
  constexpr int kIds = 2000;
  const TimePoint t0 = from_unix_ms(1'700'000'000'000);
  std::vector<std::string> ids;
  for (int i = 0; i < kIds; ++i) ids.push_back("id-" + std::to_string(i));
  // Some ids were committed before: nobody may win them.
  for (int i = 0; i < kIds; i += 10) ASSERT_TRUE(store->commit({ids[i], "seed", std::nullopt, t0, kTtl, "r"}).ok());
  std::vector<std::atomic<int>> winners(kIds);
  std::atomic<int> errors{0}, completed{0};
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int> order(kIds);
      for (int i = 0; i < kIds; ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), std::mt19937(t));
      const std::string owner = "owner-" + std::to_string(t);
      start.arrive_and_wait();
      for (std::size_t k = 0; k < order.size(); k += 100) {
        std::vector<ClaimRequest> batch;
        for (std::size_t j = k; j < k + 100; ++j) batch.push_back({ids[order[j]], owner, kLease, std::nullopt, t0});
        std::vector<StatusOr<ClaimResult>> out;
        if (t % 2 == 0) {
          out = store->claim_batch(batch);
        } else {
          for (const auto& r : batch) out.push_back(store->claim(r));
        }
        for (std::size_t j = 0; j < out.size(); ++j) {
          if (!out[j].ok()) {
            errors.fetch_add(1);
          } else if (out[j]->status == ClaimStatus::kNew) {
            winners[order[k + j]].fetch_add(1);
          } else if (out[j]->status == ClaimStatus::kCompleted) {
            completed.fetch_add(1);
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(completed.load(), kThreads * kIds / 10);
  for (int i = 0; i < kIds; ++i) EXPECT_EQ(winners[i].load(), i % 10 == 0 ? 0 : 1) << ids[i];
}

// Threads race to process overlapping streams through the middleware with batches:
// every id is processed exactly once.
TEST(RocksdbConcurrency, ConsumersProcessEachIdExactlyOnce) {
  TempDir dir;
  auto store = open_ok({.path = dir.sub("db")});
  ASSERT_NE(store, nullptr);
  ConsumerOptions opts;
  opts.store = store;
  std::vector<std::atomic<int>> runs(3000);
  auto consumer = Consumer<Order>::create(opts, order_extractors(), [&](const Order& m, HandlerContext&) {
    runs[std::stoi(m.id.substr(2))].fetch_add(1);
    return HandlerResult::ok();
  });
  ASSERT_TRUE(consumer.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<Order> batch;
      for (int i = 0; i < 3000; ++i) {
        batch.push_back({"m-" + std::to_string((i * (t + 1) * 7) % 3000), ""});
        if (batch.size() == 64) {
          for (const Decision& d : consumer->process_batch(batch))
            EXPECT_TRUE(d.reason == Reason::kProcessed || d.reason == Reason::kDuplicate ||
                        d.reason == Reason::kInProgress)
                << reason_name(d.reason);
          batch.clear();
        }
      }
      for (const Order& m : batch) (void)consumer->process(m);
    });
  }
  for (auto& th : threads) th.join();
  // A copy answered in_progress loses to the thread holding the lease, which commits.
  int once = 0;
  for (auto& r : runs) {
    EXPECT_LE(r.load(), 1);
    once += r.load() == 1;
  }
  EXPECT_EQ(once, 3000) << "every id has a winner, and the winner commits";
}

TEST(RocksdbFrontHooks, ClaimKnownAbsentSkipsReadsButNotLeases) {
  TempDir dir;
  auto store = open_ok({.path = dir.sub("db")});
  ASSERT_NE(store, nullptr);
  const TimePoint t0 = from_unix_ms(1'700'000'000'000);
  auto a = store->claim_known_absent({"x", "A", kLease, std::nullopt, t0});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->status, ClaimStatus::kNew);
  auto b = store->claim_known_absent({"x", "B", kLease, std::nullopt, t0});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->status, ClaimStatus::kInProgress);
  EXPECT_EQ(b->owner, "A");
  ASSERT_TRUE(store->commit({"x", "A", std::nullopt, t0, kTtl, std::nullopt}).ok());
  ASSERT_TRUE(store->release({"y", "A", true, t0, kTtl}).ok());
  std::set<std::string> seen;
  ASSERT_TRUE(store->for_each_record([&](std::string_view id, TimePoint exp) {
                EXPECT_EQ(exp, t0 + kTtl);
                seen.insert(std::string(id));
              }).ok());
  EXPECT_EQ(seen, (std::set<std::string>{"x", "y"}));
}

TEST(RocksdbFrontHooks, ClaimKnownAbsentBatchKeepsOrderAndLeases) {
  TempDir dir;
  auto store = open_ok({.path = dir.sub("db")});
  ASSERT_NE(store, nullptr);
  const TimePoint t0 = from_unix_ms(1'700'000'000'000);
  ASSERT_EQ(store->claim({"held", "B", kLease, std::nullopt, t0})->status, ClaimStatus::kNew);
  const std::vector<ClaimRequest> qs = {{"a", "A", kLease, std::nullopt, t0},
                                        {"held", "A", kLease, std::nullopt, t0},
                                        {"a", "A2", kLease, std::nullopt, t0},
                                        {"", "A", kLease, std::nullopt, t0},
                                        {"b", "A", kLease, std::nullopt, t0}};
  auto out = store->claim_known_absent_batch(qs);
  ASSERT_EQ(out.size(), qs.size());
  ASSERT_TRUE(out[0].ok() && out[1].ok() && out[2].ok() && out[4].ok());
  EXPECT_EQ(out[0]->status, ClaimStatus::kNew);
  EXPECT_EQ(out[1]->status, ClaimStatus::kInProgress) << "a lease held elsewhere is still checked";
  EXPECT_EQ(out[1]->owner, "B");
  EXPECT_EQ(out[2]->status, ClaimStatus::kInProgress) << "the later copy sees the earlier copy's lease";
  EXPECT_EQ(out[2]->owner, "A");
  EXPECT_EQ(out[3].status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out[4]->status, ClaimStatus::kNew);
  // The leases it took are ordinary leases: commits by their owners land.
  const std::vector<CommitRequest> cs = {{"a", "A", std::nullopt, t0, kTtl, std::nullopt},
                                         {"b", "A", std::nullopt, t0, kTtl, std::nullopt}};
  for (const Status& s : store->commit_batch(cs)) EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(store->claim({"a", "C", kLease, std::nullopt, t0})->status, ClaimStatus::kCompleted);
}

TEST(RocksdbUri, OpensThroughOpenStoreAndRejectsUnknownParameters) {
  TempDir dir;
  const std::string path = dir.sub("db");
  const TimePoint t0 = from_unix_ms(1'700'000'000'000);
  {
    auto s = open_store("rocksdb:" + path + "?sync=true&bloom_bits=12&block_cache_mib=8&cf=orders,users");
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_TRUE((*s)->capabilities().durable);
    ASSERT_TRUE((*s)->commit({"kept", "A", std::nullopt, t0, kTtl, "r"}).ok());
  }
  {
    auto s = open_store("rocksdb:" + path);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto c = (*s)->claim({"kept", "B", kLease, std::nullopt, t0});
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->status, ClaimStatus::kCompleted);
    EXPECT_EQ(c->result, std::optional<std::string>("r"));
  }
  auto bad = open_store("rocksdb:" + path + "?bogus=1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bogus"), std::string::npos) << bad.status().to_string();
  auto bad_bool = open_store("rocksdb:" + path + "?sync=maybe");
  EXPECT_EQ(bad_bool.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem

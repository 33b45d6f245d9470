// Entity records and the reorder buffer of the RocksDB store beyond the shared
// contract: the on-disk key layout, a database from before entities existed, buffer
// totals rebuilt at open, limits under concurrent puts, many removed versions of one
// key, and a SIGKILL during a stream of entity commits.
#include <gtest/gtest.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "idem/rocksdb_store.hpp"
#include "rocksdb/test_dir.hpp"
#include "support/entity_requests.hpp"

namespace idem {
namespace {

using idem::testing::ew;

using namespace std::string_literals;
using std::chrono::milliseconds;
using testing::raw_read_all;
using testing::TempDir;

constexpr Duration kLease{10'000};
constexpr Duration kTtl{3'600'000};
const TimePoint kT0 = from_unix_ms(1'700'000'000'000);

std::shared_ptr<Store> open_ok(const std::string& path) {
  auto s = rocksdb::open({.path = path});
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : nullptr;
}

BufferPut put(std::string_view key, std::uint64_t version, std::string_view id, std::string_view message,
              BufferLimits limits = {}) {
  return testing::bp(key, version, id, message, kT0, limits);
}

ClaimRequest claim_req(std::string_view id, std::string_view owner,
                       std::optional<std::string_view> entity_key = std::nullopt) {
  ClaimRequest q;
  q.id = id;
  q.owner = owner;
  q.lease = kLease;
  q.now = kT0;
  q.entity_key = entity_key;
  return q;
}

CommitRequest commit_req(std::string_view id, std::string_view owner, std::optional<std::string_view> result,
                         std::optional<EntityWrite> entity = std::nullopt) {
  CommitRequest q;
  q.id = id;
  q.owner = owner;
  q.now = kT0;
  q.ttl = kTtl;
  q.result = result;
  q.entity = entity;
  return q;
}

std::string be64(std::uint64_t v) {
  std::string out;
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

// Drops column family `cf` from the database at `path` with RocksDB itself.
void drop_column_family(const std::string& path, const std::string& cf) {
  ASSERT_TRUE(testing::with_raw_db(path, [&](::rocksdb::DB& db, const auto& cfs) {
    if (auto it = cfs.find(cf); it != cfs.end()) {
      EXPECT_TRUE(db.DropColumnFamily(it->second).ok());
    }
  }));
}

std::vector<std::string> column_families(const std::string& path) {
  std::vector<std::string> names;
  EXPECT_TRUE(::rocksdb::DB::ListColumnFamilies(::rocksdb::DBOptions(), path, &names).ok());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(RocksdbEntities, KeyLayoutOnDisk) {
  TempDir dir("rocksdb-entities");
  const std::string path = dir.sub("db");
  {
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    EXPECT_NE(store->entities(), nullptr);
    ASSERT_TRUE(store->entities()->write_entity(ew("ab", 0, 7, "open")).ok());
    ASSERT_TRUE(store->entities()->buffer_put(put("ab", 258, "m\0"s, "msg")).ok());
    ASSERT_TRUE(store->entities()->buffer_put(put("ab", 3, "m3", "")).ok());
  }
  const auto entities = raw_read_all(path, "idem_entities");
  ASSERT_EQ(entities.size(), 1u);
  // format 1, revision 1 and version 7 (uint64 LE), then the state.
  EXPECT_EQ(entities.at("ab"), "\x01"s + "\x01\0\0\0\0\0\0\0"s + "\x07\0\0\0\0\0\0\0"s + "open");
  const auto buffer = raw_read_all(path, "idem_buffer");
  ASSERT_EQ(buffer.size(), 2u);
  // Length of the key (uint32 BE), the key, the version (uint64 BE): ascending by version.
  const std::string k3 = "\0\0\0\x02"s + "ab" + be64(3);
  const std::string k258 = "\0\0\0\x02"s + "ab" + be64(258);
  EXPECT_EQ(buffer.begin()->first, k3);
  EXPECT_EQ(std::next(buffer.begin())->first, k258);
  // format 1, buffered_at (int64 LE ms), id length (uint32 LE), id, message.
  std::string at;
  for (int i = 0; i < 8; ++i) at.push_back(static_cast<char>((to_unix_ms(kT0) >> (8 * i)) & 0xff));
  EXPECT_EQ(buffer.at(k258), "\x01"s + at + "\x02\0\0\0"s + "m\0"s + "msg");
  // Entities and buffer entries never carry an expiry: nothing of theirs is in idem_done.
  EXPECT_TRUE(raw_read_all(path, "idem_done").empty());
}

TEST(RocksdbEntities, DatabaseFromBeforeEntitiesGetsTheirColumnFamiliesAdded) {
  TempDir dir("rocksdb-entities");
  const std::string path = dir.sub("db");
  {
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    ASSERT_EQ(store->claim(claim_req("old", "A"))->status, ClaimStatus::kNew);
    ASSERT_TRUE(store->commit(commit_req("old", "A", "r")).ok());
  }
  // What a layout-1 database written before entities looks like.
  drop_column_family(path, "idem_entities");
  drop_column_family(path, "idem_buffer");
  drop_column_family(path, "idem_outbox");
  drop_column_family(path, "idem_outbox_sent");
  ASSERT_EQ(column_families(path), (std::vector<std::string>{"default", "idem_done", "idem_meta", "idem_retries"}));
  {
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    auto old = store->claim(claim_req("old", "B"));
    ASSERT_TRUE(old.ok());
    EXPECT_EQ(old->status, ClaimStatus::kCompleted) << "the old records are kept";
    EXPECT_EQ(old->result, std::optional<std::string>("r"));
    auto none = store->entities()->read_entity("k");
    ASSERT_TRUE(none.ok()) << none.status().to_string();
    EXPECT_EQ(none->revision, 0u);
    ASSERT_TRUE(store->entities()->write_entity(ew("k", 0, 1)).ok());
    ASSERT_TRUE(store->entities()->buffer_put(put("k", 3, "m3", "x")).ok());
  }
  EXPECT_EQ(column_families(path),
            (std::vector<std::string>{"default", "idem_buffer", "idem_done", "idem_entities", "idem_meta",
                                      "idem_outbox", "idem_outbox_sent", "idem_retries"}));
  auto store = open_ok(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->entities()->read_entity("k")->version, 1u);
  EXPECT_EQ(store->entities()->buffer_read("k", 10)->size(), 1u);
}

// A process killed between creating the column families and writing the layout
// leaves a database without a layout: with no record in it, the next open finishes
// it; with records (not a database idem was creating), it is still refused.
TEST(RocksdbEntities, AnInterruptedCreationOpensAndADatabaseWithRecordsButNoLayoutDoesNot) {
  TempDir dir("rocksdb-entities");
  for (const bool with_record : {false, true}) {
    SCOPED_TRACE(with_record ? "with a record" : "empty");
    const std::string path = dir.sub(with_record ? "records" : "empty");
    {
      auto store = open_ok(path);
      ASSERT_NE(store, nullptr);
      if (with_record) {
        ASSERT_EQ(store->claim(claim_req("old", "A"))->status, ClaimStatus::kNew);
        ASSERT_TRUE(store->commit(commit_req("old", "A", "r")).ok());
      }
    }
    ASSERT_TRUE(testing::with_raw_db(path, [&](::rocksdb::DB& db, const auto& cfs) {
      EXPECT_TRUE(db.Delete({}, cfs.at("idem_meta"), "layout").ok());
    }));
    auto again = rocksdb::open({.path = path});
    if (with_record) {
      EXPECT_EQ(again.status().code(), StatusCode::kDataLoss) << again.status().to_string();
    } else {
      ASSERT_TRUE(again.ok()) << again.status().to_string();
      again->reset();  // closes it
      EXPECT_TRUE(rocksdb::open({.path = path}).ok()) << "the layout was written";
    }
  }
}

TEST(RocksdbEntities, RefusedOpenAddsNoColumnFamily) {
  TempDir dir("rocksdb-entities");
  const std::string path = dir.sub("db");
  { ASSERT_NE(open_ok(path), nullptr); }
  drop_column_family(path, "idem_entities");
  drop_column_family(path, "idem_buffer");
  drop_column_family(path, "idem_outbox");
  drop_column_family(path, "idem_outbox_sent");
  // Mark the database as written by a newer idem: open refuses it and leaves it as is.
  {
    std::vector<std::string> names;
    ASSERT_TRUE(::rocksdb::DB::ListColumnFamilies(::rocksdb::DBOptions(), path, &names).ok());
    std::vector<::rocksdb::ColumnFamilyDescriptor> descs;
    for (const auto& n : names) descs.emplace_back(n, ::rocksdb::ColumnFamilyOptions());
    std::vector<::rocksdb::ColumnFamilyHandle*> handles;
    ::rocksdb::DB* db = nullptr;
    ASSERT_TRUE(::rocksdb::DB::Open(::rocksdb::DBOptions(), path, descs, &handles, &db).ok());
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i] == "idem_meta") {
        EXPECT_TRUE(db->Put({}, handles[i], "layout", "idem.rocksdb/99").ok());
      }
    }
    for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
    delete db;
  }
  auto refused = rocksdb::open({.path = path});
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << refused.status().to_string();
  EXPECT_EQ(column_families(path), (std::vector<std::string>{"default", "idem_done", "idem_meta", "idem_retries"}));
}

TEST(RocksdbEntities, BufferTotalsAreRebuiltAtOpen) {
  TempDir dir("rocksdb-entities");
  const std::string path = dir.sub("db");
  const BufferLimits limits{.per_key = 10, .total = 3, .total_bytes = 1 << 20};
  std::size_t bytes = 0;
  {
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    for (std::uint64_t v = 1; v <= 3; ++v) {
      const std::string id = "id-" + std::to_string(v);
      ASSERT_TRUE(store->entities()->buffer_put(put("key-" + std::to_string(v % 2), v, id, std::string(v * 10, 'm'), limits)).ok());
      bytes += 5 + id.size() + v * 10;
    }
  }
  auto store = open_ok(path);
  ASSERT_NE(store, nullptr);
  auto sum = store->entities()->buffer_summary(0);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, 3u);
  EXPECT_EQ(sum->bytes, bytes);
  Status over = store->entities()->buffer_put(put("key-9", 1, "x", "", limits));
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted) << "the reopened store knows it is full";
  // A commit that unbuffers makes room, and the totals follow.
  ASSERT_EQ(store->claim(claim_req("id-2", "A", "key-0"))->status, ClaimStatus::kNew);
  ASSERT_TRUE(store->commit(commit_req("id-2", "A", std::nullopt, ew("key-0", 0, 2, std::nullopt, 2))).ok());
  EXPECT_EQ(store->entities()->buffer_summary(0)->count, 2u);
  EXPECT_EQ(store->entities()->buffer_summary(0)->bytes, bytes - (5 + 4 + 20));
  EXPECT_TRUE(store->entities()->buffer_put(put("key-9", 1, "x", "", limits)).ok());
}

// A batch of puts whose write fails stores nothing and returns every reservation it
// made: the same puts then fit the same limits.
TEST(RocksdbEntities, AFailedBufferWriteReturnsItsReservations) {
  TempDir dir("rocksdb-entities");
  bool fail = true;
  rocksdb::Options o;
  o.path = dir.sub("db");
  o.fault_hook = [&](std::string_view point) -> Status {
    return fail && point == "rocksdb.buffer_put.write" ? unavailable("injected") : ok_status();
  };
  auto opened = rocksdb::open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  Store& store = **opened;
  const BufferLimits limits{.per_key = 2, .total = 2, .total_bytes = 1 << 20};
  const std::vector<BufferPut> puts = {put("k", 2, "m2", "two", limits), put("k", 3, "m3", "three", limits)};
  for (const Status& s : store.entities()->buffer_put_batch(puts)) EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.to_string();
  EXPECT_EQ(store.entities()->buffer_summary(0)->count, 0u);
  EXPECT_EQ(store.entities()->buffer_summary(0)->bytes, 0u);
  EXPECT_TRUE(store.entities()->buffer_read("k", 10)->empty());
  fail = false;
  for (const Status& s : store.entities()->buffer_put_batch(puts)) EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(store.entities()->buffer_summary(0)->count, 2u);
  EXPECT_EQ(store.entities()->buffer_read("k", 10)->size(), 2u);
}

TEST(RocksdbEntities, ConcurrentPutsNeverPassTheLimits) {
  TempDir dir("rocksdb-entities");
  auto store = open_ok(dir.sub("db"));
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 8;
  constexpr int kPuts = 25;
  const BufferLimits limits{.per_key = 12, .total = 60, .total_bytes = 1 << 20};
  std::atomic<int> stored{0}, exhausted{0}, other{0};
  std::barrier sync(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      sync.arrive_and_wait();
      for (int i = 0; i < kPuts; ++i) {
        // Four keys shared by all threads: both the per-key and the total limit bind.
        const std::string key = "key-" + std::to_string(i % 4);
        const std::string id = "m-" + std::to_string(t) + "-" + std::to_string(i);
        Status s = store->entities()->buffer_put(put(key, static_cast<std::uint64_t>(t * 1000 + i + 1), id, "x", limits));
        if (s.ok()) {
          stored.fetch_add(1);
        } else if (s.code() == StatusCode::kResourceExhausted) {
          exhausted.fetch_add(1);
        } else {
          other.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(stored.load() + exhausted.load(), kThreads * kPuts);
  EXPECT_EQ(stored.load(), 4 * 12) << "each key fills to per_key (4 × 12 < total 60)";
  auto sum = store->entities()->buffer_summary(10);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, static_cast<std::size_t>(stored.load()));
  ASSERT_EQ(sum->keys.size(), 4u);
  for (const auto& k : sum->keys) EXPECT_EQ(k.count, 12u) << k.key;

  // Now the total binds: 12 more keys' worth of room is only 60 - 48 = 12 entries.
  std::atomic<int> more{0};
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        const std::string key = "fresh-" + std::to_string(t) + "-" + std::to_string(i);
        if (store->entities()->buffer_put(put(key, 1, "id", "x", limits)).ok()) more.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(more.load(), 12);
  EXPECT_EQ(store->entities()->buffer_summary(0)->count, 60u);
}

TEST(RocksdbEntities, EntityCacheSizeFromTheUri) {
  TempDir dir("rocksdb-entities");
  const std::string path = dir.sub("db");
  for (const char* cache : {"0", "1", "100000"}) {
    auto uri = StoreUri::parse("rocksdb:" + path + "?entity_cache=" + cache);
    ASSERT_TRUE(uri.ok()) << uri.status().to_string();
    auto store = rocksdb::open(*uri);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    // Each handle continues from what the previous one wrote, whatever its cache.
    auto before = (*store)->entities()->read_entity("k");
    ASSERT_TRUE(before.ok());
    ASSERT_TRUE((*store)->entities()->write_entity(ew("k", before->revision, before->version + 1)).ok()) << cache;
    ASSERT_TRUE((*store)->entities()->write_entity(ew("j", before->revision, std::nullopt)).ok()) << cache;
    EXPECT_EQ((*store)->entities()->read_entity("k")->revision, before->revision + 1);
  }
  auto bad = StoreUri::parse("rocksdb:" + path + "?entity_cache=many");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(rocksdb::open(*bad).status().code(), StatusCode::kInvalidArgument);
}

// What buffer_read and buffer_put answer for one key, compared with `live` (the
// versions that must be buffered, each with its message id).
void expect_buffer_is(Store& store, std::string_view key, const std::map<std::uint64_t, std::string>& live,
                      const std::string& where) {
  SCOPED_TRACE(where);
  auto first = store.entities()->buffer_read(key, 1);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  if (live.empty()) {
    EXPECT_TRUE(first->empty());
  } else {
    ASSERT_EQ(first->size(), 1u);
    EXPECT_EQ((*first)[0].version, live.begin()->first);
    EXPECT_EQ((*first)[0].id, live.begin()->second);
    EXPECT_EQ((*first)[0].key, key);
  }
  auto all = store.entities()->buffer_read(key, live.size() + 5);
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  ASSERT_EQ(all->size(), live.size());
  auto it = live.begin();
  for (const auto& e : *all) {
    EXPECT_EQ(e.version, it->first);
    EXPECT_EQ(e.id, it->second);
    EXPECT_EQ(e.message, "msg-" + it->second);
    ++it;
  }
  if (live.size() > 1) {
    auto two = store.entities()->buffer_read(key, 2);
    ASSERT_TRUE(two.ok());
    ASSERT_EQ(two->size(), 2u);
    EXPECT_EQ((*two)[1].version, std::next(live.begin())->first);
  }
}

// Deletion markers skipped by this thread's RocksDB reads while `read` runs.
template <class F>
std::uint64_t deletions_skipped(F&& read) {
  ::rocksdb::SetPerfLevel(::rocksdb::PerfLevel::kEnableCount);
  ::rocksdb::get_perf_context()->Reset();
  read();
  const std::uint64_t n = ::rocksdb::get_perf_context()->internal_delete_skipped_count;
  ::rocksdb::SetPerfLevel(::rocksdb::PerfLevel::kDisable);
  return n;
}

// One key through 20,000 buffered and removed versions (by buffer_remove and by
// commits that unbuffer): buffer_read keeps finding the live entries without
// stepping over the removed ones, buffer_put's per-key limit counts only the live
// ones, and a reopened store (which rebuilds the live versions from disk) answers the
// same.
TEST(RocksdbEntities, ManyRemovedVersionsOfOneKey) {
  TempDir dir("rocksdb-entities");
  const std::string path = dir.sub("db");
  constexpr std::uint64_t kVersions = 20'000;
  constexpr std::uint64_t kWindow = 4;  // live entries at a time
  const BufferLimits limits{.per_key = kWindow, .total = 100, .total_bytes = 1 << 20};
  std::map<std::uint64_t, std::string> live;
  auto msg_id = [](std::uint64_t v) { return "m-" + std::to_string(v); };
  auto do_put = [&](Store& store, std::uint64_t v, TimePoint at) {
    const std::string id = msg_id(v);
    const std::string msg = "msg-" + id;
    BufferPut p = put("k", v, id, msg, limits);
    p.now = at;
    return store.entities()->buffer_put(p);
  };
  std::uint64_t revision = 0;
  {
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    for (std::uint64_t v = 1; v <= kVersions; ++v) {
      if (live.size() == kWindow) {
        // Full: one more is refused, the oldest goes (every 7th by a commit).
        ASSERT_EQ(do_put(*store, v, kT0).code(), StatusCode::kResourceExhausted) << v;
        const std::uint64_t old = live.begin()->first;
        if (old % 7 == 0) {
          const std::string id = msg_id(old);
          ASSERT_EQ(store->claim(claim_req(id, "A", "k"))->status, ClaimStatus::kNew);
          ASSERT_TRUE(store->commit(commit_req(id, "A", std::nullopt, ew("k", revision, old, std::nullopt, old))).ok());
          ++revision;
        } else {
          ASSERT_TRUE(store->entities()->buffer_remove("k", old).ok()) << old;
        }
        live.erase(live.begin());
      }
      ASSERT_TRUE(do_put(*store, v, kT0 + milliseconds(v)).ok()) << v;
      ASSERT_TRUE(do_put(*store, v, kT0).ok()) << "the same entry again is a no-op";
      live.emplace(v, msg_id(v));
      auto first = store->entities()->buffer_read("k", 1);
      ASSERT_TRUE(first.ok());
      ASSERT_EQ(first->size(), 1u);
      ASSERT_EQ((*first)[0].version, live.begin()->first) << v;
      if (v % 1000 == 0) expect_buffer_is(*store, "k", live, "at version " + std::to_string(v));
    }
    // Removed out of order: a gap among the live versions; removing again is OK.
    const std::uint64_t gap = std::next(live.begin())->first;
    ASSERT_TRUE(store->entities()->buffer_remove("k", gap).ok());
    ASSERT_TRUE(store->entities()->buffer_remove("k", gap).ok());
    ASSERT_TRUE(store->entities()->buffer_remove("k", 5).ok()) << "long removed";
    live.erase(gap);
    expect_buffer_is(*store, "k", live, "after the gap");
    EXPECT_EQ(do_put(*store, live.begin()->first, kT0).code(), StatusCode::kOk);
    EXPECT_EQ(store->entities()->buffer_put(put("k", live.begin()->first, "other", "x", limits)).code(),
              StatusCode::kFailedPrecondition);
    EXPECT_LE(deletions_skipped([&] { ASSERT_EQ(store->entities()->buffer_read("k", 1)->size(), 1u); }), 1u)
        << "buffer_read starts at the first live entry, past the removed ones";
    EXPECT_LE(deletions_skipped([&] { ASSERT_EQ(store->entities()->buffer_read("k", 100)->size(), live.size()); }), 1u)
        << "only the marker of the gap lies among the live entries";
    EXPECT_TRUE(store->entities()->buffer_read("never-buffered", 10)->empty());
  }

  auto store = open_ok(path);
  ASSERT_NE(store, nullptr);
  expect_buffer_is(*store, "k", live, "after reopen");
  EXPECT_LE(deletions_skipped([&] { ASSERT_EQ(store->entities()->buffer_read("k", 1)->size(), 1u); }), 1u);
  auto sum = store->entities()->buffer_summary(5);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, live.size());
  ASSERT_EQ(sum->keys.size(), 1u);
  EXPECT_EQ(sum->keys[0].key, "k");
  EXPECT_EQ(sum->keys[0].count, live.size());
  EXPECT_EQ(sum->keys[0].lowest_version, live.begin()->first);
  EXPECT_EQ(sum->keys[0].oldest_at, kT0 + milliseconds(live.begin()->first));
  // The per-key count was rebuilt: room for exactly one more (the gap's).
  EXPECT_EQ(do_put(*store, kVersions + 1, kT0).code(), StatusCode::kOk);
  EXPECT_EQ(do_put(*store, kVersions + 2, kT0).code(), StatusCode::kResourceExhausted);
  live.emplace(kVersions + 1, msg_id(kVersions + 1));
  EXPECT_EQ(store->entities()->buffer_put(put("k", live.begin()->first, "other", "x", limits)).code(),
            StatusCode::kFailedPrecondition);
  // A commit after reopen unbuffers through the rebuilt versions too.
  const std::uint64_t low = live.begin()->first;
  ASSERT_EQ(store->claim(claim_req(msg_id(low), "B", "k"))->status, ClaimStatus::kNew);
  ASSERT_TRUE(
      store->commit(commit_req(msg_id(low), "B", std::nullopt, ew("k", revision, low, std::nullopt, low))).ok());
  live.erase(low);
  expect_buffer_is(*store, "k", live, "after a commit on the reopened store");
  while (!live.empty()) {
    ASSERT_TRUE(store->entities()->buffer_remove("k", live.rbegin()->first).ok());
    live.erase(std::prev(live.end()));
  }
  expect_buffer_is(*store, "k", live, "all removed");
  EXPECT_EQ(store->entities()->buffer_summary(5)->count, 0u);
  EXPECT_TRUE(store->entities()->buffer_summary(5)->keys.empty());
}

// The child: for n = 0, 1, …: buffers version n+1 of key "k" (message id c-n),
// claims c-n with the entity key, and commits it with an entity write that moves the
// record to version n+1 and state s-n and removes the buffer entry. Reports n on `fd`
// after each commit returns.
[[noreturn]] void commit_entities_forever(const std::string& path, int fd) {
  auto opened = rocksdb::open({.path = path});
  if (!opened.ok()) ::_exit(3);
  Store& store = **opened;
  std::uint64_t revision = 0;
  for (std::uint32_t n = 0;; ++n) {
    const std::string id = "c-" + std::to_string(n);
    const std::string state = "s-" + std::to_string(n);
    if (!store.entities()->buffer_put(put("k", n + 1, id, std::string(64, 'p'))).ok()) ::_exit(4);
    auto c = store.claim(claim_req(id, "child", "k"));
    if (!c.ok() || c->status != ClaimStatus::kNew || c->entity.revision != revision) ::_exit(5);
    if (!store.commit(commit_req(id, "child", state, ew("k", revision, n + 1, state, n + 1))).ok()) ::_exit(6);
    ++revision;
    if (::write(fd, &n, sizeof n) != sizeof n) ::_exit(7);
  }
}

TEST(RocksdbEntities, SigkillDuringEntityCommitsLeavesNoPartialCommit) {
  TempDir dir("rocksdb-entities");
  const std::string path = dir.sub("db");
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::filesystem::remove_all(path);
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      commit_entities_forever(path, fds[1]);
    }
    ::close(fds[1]);
    std::int64_t acked = -1;
    std::uint32_t n = 0;
    const std::int64_t min_acks = 200 * (round + 1);
    while (acked + 1 < min_acks && ::read(fds[0], &n, sizeof n) == sizeof n) acked = n;
    std::this_thread::sleep_for(milliseconds(20 + 30 * round));  // the child keeps committing
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child died on its own: " << status;
    while (::read(fds[0], &n, sizeof n) == sizeof n) acked = n;
    ::close(fds[0]);
    ASSERT_GE(acked, 0);

    // Raw: the entity record, the dedup records and the buffer agree on one count.
    const auto entities = raw_read_all(path, "idem_entities");
    const auto done = raw_read_all(path, "idem_done");
    const auto buffer = raw_read_all(path, "idem_buffer");
    ASSERT_EQ(entities.size(), 1u);
    const std::int64_t landed = static_cast<std::int64_t>(done.size());
    EXPECT_GE(landed, acked + 1) << "every acknowledged commit survives the kill";
    EXPECT_LE(landed, acked + 2) << "at most the one commit in flight landed unacknowledged";
    for (std::int64_t i = 0; i < landed; ++i) EXPECT_TRUE(done.contains("c-" + std::to_string(i))) << i;
    EXPECT_LE(buffer.size(), 1u) << "only the entry of the commit in flight may be left";

    // Through idem: the record is at version `landed`, revision `landed`, its state
    // names the last commit, and what is buffered is the next version only.
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    auto rec = store->entities()->read_entity("k");
    ASSERT_TRUE(rec.ok()) << rec.status().to_string();
    EXPECT_EQ(rec->revision, static_cast<std::uint64_t>(landed));
    EXPECT_EQ(rec->version, static_cast<std::uint64_t>(landed));
    EXPECT_EQ(rec->state, "s-" + std::to_string(landed - 1));
    auto left = store->entities()->buffer_read("k", 10);
    ASSERT_TRUE(left.ok());
    for (const auto& e : *left) {
      EXPECT_EQ(e.version, static_cast<std::uint64_t>(landed + 1)) << "a committed version is never left buffered";
      EXPECT_EQ(e.id, "c-" + std::to_string(landed));
    }
    auto sum = store->entities()->buffer_summary(10);
    ASSERT_TRUE(sum.ok());
    EXPECT_EQ(sum->count, left->size()) << "totals rebuilt from what is on disk";
    auto last = store->claim(claim_req("c-" + std::to_string(landed - 1), "P"));
    ASSERT_TRUE(last.ok());
    EXPECT_EQ(last->status, ClaimStatus::kCompleted);
    EXPECT_EQ(last->result, std::optional<std::string>("s-" + std::to_string(landed - 1)));
  }
}

}  // namespace
}  // namespace idem

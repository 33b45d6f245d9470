// Entity records and the reorder buffer of the RocksDB store beyond the shared
// contract: the on-disk key layout, a database from before entities existed, buffer
// totals rebuilt at open, limits under concurrent puts, and a SIGKILL during a stream
// of entity commits.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
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
  BufferPut p;
  p.key = key;
  p.version = version;
  p.id = id;
  p.message = message;
  p.now = kT0;
  p.limits = limits;
  return p;
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
  std::vector<std::string> names;
  ASSERT_TRUE(::rocksdb::DB::ListColumnFamilies(::rocksdb::DBOptions(), path, &names).ok());
  std::vector<::rocksdb::ColumnFamilyDescriptor> descs;
  for (const auto& n : names) descs.emplace_back(n, ::rocksdb::ColumnFamilyOptions());
  std::vector<::rocksdb::ColumnFamilyHandle*> handles;
  ::rocksdb::DB* db = nullptr;
  ASSERT_TRUE(::rocksdb::DB::Open(::rocksdb::DBOptions(), path, descs, &handles, &db).ok());
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == cf) {
      EXPECT_TRUE(db->DropColumnFamily(handles[i]).ok());
    }
  }
  for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
  delete db;
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
    EXPECT_TRUE(store->capabilities().entities);
    ASSERT_TRUE(store->write_entity(ew("ab", 0, 7, "open")).is_ok());
    ASSERT_TRUE(store->buffer_put(put("ab", 258, "m\0"s, "msg")).is_ok());
    ASSERT_TRUE(store->buffer_put(put("ab", 3, "m3", "")).is_ok());
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
    ASSERT_TRUE(store->commit(commit_req("old", "A", "r")).is_ok());
  }
  // What a layout-1 database written before entities looks like.
  drop_column_family(path, "idem_entities");
  drop_column_family(path, "idem_buffer");
  ASSERT_EQ(column_families(path), (std::vector<std::string>{"default", "idem_done", "idem_meta", "idem_retries"}));
  {
    auto store = open_ok(path);
    ASSERT_NE(store, nullptr);
    auto old = store->claim(claim_req("old", "B"));
    ASSERT_TRUE(old.ok());
    EXPECT_EQ(old->status, ClaimStatus::kCompleted) << "the old records are kept";
    EXPECT_EQ(old->result, std::optional<std::string>("r"));
    auto none = store->read_entity("k");
    ASSERT_TRUE(none.ok()) << none.status().to_string();
    EXPECT_EQ(none->revision, 0u);
    ASSERT_TRUE(store->write_entity(ew("k", 0, 1)).is_ok());
    ASSERT_TRUE(store->buffer_put(put("k", 3, "m3", "x")).is_ok());
  }
  EXPECT_EQ(column_families(path), (std::vector<std::string>{"default", "idem_buffer", "idem_done", "idem_entities",
                                                             "idem_meta", "idem_retries"}));
  auto store = open_ok(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->read_entity("k")->version, 1u);
  EXPECT_EQ(store->buffer_read("k", 10)->size(), 1u);
}

TEST(RocksdbEntities, RefusedOpenAddsNoColumnFamily) {
  TempDir dir("rocksdb-entities");
  const std::string path = dir.sub("db");
  { ASSERT_NE(open_ok(path), nullptr); }
  drop_column_family(path, "idem_entities");
  drop_column_family(path, "idem_buffer");
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
      ASSERT_TRUE(
          store->buffer_put(put("key-" + std::to_string(v % 2), v, id, std::string(v * 10, 'm'), limits)).is_ok());
      bytes += 5 + id.size() + v * 10;
    }
  }
  auto store = open_ok(path);
  ASSERT_NE(store, nullptr);
  auto sum = store->buffer_summary(0);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->count, 3u);
  EXPECT_EQ(sum->bytes, bytes);
  Status over = store->buffer_put(put("key-9", 1, "x", "", limits));
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted) << "the reopened store knows it is full";
  // A commit that unbuffers makes room, and the totals follow.
  ASSERT_EQ(store->claim(claim_req("id-2", "A", "key-0"))->status, ClaimStatus::kNew);
  ASSERT_TRUE(store->commit(commit_req("id-2", "A", std::nullopt, ew("key-0", 0, 2, std::nullopt, 2))).is_ok());
  EXPECT_EQ(store->buffer_summary(0)->count, 2u);
  EXPECT_EQ(store->buffer_summary(0)->bytes, bytes - (5 + 4 + 20));
  EXPECT_TRUE(store->buffer_put(put("key-9", 1, "x", "", limits)).is_ok());
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
        Status s = store->buffer_put(put(key, static_cast<std::uint64_t>(t * 1000 + i + 1), id, "x", limits));
        if (s.is_ok()) {
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
  auto sum = store->buffer_summary(10);
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
        if (store->buffer_put(put(key, 1, "id", "x", limits)).is_ok()) more.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(more.load(), 12);
  EXPECT_EQ(store->buffer_summary(0)->count, 60u);
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
    auto before = (*store)->read_entity("k");
    ASSERT_TRUE(before.ok());
    ASSERT_TRUE((*store)->write_entity(ew("k", before->revision, before->version + 1)).is_ok()) << cache;
    ASSERT_TRUE((*store)->write_entity(ew("j", before->revision, std::nullopt)).is_ok()) << cache;
    EXPECT_EQ((*store)->read_entity("k")->revision, before->revision + 1);
  }
  auto bad = StoreUri::parse("rocksdb:" + path + "?entity_cache=many");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(rocksdb::open(*bad).status().code(), StatusCode::kInvalidArgument);
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
    if (!store.buffer_put(put("k", n + 1, id, std::string(64, 'p'))).is_ok()) ::_exit(4);
    auto c = store.claim(claim_req(id, "child", "k"));
    if (!c.ok() || c->status != ClaimStatus::kNew || c->entity.revision != revision) ::_exit(5);
    if (!store.commit(commit_req(id, "child", state, ew("k", revision, n + 1, state, n + 1))).is_ok()) ::_exit(6);
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
    auto rec = store->read_entity("k");
    ASSERT_TRUE(rec.ok()) << rec.status().to_string();
    EXPECT_EQ(rec->revision, static_cast<std::uint64_t>(landed));
    EXPECT_EQ(rec->version, static_cast<std::uint64_t>(landed));
    EXPECT_EQ(rec->state, "s-" + std::to_string(landed - 1));
    auto left = store->buffer_read("k", 10);
    ASSERT_TRUE(left.ok());
    for (const auto& e : *left) {
      EXPECT_EQ(e.version, static_cast<std::uint64_t>(landed + 1)) << "a committed version is never left buffered";
      EXPECT_EQ(e.id, "c-" + std::to_string(landed));
    }
    auto sum = store->buffer_summary(10);
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

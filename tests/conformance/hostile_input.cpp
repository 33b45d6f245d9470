// The store conformance suite, part 3: hostile input. Ids, owners, results, entity
// keys, states and buffered messages that carry quotes, NUL, CR LF, Lua and SQL
// fragments, Redis hash tags, invalid UTF-8, every byte value, and the largest sizes
// the consumer lets through (ConsumerOptions::max_id_bytes, max_result_bytes,
// OrderingOptions::max_key_bytes) are inert: each round-trips byte-exact and stays
// apart from its neighbours (ids that differ only after a NUL, keys that are prefixes
// of each other).
#include <string>
#include <vector>

#include "conformance/store_conformance.hpp"
#include "idem/options.hpp"
#include "idem/ordering.hpp"
#include "support/entity_requests.hpp"

namespace idem::conformance {

using idem::testing::bp;
using idem::testing::ew;
using namespace std::string_literals;

namespace {

std::string every_byte() {
  std::string s;
  for (int c = 255; c >= 0; --c) s += static_cast<char>(c);
  return s;
}

// Distinct, non-empty, hostile strings; `max_bytes` is the largest size allowed.
std::vector<std::string> hostile(std::size_t max_bytes) {
  return {
      "\""s,
      "'"s,
      "a\0b"s,
      "a\0c"s,
      "a"s,
      "\0"s,
      "\0\0"s,
      "\r\n"s,
      "line\r\nSET x 1\r\n"s,
      "*3\r\n$3\r\nSET\r\n"s,
      "]] redis.call('FLUSHALL') --[["s,
      "'); return redis.call('FLUSHDB') --"s,
      "'; DROP TABLE idem_records; --"s,
      "' OR '1'='1"s,
      "\\\"\\'\\\\"s,
      "{tag}"s,
      "}{"s,
      "%s%n%x"s,
      "\xff\xfe\xfd"s,
      "\xc3\x28"s,
      "\xed\xa0\x80"s,      // a UTF-16 surrogate in UTF-8
      "\xf4\x90\x80\x80"s,  // past U+10FFFF
      " "s,
      "*"s,
      "?[]^$.|"s,
      every_byte(),
      std::string(max_bytes, 'x'),
      std::string(max_bytes - 1, '\0') + "z",
  };
}

bool differs_from_all(const std::string& s, const std::vector<std::string>& earlier) {
  for (const auto& e : earlier)
    if (e == s) return false;
  return true;
}

}  // namespace

TEST_P(StoreConformance, HostileIdsOwnersAndResultsRoundTripByteExact) {
  const TimePoint t0 = clock_.now();
  const std::vector<std::string> ids = hostile(ConsumerOptions{}.max_id_bytes);
  const std::string big_result = every_byte() + std::string(ConsumerOptions{}.max_result_bytes - 256, '\0');
  std::vector<std::string> seen;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::string& id = ids[i];
    ASSERT_TRUE(differs_from_all(id, seen)) << "the list repeats entry " << i;
    seen.push_back(id);
    SCOPED_TRACE("hostile id #" + std::to_string(i));
    if (!claim_new(id, ids[(i + 1) % ids.size()], t0)) continue;  // a probabilistic false positive
    // Held: another owner sees the holder byte-exact.
    const ClaimResult held = claim_ok(claim_req(id, "other", t0));
    ASSERT_EQ(held.status, ClaimStatus::kInProgress);
    EXPECT_EQ(held.owner, ids[(i + 1) % ids.size()]);
    const std::string result = i % 2 == 0 ? id : big_result;
    ASSERT_TRUE(store().commit(commit_req(id, ids[(i + 1) % ids.size()], t0, result)).ok());
    const ClaimResult dup = claim_ok(claim_req(id, "other", t0));
    EXPECT_EQ(dup.status, ClaimStatus::kCompleted);
    EXPECT_EQ(dup.result, stored(result));
    const RecordInfo info = inspect_live(id, t0);
    EXPECT_EQ(info.state, RecordState::kCompleted);
    EXPECT_EQ(info.result, stored(result));
  }
  // Each id kept its own record: none was written over by a neighbour.
  for (std::size_t i = 0; i < ids.size(); i += 2) {
    const ClaimResult dup = claim_ok(claim_req(ids[i], "other", t0));
    EXPECT_EQ(dup.status, ClaimStatus::kCompleted) << "hostile id #" << i;
    EXPECT_EQ(dup.result, stored(ids[i])) << "hostile id #" << i;
  }
  // An id none of them wrote is new (a probabilistic store may answer a false positive).
  const bool fresh = claim_new("fresh", "A", t0);
  if (!caps().probabilistic) {
    EXPECT_TRUE(fresh);
  }
}

TEST_P(StoreConformance, HostileEntityKeysStatesAndBufferedMessagesRoundTripByteExact) {
  if (!caps().entities) {
    EXPECT_EQ(store().entities(), nullptr);
    return;
  }
  const TimePoint t0 = clock_.now();
  const std::vector<std::string> keys = hostile(OrderingOptions{}.max_key_bytes);
  const std::string big_message = every_byte() + std::string(256 * 1024, '\0') + "\r\n";
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::string& key = keys[i];
    SCOPED_TRACE("hostile key #" + std::to_string(i));
    const std::string& state = keys[(i + 3) % keys.size()];
    ASSERT_TRUE(store().entities()->write_entity(ew(key, 0, 7, state)).ok());
    const std::string& id = keys[(i + 5) % keys.size()];
    const std::string message = i % 3 == 0 ? big_message : keys[(i + 7) % keys.size()];
    ASSERT_TRUE(store().entities()->buffer_put(bp(key, 9, id, message, t0)).ok());
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::string& key = keys[i];
    SCOPED_TRACE("hostile key #" + std::to_string(i));
    auto rec = store().entities()->read_entity(key);
    ASSERT_TRUE(rec.ok()) << rec.status().to_string();
    EXPECT_EQ(rec->revision, 1u);
    EXPECT_EQ(rec->version, 7u);
    EXPECT_EQ(rec->state, keys[(i + 3) % keys.size()]);
    auto entries = store().entities()->buffer_read(key, 10);
    ASSERT_TRUE(entries.ok()) << entries.status().to_string();
    ASSERT_EQ(entries->size(), 1u) << "a key's entries stay apart from its prefixes' and extensions'";
    EXPECT_EQ((*entries)[0].key, key);
    EXPECT_EQ((*entries)[0].version, 9u);
    EXPECT_EQ((*entries)[0].id, keys[(i + 5) % keys.size()]);
    EXPECT_EQ((*entries)[0].message, i % 3 == 0 ? big_message : keys[(i + 7) % keys.size()]);
  }
  auto summary = store().entities()->buffer_summary(1000);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  EXPECT_EQ(summary->count, keys.size());
  EXPECT_EQ(summary->keys.size(), keys.size());
}

}  // namespace idem::conformance

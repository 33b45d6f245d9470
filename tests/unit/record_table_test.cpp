// The memory store's record table (stores/memory/record_table.hpp) against a plain
// deque and set under random pushes, pops, rotations and lookups, at sizes that make
// the ring grow and the probes wrap: once from the smallest index (which then grows),
// once with the index reserved for every record (mapped from the OS, never rehashed).
#include "record_table.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <string>
#include <unordered_set>

namespace idem::memory_detail {
namespace {

std::uint32_t tag_for(const std::string& id) {
  const std::uint64_t h = hash_id(id);
  return h % 10 == 7 ? 1 : tag_of(h);
}

class RecordTableTest : public ::testing::TestWithParam<std::size_t> {};

// Ids of 4 to 22 bytes, so that hashing and comparing meet every tail length.
std::string id_of(std::uint64_t n) { return "id-" + std::to_string(n) + std::string(n % 13, 'p'); }

TEST_P(RecordTableTest, AgreesWithADequeUnderRandomOperations) {
  RecordTable table(GetParam());
  std::deque<std::string> fifo;  // ids, front first
  std::unordered_set<std::string> present;
  std::mt19937_64 rng(7);
  for (int step = 0; step < 200'000; ++step) {
    const std::uint64_t op = rng() % 10;
    if (op < 5 || fifo.empty()) {
      std::string id = id_of(rng() % 50'000);
      // A few tags collide on purpose: tag 1 for every id whose hash ends in 7.
      const std::uint32_t tag = tag_for(id);
      if (present.count(id) != 0) {
        ASSERT_NE(table.find(id, tag), nullptr) << id;
        continue;
      }
      ASSERT_EQ(table.find(id, tag), nullptr) << id;
      table.push_back(id, tag).retries = static_cast<std::uint32_t>(id.size());
      fifo.push_back(id);
      present.insert(id);
    } else if (op < 8) {
      ASSERT_EQ(table.front().id_view(), fifo.front());
      present.erase(fifo.front());
      fifo.pop_front();
      table.pop_front();
    } else {
      ASSERT_EQ(table.front().id_view(), fifo.front());
      fifo.push_back(fifo.front());
      fifo.pop_front();
      table.rotate_front();
    }
    ASSERT_EQ(table.size(), fifo.size());
  }
  std::size_t seen = 0;
  table.for_each([&](const Record& r) { seen += r.retries; });
  std::size_t expected = 0;
  for (const std::string& id : fifo) {
    Record* r = table.find(id, tag_for(id));
    ASSERT_NE(r, nullptr) << id;
    EXPECT_EQ(r->retries, id.size()) << "each record keeps its fields through rotations";
    expected += id.size();
  }
  EXPECT_EQ(seen, expected);
}

std::string index_name(const ::testing::TestParamInfo<std::size_t>& p) { return p.param == 0 ? "Grown" : "Reserved"; }

INSTANTIATE_TEST_SUITE_P(IndexSizes, RecordTableTest, ::testing::Values(0, 50'000), index_name);

}  // namespace
}  // namespace idem::memory_detail

// The memory store's record table (stores/memory/record_table.hpp) against a plain
// deque and set under random pushes, pops, rotations and lookups, at sizes that make
// the index and the ring grow and the probes wrap.
#include "record_table.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <string>
#include <unordered_set>

namespace idem::memory_detail {
namespace {

TEST(RecordTable, AgreesWithADequeUnderRandomOperations) {
  RecordTable table;
  std::deque<std::string> fifo;  // ids, front first
  std::unordered_set<std::string> present;
  std::mt19937_64 rng(7);
  for (int step = 0; step < 200'000; ++step) {
    const std::uint64_t op = rng() % 10;
    if (op < 5 || fifo.empty()) {
      std::string id = "id-" + std::to_string(rng() % 50'000);
      // A few tags collide on purpose: tag 1 for every id ending in 7.
      const std::uint32_t tag = id.back() == '7' ? 1 : tag_of(hash_id(id));
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
    const std::uint32_t tag = id.back() == '7' ? 1 : tag_of(hash_id(id));
    Record* r = table.find(id, tag);
    ASSERT_NE(r, nullptr) << id;
    EXPECT_EQ(r->retries, id.size()) << "each record keeps its fields through rotations";
    expected += id.size();
  }
  EXPECT_EQ(seen, expected);
}

}  // namespace
}  // namespace idem::memory_detail

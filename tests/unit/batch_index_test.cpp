// BatchIndex: the pipeline's dense indexes of the ids and keys met in one batch
// (src/batch_index.hpp).
#include "batch_index.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace idem::detail {
namespace {

using Answer = std::pair<std::uint32_t, bool>;

TEST(BatchIndex, IndexesFollowFirstInsertionAndRepeatsAreNotNew) {
  BatchIndex index(4);
  EXPECT_EQ(index.insert("a"), Answer(0, true));
  EXPECT_EQ(index.insert("b"), Answer(1, true));
  EXPECT_EQ(index.insert("a"), Answer(0, false));
  EXPECT_EQ(index.insert("b"), Answer(1, false));
  EXPECT_EQ(index.insert("ab"), Answer(2, true));
  EXPECT_EQ(index.size(), 3u);
}

TEST(BatchIndex, EmptyViewsAreOneStringWhateverTheirPointer) {
  BatchIndex index(4);
  const std::string empty;
  EXPECT_EQ(index.insert(std::string_view()), Answer(0, true));  // null data(): the free-slot marker
  EXPECT_EQ(index.insert(std::string_view()), Answer(0, false));
  EXPECT_EQ(index.insert(std::string_view(empty)), Answer(1, true));  // a non-null empty view
  EXPECT_EQ(index.insert(std::string_view(empty)), Answer(1, false));
  EXPECT_EQ(index.size(), 2u);
}

TEST(BatchIndex, MoreStringsThanExpectedGrowTheTableAndKeepEveryIndex) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5000; ++i) ids.push_back("id-" + std::to_string((i * 7) % 3000));  // 2000 repeats
  BatchIndex index(10);
  std::unordered_map<std::string_view, std::uint32_t> reference;
  for (const std::string& id : ids) {
    const auto [it, fresh] = reference.try_emplace(id, static_cast<std::uint32_t>(reference.size()));
    EXPECT_EQ(index.insert(id), Answer(it->second, fresh)) << id;
  }
  EXPECT_EQ(index.size(), 3000u);
}

}  // namespace
}  // namespace idem::detail

// BatchIds: the pipeline's set of the ids met in one batch (src/batch_ids.hpp).
#include "batch_ids.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace idem::detail {
namespace {

TEST(BatchIds, AnIdIsNewOnlyTheFirstTime) {
  BatchIds seen(4);
  EXPECT_TRUE(seen.insert("a"));
  EXPECT_TRUE(seen.insert("b"));
  EXPECT_FALSE(seen.insert("a"));
  EXPECT_FALSE(seen.insert("b"));
  EXPECT_TRUE(seen.insert("ab"));
}

TEST(BatchIds, EmptyViewsAreOneIdWhateverTheirPointer) {
  BatchIds seen(4);
  const std::string empty;
  EXPECT_TRUE(seen.insert(std::string_view()));  // null data(): the free-slot marker
  EXPECT_FALSE(seen.insert(std::string_view()));
  EXPECT_TRUE(seen.insert(std::string_view(empty)));  // a non-null empty view
  EXPECT_FALSE(seen.insert(std::string_view(empty)));
}

TEST(BatchIds, MoreIdsThanExpectedGrowTheTableAndKeepEveryAnswer) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5000; ++i) ids.push_back("id-" + std::to_string(i % 3000));  // 2000 repeats
  BatchIds seen(10);
  std::unordered_set<std::string_view> reference;
  for (const std::string& id : ids) EXPECT_EQ(seen.insert(id), reference.insert(id).second) << id;
  EXPECT_EQ(reference.size(), 3000u);
}

}  // namespace
}  // namespace idem::detail

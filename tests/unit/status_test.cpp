// Status and StatusOr: ok() is a question on both, value() on an error aborts loudly.
#include "idem/status.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace idem {
namespace {

TEST(Status, OkIsACheck) {
  EXPECT_TRUE(ok_status().ok());
  EXPECT_TRUE(Status().ok());
  const Status err = unavailable("down");
  EXPECT_FALSE(err.ok());
  EXPECT_FALSE(static_cast<bool>(err));
  EXPECT_EQ(err.to_string(), "UNAVAILABLE: down");
  EXPECT_EQ(ok_status().to_string(), "OK");
}

TEST(StatusOr, ValueOrGivesTheValueOrTheFallback) {
  StatusOr<std::string> good = std::string("v");
  StatusOr<std::string> bad = not_found("nothing here");
  EXPECT_EQ(good.value_or("fallback"), "v");
  EXPECT_EQ(bad.value_or("fallback"), "fallback");
  EXPECT_EQ(StatusOr<int>(7).value_or(1), 7);
  EXPECT_EQ(StatusOr<int>(internal_error("x")).value_or(1), 1);
  EXPECT_TRUE(good.status().ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
}

TEST(StatusOr, ValueOfAMoveOnlyTypeMovesOut) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(3);
  std::unique_ptr<int> taken = std::move(p).value();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, 3);
}

TEST(StatusOrDeathTest, ValueOnAnErrorAbortsWithTheStatus) {
  StatusOr<int> bad = unavailable("redis at 127.0.0.1:1 refused");
  EXPECT_DEATH((void)bad.value(), "StatusOr::value\\(\\) on an error: UNAVAILABLE: redis at 127.0.0.1:1 refused");
  EXPECT_DEATH((void)*bad, "UNAVAILABLE");
}

}  // namespace
}  // namespace idem
